"""The default store: one SQLite file (stdlib ``sqlite3``), and its async twin.

Design:

* WAL mode and a busy timeout, so readers never block the writer and
  several processes can share one database.
* One transaction per logical operation. An append runs under ``BEGIN
  IMMEDIATE`` and takes its seqs from the session's ``next_seq`` inside that
  transaction, so processes appending to one session get gap-free seqs.
* History is append-only: eviction saves the small session state (with an
  optimistic ``version``), it never updates message rows.
* ``load`` runs indexed range queries for the pinned messages and the window
  only; the archive is not read, so opening a 100k-message session costs what
  opening a 100-message one does.
* The SQL text and the migrations live in :mod:`convmem.stores.sqlite._sql`; driver
  errors become :class:`~convmem.errors.StoreError` in one place
  (:mod:`convmem.stores.sqlite._db`).

Example::

    store = SQLiteStore()                      # $CONVMEM_DB, or convmem.db in the user data dir
    memory = Memory(model="gpt-4o", store=store)
    ...
    memory = Memory.open("3f2a", store=SQLiteStore("~/chats.db"))
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ...errors import SessionNotFoundError
from ...messages import Message, StoredMessage
from ...session import LoadedSession, SessionState
from .._async import AsyncStoreWrapper
from .._common import (
    Segment,
    check_batch,
    check_deletable,
    json_object,
)
from .._writes import check_expected, replayed, scoped, state_for_write, unscoped
from ..codec import dumps, encode_datetime, encode_message, encode_state
from . import _sql as sql
from ._base import session_row, stamp, stored_ids, stored_row
from ._sessions import SQLiteSessions

__all__ = ["AsyncSQLiteStore", "SQLiteStore"]

_PAGE = 500  # rows per query when streaming a history
# INSERT_SESSION's columns after (id, user_id, title, model, metadata, created_at, updated_at) for a new session.
_NEW = (None, None, 0, 0, 0, 0, 0, dumps(encode_state(SessionState())), 0)


class SQLiteStore(SQLiteSessions):
    """A :class:`~convmem.stores.base.SessionStore` in one SQLite file.

    Args:
        path: the database file; default ``$CONVMEM_DB`` or ``convmem.db`` in the user data directory.
        timeout: seconds to wait for another process's write lock.
    """

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
        saved = state_for_write(state, expected_version)
        # Encode before taking the write lock: the lock is held for the checks and the inserts only.
        encoded = [
            (
                m.id or "",
                m.role,
                dumps(encode_message(m)),
                t,
                encode_datetime(m.created_at) if m.created_at is not None else None,
            )
            for m, t in messages
        ]
        key = scoped(user_id, session_id)
        with self.db.transaction(write=True) as conn:
            row = session_row(conn, key)
            found = (row.next_seq, row.version) if row is not None and not row.deleted else None
            check_expected(session_id, found, expected_seq, expected_version)
            if row is not None and row.deleted:
                raise SessionNotFoundError(session_id)  # hidden while its forks live; its id stays taken
            if row is not None:
                stored = stored_ids(conn, self._segments(conn, row), [e[0] for e in encoded])
                again = replayed(session_id, messages, stored)
                if again is not None:
                    return again
            when = stamp()
            if row is None:
                conn.execute(sql.INSERT_SESSION, (key, user_id, None, model, "{}", when, when, *_NEW))
            start = row.next_seq if row is not None else 0
            seqs = list(range(start, start + len(encoded)))
            conn.executemany(sql.INSERT_MESSAGE, [(key, seq, *e) for seq, e in zip(seqs, encoded, strict=True)])
            counters = (start + len(seqs), len(seqs), sum(e[3] for e in encoded), when)
            if saved is None:
                conn.execute(sql.AFTER_APPEND, (*counters, key))
            else:
                conn.execute(sql.AFTER_APPEND_WITH_STATE, (*counters, dumps(encode_state(saved)), saved.version, key))
        return seqs

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        with self.db.transaction(write=False) as conn:
            row = self._resolve(conn, session_id, user_id)
            state = row.state_of()
            segs = self._segments(conn, row)
            pinned = self._read(conn, segs, sql.PINNED, state.pinned_start)
            window = self._read(conn, segs, sql.UNPINNED_RANGE, state.window_start)
            unfolded: list[StoredMessage] = []
            if unfolded_limit and state.window_start > state.folded_to + 1:
                for seg in reversed(segs):  # newest first, stopping at the limit
                    span = seg.clip(state.folded_to + 1, state.window_start - 1)
                    if span is not None and len(unfolded) < unfolded_limit:
                        query = (seg.session_id, *span, unfolded_limit - len(unfolded))
                        unfolded += [
                            stored_row(seg.session_id, r) for r in conn.execute(sql.UNPINNED_TAIL, query).fetchall()
                        ]
                unfolded.reverse()
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return LoadedSession(row.info(), state, pinned, window, unfolded, row.next_seq)

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        saved = replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
        with self.db.transaction(write=True) as conn:
            row = self._resolve(conn, session_id, user_id)
            check_expected(row.name, (row.next_seq, row.version), None, expected_version)
            conn.execute(sql.SAVE_STATE, (dumps(encode_state(saved)), stamp(), row.id, expected_version))
        return saved

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        with self.db.transaction(write=False) as conn:
            segs = self._segments(conn, self._resolve(conn, session_id, user_id))
        return self._pages(segs, from_seq, to_seq)

    def _pages(self, segs: list[Segment], lo: int, hi: int | None) -> Iterator[StoredMessage]:
        # Page by seq in short read transactions: a caller that iterates slowly holds no
        # transaction open, so it never blocks a WAL checkpoint.
        for seg in segs:
            span = seg.clip(lo, hi)
            while span is not None:
                with self.db.transaction(write=False) as conn:
                    rows = conn.execute(sql.RANGE_PAGE, (seg.session_id, *span, _PAGE)).fetchall()
                yield from (stored_row(seg.session_id, r) for r in rows)
                span = (rows[-1][0] + 1, span[1]) if len(rows) == _PAGE else None

    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        with self.db.transaction(write=True) as conn:
            row = self._resolve(conn, session_id, user_id)
            check_expected(row.name, (row.next_seq, row.version), expected_seq, None)
            forks = [(unscoped(child), at) for child, at in conn.execute(sql.CHILDREN, (row.id,))]
            check_deletable(row.name, set(seqs), row.fork_seq, forks)
            count = tokens = 0
            for seq in sorted(set(seqs)):
                found = conn.execute(sql.TOKENS_OF, (row.id, seq)).fetchone()
                if found is not None:
                    conn.execute(sql.DELETE_MESSAGE, (row.id, seq))
                    count, tokens = count + 1, tokens + found[1]
            conn.execute(sql.AFTER_DELETE, (count, tokens, stamp(), row.id))


class AsyncSQLiteStore(AsyncStoreWrapper[SQLiteStore]):
    """The async twin of :class:`SQLiteStore`: the same store and SQL, each call run in a worker thread."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        super().__init__(SQLiteStore(path, timeout=timeout))
        self.path = self.sync.path
