"""What the PostgreSQL and Redis stores share: the store API over a backend's operations.

A server backend writes each operation once, as an I/O-free flow factory
(:mod:`convmem.stores.postgres._ops`, :mod:`convmem.stores.redis._ops` and
their ``_sessions`` halves), and lists them in an :class:`Operations`.
:class:`ServerStore` runs them on a sync driver, :class:`AsyncServerStore`
awaits them on an async one: every method of the contract is written here,
once per twin, and a backend adds only its settings and its extras.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from ..messages import StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState
from ._record import Segment
from ._writes import ids_checked, written_state
from .base import AppendRequest

__all__ = ["AsyncServerStore", "Operations", "ServerStore"]

T = TypeVar("T")
OpFactory = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Operations:
    """One backend's operations: each factory takes the method's arguments in order and returns an op.

    ``append`` takes the request and the state as it will be stored (:func:`~convmem.stores._writes.written_state`).
    """

    append: OpFactory
    load: OpFactory
    save_state: OpFactory
    segments_of: OpFactory
    page: OpFactory
    delete_messages: OpFactory
    get_session: OpFactory
    list_sessions: OpFactory
    update_session: OpFactory
    delete_session: OpFactory
    expire: OpFactory
    fork: OpFactory
    export_jsonl: OpFactory
    import_jsonl: OpFactory
    page_size: int


class _SyncDriver(Protocol):
    def run(self, op: Any) -> Any: ...

    def close(self) -> None: ...


class _AsyncDriver(Protocol):
    async def run(self, op: Any) -> Any: ...

    async def close(self) -> None: ...


@ids_checked
class ServerStore:
    """A :class:`~convmem.stores.base.SessionStore` whose every method runs one of its backend's operations."""

    ops: Operations
    db: _SyncDriver
    rows_read: int  # rows returned by load(); lets the conformance suite see load skip the archive

    def append(self, request: AppendRequest) -> list[int]:
        saved = written_state(request)
        if not request.messages:
            return []  # a session is created by its first message, not by an empty batch
        seqs: list[int] = self.db.run(self.ops.append(request, saved))
        return seqs

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded: LoadedSession = self.db.run(self.ops.load(session_id, user_id, unfolded_limit))
        self.rows_read += len(loaded.pinned) + len(loaded.window) + len(loaded.unfolded)
        return loaded

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        saved: SessionState = self.db.run(self.ops.save_state(session_id, state, expected_version, user_id))
        return saved

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        segs, last = self.db.run(self.ops.segments_of(session_id, user_id, to_seq))
        return self._pages(segs, from_seq, last)

    def _pages(self, segs: list[Segment], lo: int, hi: int) -> Iterator[StoredMessage]:
        # One short request per page: a caller that iterates slowly holds no connection.
        while lo <= hi:
            rows: list[StoredMessage] = self.db.run(self.ops.page(segs, lo, hi))
            yield from rows
            if len(rows) < self.ops.page_size:
                return
            lo = rows[-1].seq + 1

    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        self.db.run(self.ops.delete_messages(session_id, seqs, user_id, expected_seq))

    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = self.db.run(self.ops.get_session(session_id, user_id))
        return info

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        infos: list[SessionInfo] = self.db.run(self.ops.list_sessions(user_id, limit))
        return infos

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        info: SessionInfo = self.db.run(self.ops.update_session(session_id, user_id, title, metadata))
        return info

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self.db.run(self.ops.delete_session(session_id, user_id))

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        ids: list[str] = self.db.run(self.ops.expire(older_than, user_id))
        return ids

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = self.db.run(self.ops.fork(session_id, at_seq, user_id))
        return info

    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        data: bytes = self.db.run(self.ops.export_jsonl(session_id, user_id))
        return data

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = self.db.run(self.ops.import_jsonl(data, user_id))
        return info

    def close(self) -> None:
        self.db.close()


@ids_checked
class AsyncServerStore:
    """The async twin of :class:`ServerStore`: the same operations, awaited."""

    ops: Operations
    db: _AsyncDriver
    rows_read: int

    async def append(self, request: AppendRequest) -> list[int]:
        saved = written_state(request)
        if not request.messages:
            return []
        seqs: list[int] = await self.db.run(self.ops.append(request, saved))
        return seqs

    async def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded: LoadedSession = await self.db.run(self.ops.load(session_id, user_id, unfolded_limit))
        self.rows_read += len(loaded.pinned) + len(loaded.window) + len(loaded.unfolded)
        return loaded

    async def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        saved: SessionState = await self.db.run(self.ops.save_state(session_id, state, expected_version, user_id))
        return saved

    async def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> list[StoredMessage]:
        segs, hi = await self.db.run(self.ops.segments_of(session_id, user_id, to_seq))
        out: list[StoredMessage] = []
        lo = from_seq
        while lo <= hi:
            rows: list[StoredMessage] = await self.db.run(self.ops.page(segs, lo, hi))
            out += rows
            if len(rows) < self.ops.page_size:
                break
            lo = rows[-1].seq + 1
        return out

    async def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        await self.db.run(self.ops.delete_messages(session_id, seqs, user_id, expected_seq))

    async def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = await self.db.run(self.ops.get_session(session_id, user_id))
        return info

    async def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        infos: list[SessionInfo] = await self.db.run(self.ops.list_sessions(user_id, limit))
        return infos

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        info: SessionInfo = await self.db.run(self.ops.update_session(session_id, user_id, title, metadata))
        return info

    async def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        await self.db.run(self.ops.delete_session(session_id, user_id))

    async def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        ids: list[str] = await self.db.run(self.ops.expire(older_than, user_id))
        return ids

    async def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = await self.db.run(self.ops.fork(session_id, at_seq, user_id))
        return info

    async def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        data: bytes = await self.db.run(self.ops.export_jsonl(session_id, user_id))
        return data

    async def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = await self.db.run(self.ops.import_jsonl(data, user_id))
        return info

    async def aclose(self) -> None:
        await self.db.close()
