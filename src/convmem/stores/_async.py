"""The async twins of the built-in stores: one wrapper that offloads the sync store's calls.

The sync stores hold all the logic, long-term memory included (``facts()``,
``blocks()``, ``recall()`` give the sync store's) (and the SQLite twins share their SQL by
sharing the store itself), so the async side cannot drift from it. Each call
runs in a worker thread, so a slow disk never blocks the event loop; the in-memory
store opts out of the thread hop because it never blocks.

Example::

    store = AsyncSQLiteStore("chat.db")
    memory = await AsyncMemory.open("3f2a", store=store)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from ..messages import StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState
from .base import AppendRequest, LongTermStores, SessionStore

if TYPE_CHECKING:
    from ..longterm.blocks.store import BlockStore
    from ..longterm.facts.model import AsyncFactStore
    from ..longterm.recall.store import RecallStore

__all__ = ["AsyncStoreWrapper"]

P = ParamSpec("P")
T = TypeVar("T")


class _Wrapped(SessionStore, LongTermStores, Protocol):
    """What the async twins wrap: a built-in sync store, with its long-term memory."""


S = TypeVar("S", bound=_Wrapped)


class AsyncStoreWrapper(Generic[S]):
    """Implements :class:`~convmem.stores.base.AsyncSessionStore` over a sync store (``self.sync``)."""

    offload = True

    def __init__(self, sync: S) -> None:
        self.sync: S = sync

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.offload:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    async def append(self, request: AppendRequest) -> list[int]:
        return await self._run(self.sync.append, request)

    async def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        return await self._run(self.sync.load, session_id, user_id=user_id, unfolded_limit=unfolded_limit)

    async def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        return await self._run(
            self.sync.save_state, session_id, state, expected_version=expected_version, user_id=user_id
        )

    async def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> list[StoredMessage]:
        def read() -> list[StoredMessage]:
            return list(self.sync.messages(session_id, user_id=user_id, from_seq=from_seq, to_seq=to_seq))

        return await self._run(read)

    async def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        await self._run(self.sync.delete_messages, session_id, seqs, user_id=user_id, expected_seq=expected_seq)

    async def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        return await self._run(self.sync.get_session, session_id, user_id=user_id)

    async def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        return await self._run(self.sync.list_sessions, user_id=user_id, limit=limit)

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        return await self._run(self.sync.update_session, session_id, user_id=user_id, title=title, metadata=metadata)

    async def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        await self._run(self.sync.delete_session, session_id, user_id=user_id)

    async def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        return await self._run(self.sync.expire, older_than, user_id=user_id)

    async def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        return await self._run(self.sync.fork, session_id, at_seq, user_id=user_id)

    async def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        return await self._run(self.sync.export_jsonl, session_id, user_id=user_id)

    async def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        return await self._run(self.sync.import_jsonl, data, user_id=user_id)

    # -- long-term memory: the sync store's, over the same database ------------------------
    def facts(self) -> AsyncFactStore:
        """The sync store's facts, each call run like the store's own (in a worker thread unless it never blocks)."""
        from ..longterm.facts.store import AsyncFactStoreWrapper

        return AsyncFactStoreWrapper(self.sync.facts(), offload=self.offload)

    def blocks(self) -> BlockStore:
        """The sync store's working blocks (blocks have a sync contract only: see :mod:`convmem.stores.base`)."""
        return self.sync.blocks()

    def recall(self) -> RecallStore:
        """The sync store's recall documents (recall has a sync contract only: see :mod:`convmem.stores.base`)."""
        return self.sync.recall()

    async def aclose(self) -> None:
        await self._run(self.sync.close)
