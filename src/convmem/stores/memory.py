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
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..longterm.blocks.store import MemoryBlockStore
from ..longterm.facts.store import MemoryFactStore
from ..messages import PINNED_ROLES, StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState
from ._async import AsyncStoreWrapper
from ._export import export_session, parse_export
from ._forget import ForgetReceipt
from ._memory_data import BACKEND, SessionData
from ._record import Segment, segments
from ._writes import (
    admit,
    check_deletable,
    check_expected,
    check_fork,
    fork_home,
    fork_record,
    ids_checked,
    json_object,
    new_session_id,
    now,
    pick,
    replayed,
    saved_state,
    taken,
    unfolded_span,
    written_state,
)
from .base import AppendRequest

if TYPE_CHECKING:
    from ._memory_recall import MemoryRecallStore

__all__ = ["AsyncMemoryStore", "MemoryStore"]


@ids_checked
class MemoryStore:
    """A thread-safe store that lives in this process."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str | None, str], SessionData] = {}  # (user, session id) -> session
        self._lock = threading.RLock()
        self.rows_read = 0  # rows returned by load(); lets the conformance suite see load skip the archive
        self._facts = MemoryFactStore()
        self._blocks = MemoryBlockStore()
        self._recall: MemoryRecallStore | None = None  # made on first use: it needs numpy

    # -- lookup ----------------------------------------------------------------------------
    def _session(self, session_id: str, user_id: str | None) -> SessionData:
        session = self._sessions.get((user_id, session_id))
        if session is not None and not session.deleted:
            return session
        live = (s.id for (u, _), s in self._sessions.items() if u == user_id and not s.deleted)
        return self._sessions[(user_id, pick(session_id, (i for i in live if i.startswith(session_id))))]

    def _chain(self, session: SessionData) -> list[SessionData]:
        """The session and its ancestors, nearest first."""
        chain = [session]
        while chain[-1].parent_id is not None:
            chain.append(self._sessions[(session.user_id, chain[-1].parent_id)])
        return chain

    def _segments(self, session: SessionData) -> list[Segment]:
        return segments([(s.id, s.fork_seq) for s in self._chain(session)])

    def _read(self, session: SessionData, lo: int, hi: int | None, *, pinned: bool = False) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        for seg in self._segments(session):
            span = seg.clip(lo, hi)
            if span is not None:
                holder = self._sessions[(session.user_id, seg.session_id)]
                out += (holder.pinned if pinned else holder.all).between(*span)
        return out

    def _stored(self, session: SessionData, ids: Sequence[str]) -> dict[str, StoredMessage]:
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
            return self._session(session_id, user_id).record().info()

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        with self._lock:
            found = sorted(
                (s for s in self._sessions.values() if s.user_id == user_id and not s.deleted),
                key=lambda s: (s.updated_at, s.id),
                reverse=True,
            )
            return [s.record().info() for s in found[:limit]]

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
            return session.record().info()

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        with self._lock:
            self._remove(self._session(session_id, user_id))

    def _remove(self, session: SessionData) -> None:
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

    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase the user, or the session with its forks (see :mod:`convmem.stores._forget`)."""
        from ._memory_forget import erase

        with self._lock:
            counts, erased = erase(self, user_id, session_id)
        return ForgetReceipt(user_id, session_id, counts, tuple(erased), compacted=compact)

    def compact(self) -> None:
        """Nothing to do: nothing of this store is on disk."""

    def _forget(self, session: SessionData, row: StoredMessage) -> None:
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
            check_fork(source.id, source.next_seq, at_seq)
            shared = self._read(source, 0, at_seq)
            chain = self._chain(source)
            parent = chain[fork_home([(s.id, s.fork_seq) for s in chain], at_seq)]
            fork_id = new_session_id()
            record = fork_record(
                source.record(),
                at_seq,
                key=fork_id,
                session_id=fork_id,
                parent=(parent.id, parent.id),
                shared=(len(shared), sum(r.tokens for r in shared)),
                when=now(),
            )
            fork = self._sessions[(user_id, fork_id)] = SessionData.of(record)
            parent.children.add(fork.id)
            return record.info()

    # -- messages --------------------------------------------------------------------------
    def append(self, request: AppendRequest) -> list[int]:
        saved = written_state(request)
        messages, user_id, session_id = request.messages, request.user_id, request.session_id
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        with self._lock:
            session = self._sessions.get((user_id, session_id))
            if session is None or session.deleted:
                admit(request, None, deleted=session is not None)
            else:
                admit(request, (session.next_seq, session.state.version))
            held = session is not None and session.parent_id is not None
            if session is not None and not held:
                ids = session.ids
                for message, _ in messages:  # a loop, not any(genexpr): this runs on every append
                    if message.id in ids:
                        held = True
                        break
            if held:
                assert session is not None
                again = replayed(session_id, messages, self._stored(session, [m.id or "" for m, _ in messages]))
                if again is not None:
                    return again
            stamp = now()
            if session is None:
                session = SessionData(session_id, user_id, request.model, stamp, stamp)
                self._sessions[(user_id, session_id)] = session
            seqs = list(range(session.next_seq, session.next_seq + len(messages)))
            for seq, (message, tokens) in zip(seqs, messages, strict=True):
                session.add(StoredMessage(seq, message, tokens))
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
            span = unfolded_span(state, unfolded_limit)
            if span is not None:
                rows = [r for r in self._read(session, *span) if r.message.role not in PINNED_ROLES]
                unfolded = rows[-unfolded_limit:]
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return session.record().loaded(state, pinned, window, unfolded)

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        with self._lock:
            session = self._session(session_id, user_id)
            check_expected(session.id, (session.next_seq, session.state.version), None, expected_version)
            session.state = saved_state(state, expected_version)
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
            return export_session(session.record(), self._read(session, 0, None))

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        with self._lock:
            if (user_id, parsed.id) in self._sessions:
                raise taken(parsed.id)
            record = parsed.record(BACKEND, parsed.id, user_id)
            session = SessionData.of(record)
            for row in parsed.rows:
                session.add(row)
            self._sessions[(user_id, session.id)] = session
            return record.info()

    # -- long-term memory ------------------------------------------------------------------
    def facts(self) -> MemoryFactStore:
        """The store's facts, in this process: the same fact store on every call."""
        return self._facts

    def blocks(self) -> MemoryBlockStore:
        """The store's working blocks, in this process: the same block store on every call."""
        return self._blocks

    def recall(self) -> MemoryRecallStore:
        """The store's recall documents, in this process (needs the ``recall`` extra)."""
        from ._memory_recall import MemoryRecallStore

        with self._lock:
            if self._recall is None:
                self._recall = MemoryRecallStore()
            return self._recall

    def close(self) -> None:
        """Nothing to release; the data lives as long as the object."""


class AsyncMemoryStore(AsyncStoreWrapper[MemoryStore]):
    """The async twin of :class:`MemoryStore`; it shares (or wraps) a sync one and never blocks."""

    offload = False  # dict operations never block the event loop

    def __init__(self, store: MemoryStore | None = None) -> None:
        super().__init__(store if store is not None else MemoryStore())
