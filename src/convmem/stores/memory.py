"""The in-memory reference store, and its async twin.

It keeps everything in Python dicts and lists, behaves exactly as the
contract in :mod:`convmem.stores.base` says, and is what ``Memory()`` uses when
no store is given. It is the reference the conformance suite is checked
against, so it favours plainness over speed, except that ``append`` and
``load`` stay proportional to the batch and the window (sorted seq lists and
a separate list of pinned rows), like the persistent backends.

Example::

    store = MemoryStore()
    memory = Memory(model="gpt-4o", store=store, session_id="s1")
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ..errors import SessionNotFoundError, StoreError
from ..messages import PINNED_ROLES, Message, StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState
from ._async import AsyncStoreWrapper
from ._common import (
    Segment,
    check_batch,
    check_deletable,
    export_header,
    export_line,
    fork_state,
    json_object,
    new_session_id,
    now,
    parse_export,
    pick,
    segments,
)
from ._writes import check_expected, replayed, state_for_write

__all__ = ["AsyncMemoryStore", "MemoryStore"]


@dataclass(eq=False)
class _Rows:
    """Sorted rows and their seqs, so that ranges are found by bisection."""

    seqs: list[int] = field(default_factory=list)
    rows: list[StoredMessage] = field(default_factory=list)

    def add(self, row: StoredMessage) -> None:
        self.seqs.append(row.seq)
        self.rows.append(row)

    def between(self, lo: int, hi: int) -> list[StoredMessage]:
        return self.rows[bisect_left(self.seqs, lo) : bisect_right(self.seqs, hi)]

    def drop(self, doomed: set[int]) -> list[StoredMessage]:
        gone = [r for r in self.rows if r.seq in doomed]
        self.rows = [r for r in self.rows if r.seq not in doomed]
        self.seqs = [r.seq for r in self.rows]
        return gone


@dataclass(eq=False)
class _Session:
    id: str
    user_id: str | None
    model: str | None
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    fork_seq: int | None = None
    base_count: int = 0
    base_tokens: int = 0
    all: _Rows = field(default_factory=_Rows)
    pinned: _Rows = field(default_factory=_Rows)
    next_seq: int = 0
    tokens: int = 0
    state: SessionState = field(default_factory=SessionState)
    deleted: bool = False  # hidden; rows kept only while forks share them
    children: set[str] = field(default_factory=set)
    ids: dict[str, int] = field(default_factory=dict)  # message id -> seq, of the session's own rows

    def info(self) -> SessionInfo:
        return SessionInfo(
            self.id,
            self.user_id,
            self.title,
            self.model,
            dict(self.metadata),
            self.created_at,
            self.updated_at,
            self.base_count + len(self.all.rows),
            self.base_tokens + self.tokens,
            self.parent_id,
            self.fork_seq,
        )


class MemoryStore:
    """A thread-safe store that lives in this process."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str | None, str], _Session] = {}  # (user, session id) -> session
        self._lock = threading.RLock()
        self.rows_read = 0  # rows returned by load(); lets the conformance suite see load skip the archive

    # -- lookup ----------------------------------------------------------------------------
    def _session(self, session_id: str, user_id: str | None) -> _Session:
        session = self._sessions.get((user_id, session_id))
        if session is not None and not session.deleted:
            return session
        live = (s.id for (u, _), s in self._sessions.items() if u == user_id and not s.deleted)
        return self._sessions[(user_id, pick(session_id, (i for i in live if i.startswith(session_id))))]

    def _segments(self, session: _Session) -> list[Segment]:
        chain: list[tuple[str, int | None]] = []
        node: _Session | None = session
        while node is not None:
            chain.append((node.id, node.fork_seq))
            node = self._sessions[(node.user_id, node.parent_id)] if node.parent_id is not None else None
        return segments(chain)

    def _read(self, session: _Session, lo: int, hi: int | None, *, pinned: bool = False) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        for seg in self._segments(session):
            span = seg.clip(lo, hi)
            if span is not None:
                holder = self._sessions[(session.user_id, seg.session_id)]
                out += (holder.pinned if pinned else holder.all).between(*span)
        return out

    def _stored(self, session: _Session, ids: Sequence[str]) -> dict[str, StoredMessage]:
        """The rows of the session's history (shared history included) that hold any of ``ids``."""
        found: dict[str, StoredMessage] = {}
        if session.parent_id is None:  # the common case: no shared history
            for message_id in ids:
                seq = session.ids.get(message_id)
                if seq is not None:
                    found[message_id] = session.all.between(seq, seq)[0]
            return found
        for seg in self._segments(session):
            holder = self._sessions[(session.user_id, seg.session_id)]
            for message_id in ids:
                seq = holder.ids.get(message_id)
                if seq is not None and seg.lo <= seq <= seg.hi:
                    found[message_id] = holder.all.between(seq, seq)[0]
        return found

    # -- sessions --------------------------------------------------------------------------
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        with self._lock:
            return self._session(session_id, user_id).info()

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        with self._lock:
            found = sorted(
                (s for s in self._sessions.values() if s.user_id == user_id and not s.deleted),
                key=lambda s: (s.updated_at, s.id),
                reverse=True,
            )
            return [s.info() for s in found[:limit]]

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        with self._lock:
            session = self._session(session_id, user_id)
            if metadata is not None:
                session.metadata = json_object(metadata)
            if title is not None:
                session.title = title
            session.updated_at = now()
            return session.info()

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        with self._lock:
            self._remove(self._session(session_id, user_id))

    def _remove(self, session: _Session) -> None:
        if session.children:
            # Forks still read this history: hide the session and keep only the shared rows.
            session.deleted = True
            keep = max(self._sessions[(session.user_id, c)].fork_seq or 0 for c in session.children)
            for row in session.all.drop({s for s in session.all.seqs if s > keep}):
                self._forget(session, row)
            return
        del self._sessions[(session.user_id, session.id)]
        if session.parent_id is not None:
            parent = self._sessions[(session.user_id, session.parent_id)]
            parent.children.discard(session.id)
            if parent.deleted:
                self._remove(parent)

    def _forget(self, session: _Session, row: StoredMessage) -> None:
        session.tokens -= row.tokens
        session.pinned.drop({row.seq})
        session.ids.pop(row.message.id or "", None)

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        cutoff = now() - older_than
        with self._lock:
            doomed = sorted(
                s.id
                for s in self._sessions.values()
                if s.user_id == user_id and not s.deleted and s.updated_at < cutoff
            )
            for session_id in doomed:
                self._remove(self._sessions[(user_id, session_id)])
            return doomed

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        with self._lock:
            source = self._session(session_id, user_id)
            if not 0 <= at_seq < source.next_seq:
                raise StoreError(
                    f"cannot fork session {source.id!r} at seq {at_seq}: its seqs run from 0 to {source.next_seq - 1}"
                )
            shared = self._read(source, 0, at_seq)
            parent = source
            while parent.fork_seq is not None and parent.parent_id is not None and at_seq <= parent.fork_seq:
                parent = self._sessions[(user_id, parent.parent_id)]  # branch where the history really lives
            stamp = now()
            fork = _Session(
                new_session_id(),
                user_id,
                source.model,
                stamp,
                stamp,
                source.title,
                dict(source.metadata),
                parent.id,
                at_seq,
                len(shared),
                sum(r.tokens for r in shared),
                next_seq=at_seq + 1,
                state=fork_state(source.state, at_seq, messages=len(shared)),
            )
            self._sessions[(user_id, fork.id)] = fork
            parent.children.add(fork.id)
            return fork.info()

    # -- messages --------------------------------------------------------------------------
    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
        expected_seq: int | None = None,
        expected_version: int | None = None,
        state: SessionState | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        saved = None if state is None else state_for_write(state, expected_version)
        with self._lock:
            session = self._sessions.get((user_id, session_id))
            found = (session.next_seq, session.state.version) if session is not None and not session.deleted else None
            if found is None or found != (expected_seq, expected_version):  # the writer's view, in one compare
                check_expected(session_id, found, expected_seq, expected_version)
            if session is not None and session.deleted:
                raise SessionNotFoundError(session_id)  # hidden while its forks live; its id stays taken
            if session is not None and (session.parent_id is not None or any(m.id in session.ids for m, _ in messages)):
                again = replayed(session_id, messages, self._stored(session, [m.id or "" for m, _ in messages]))
                if again is not None:
                    return again
            stamp = now()
            if session is None:
                session = self._sessions[(user_id, session_id)] = _Session(session_id, user_id, model, stamp, stamp)
            seqs = list(range(session.next_seq, session.next_seq + len(messages)))
            for seq, (message, tokens) in zip(seqs, messages, strict=True):
                row = StoredMessage(seq, message, tokens)
                session.all.add(row)
                if message.role in PINNED_ROLES:
                    session.pinned.add(row)
                session.tokens += tokens
                session.ids[message.id or ""] = seq
            session.next_seq += len(messages)
            session.updated_at = stamp
            if saved is not None:
                session.state = saved
            return seqs

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        with self._lock:
            session = self._session(session_id, user_id)
            state = session.state
            pinned = self._read(session, state.pinned_start, None, pinned=True)
            window = [r for r in self._read(session, state.window_start, None) if r.message.role not in PINNED_ROLES]
            unfolded: list[StoredMessage] = []
            if unfolded_limit and state.window_start > state.folded_to + 1:
                candidates = self._read(session, state.folded_to + 1, state.window_start - 1)
                unfolded = [r for r in candidates if r.message.role not in PINNED_ROLES][-unfolded_limit:]
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return LoadedSession(session.info(), state, pinned, window, unfolded, session.next_seq)

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        with self._lock:
            session = self._session(session_id, user_id)
            check_expected(session.id, (session.next_seq, session.state.version), None, expected_version)
            session.state = replace(
                state, stats=json_object(state.stats, "session stats"), version=expected_version + 1
            )
            session.updated_at = now()
            return session.state

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        with self._lock:
            rows = self._read(self._session(session_id, user_id), from_seq, to_seq)
        return iter(rows)

    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        with self._lock:
            session = self._session(session_id, user_id)
            check_expected(session.id, (session.next_seq, session.state.version), expected_seq, None)
            doomed = set(seqs)
            forks = [(c, self._sessions[(user_id, c)].fork_seq or 0) for c in session.children]
            check_deletable(session.id, doomed, session.fork_seq, forks)
            for row in session.all.drop(doomed):
                self._forget(session, row)
            session.updated_at = now()

    # -- export / import -------------------------------------------------------------------
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self._lock:
            session = self._session(session_id, user_id)
            rows = self._read(session, 0, None)
            return b"".join([export_header(session.info(), session.state, session.next_seq), *map(export_line, rows)])

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        with self._lock:
            if (user_id, parsed.id) in self._sessions:
                raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported")
            session = _Session(
                parsed.id,
                user_id,
                parsed.model,
                parsed.created_at,
                parsed.updated_at,
                parsed.title,
                dict(parsed.metadata),
                next_seq=parsed.next_seq,
                state=parsed.state,
            )
            for row in parsed.rows:
                session.all.add(row)
                if row.message.role in PINNED_ROLES:
                    session.pinned.add(row)
                session.tokens += row.tokens
                session.ids[row.message.id or ""] = row.seq
            self._sessions[(user_id, session.id)] = session
            return session.info()

    def close(self) -> None:
        """Nothing to release; the data lives as long as the object."""


class AsyncMemoryStore(AsyncStoreWrapper[MemoryStore]):
    """The async twin of :class:`MemoryStore`; it shares (or wraps) a sync one and never blocks."""

    offload = False  # dict operations never block the event loop

    def __init__(self, store: MemoryStore | None = None) -> None:
        super().__init__(store if store is not None else MemoryStore())
