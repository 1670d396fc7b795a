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
* The SQL text and the migrations live in :mod:`convmem.stores._sql`; driver
  errors become :class:`~convmem.errors.StoreError` in one place
  (:mod:`convmem.stores._sqlite_db`).

Example::

    store = SQLiteStore()                      # $CONVMEM_DB, or convmem.db in the user data dir
    memory = Memory(model="gpt-4o", store=store)
    ...
    memory = Memory.open("3f2a", store=SQLiteStore("~/chats.db"))
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, NamedTuple

from ..errors import ConflictError, InvalidMessageError, SessionNotFoundError, StoreError
from ..messages import Message
from . import _sql as sql
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
from ._sqlite_db import Database
from .base import LoadedSession, SessionInfo, SessionState, StoredMessage
from .codec import decode_datetime, decode_message, decode_state, dumps, encode_datetime, encode_message, encode_state
from .codec import loads as json_loads

__all__ = ["AsyncSQLiteStore", "SQLiteStore"]

_PAGE = 500  # rows per query when streaming a history
_LAST = 2**62


class _Row(NamedTuple):
    id: str
    user_id: str | None
    title: str | None
    model: str | None
    metadata: str
    created_at: str
    updated_at: str
    parent_id: str | None
    fork_seq: int | None
    base_count: int
    base_tokens: int
    message_count: int
    tokens: int
    next_seq: int
    state: str
    version: int
    deleted: int

    def info(self) -> SessionInfo:
        return SessionInfo(
            self.id,
            self.user_id,
            self.title,
            self.model,
            json_loads(self.metadata),
            decode_datetime(self.created_at),
            decode_datetime(self.updated_at),
            self.base_count + self.message_count,
            self.base_tokens + self.tokens,
            self.parent_id,
            self.fork_seq,
        )


def _session(conn: sqlite3.Connection, session_id: str) -> _Row | None:
    row = conn.execute(sql.SELECT_SESSION, (session_id,)).fetchone()
    return _Row(*row) if row is not None else None


def _stored(row: tuple[int, str, int]) -> StoredMessage:
    return StoredMessage(row[0], decode_message(json_loads(row[1])), row[2])


def _stamp() -> str:
    return encode_datetime(now())


def _existing_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), 500):  # stay under SQLite's limit on bound parameters
        chunk = ids[start : start + 500]
        query = sql.EXISTING_IDS.format(marks=", ".join("?" * len(chunk)))
        found.update(i for (i,) in conn.execute(query, chunk))
    return found


class SQLiteStore:
    """A :class:`~convmem.stores.base.SessionStore` in one SQLite file.

    Args:
        path: the database file; default ``$CONVMEM_DB`` or ``convmem.db`` in the user data directory.
        timeout: seconds to wait for another process's write lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        self.db = Database(path, timeout=timeout)
        self.path = self.db.path
        self.rows_read = 0  # rows decoded by load(); shows (and lets tests check) that it skips the archive

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # -- lookup ----------------------------------------------------------------------------
    def _resolve(self, conn: sqlite3.Connection, session_id: str, user_id: str | None) -> _Row:
        row = _session(conn, session_id)
        if row is not None and row.user_id == user_id and not row.deleted:
            return row
        ids = [i for (i,) in conn.execute(sql.SELECT_BY_PREFIX, (session_id, user_id))]
        found = _session(conn, pick(session_id, ids))
        assert found is not None  # picked from the same snapshot
        return found

    def _segments(self, conn: sqlite3.Connection, row: _Row) -> list[Segment]:
        chain: list[tuple[str, int | None]] = [(row.id, row.fork_seq)]
        parent_id = row.parent_id
        while parent_id is not None:
            parent = _session(conn, parent_id)
            assert parent is not None  # a parent with forks is only ever hidden, never removed
            chain.append((parent.id, parent.fork_seq))
            parent_id = parent.parent_id
        return segments(chain)

    def _read(
        self, conn: sqlite3.Connection, segs: list[Segment], query: str, lo: int, hi: int | None = None
    ) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        for seg in segs:
            span = seg.clip(lo, hi)
            if span is not None:
                out += map(_stored, conn.execute(query, (seg.session_id, *span)))
        return out

    # -- sessions --------------------------------------------------------------------------
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        with self.db.transaction(write=False) as conn:
            return self._resolve(conn, session_id, user_id).info()

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        with self.db.transaction(write=False) as conn:
            rows = conn.execute(sql.LIST_SESSIONS, (user_id, -1 if limit is None else limit)).fetchall()
        return [_Row(*row).info() for row in rows]

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        encoded = dumps(json_object(metadata)) if metadata is not None else None
        with self.db.transaction(write=True) as conn:
            row = self._resolve(conn, session_id, user_id)
            conn.execute(sql.UPDATE_SESSION, (title, encoded, _stamp(), row.id))
            return self._resolve(conn, row.id, user_id).info()

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        with self.db.transaction(write=True) as conn:
            self._remove(conn, self._resolve(conn, session_id, user_id))

    def _remove(self, conn: sqlite3.Connection, row: _Row) -> None:
        children = conn.execute(sql.CHILDREN, (row.id,)).fetchall()
        if children:
            # Forks still read this history: hide the session and keep only the rows they share.
            keep = max(fork_seq for _, fork_seq in children)
            count, tokens = conn.execute(sql.COUNT_RANGE, (row.id, keep + 1, _LAST)).fetchone()
            conn.execute(sql.DELETE_AFTER, (row.id, keep))
            conn.execute(sql.AFTER_DELETE, (count, tokens, row.updated_at, row.id))
            conn.execute(sql.TOMBSTONE, (row.id,))
            return
        conn.execute(sql.DELETE_ALL, (row.id,))
        conn.execute(sql.DELETE_SESSION, (row.id,))
        if row.parent_id is not None:
            parent = _session(conn, row.parent_id)
            if parent is not None and parent.deleted:
                self._remove(conn, parent)

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        cutoff = encode_datetime(now() - older_than)
        with self.db.transaction(write=True) as conn:
            doomed = [i for (i,) in conn.execute(sql.EXPIRED, (user_id, cutoff))]
            for session_id in doomed:
                row = _session(conn, session_id)
                assert row is not None
                self._remove(conn, row)
        return doomed

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        with self.db.transaction(write=True) as conn:
            source = self._resolve(conn, session_id, user_id)
            if not 0 <= at_seq < source.next_seq:
                raise StoreError(
                    f"cannot fork session {source.id!r} at seq {at_seq}: its seqs run from 0 to {source.next_seq - 1}"
                )
            count = tokens = 0
            for seg in self._segments(conn, source):
                span = seg.clip(0, at_seq)
                if span is not None:
                    n, t = conn.execute(sql.COUNT_RANGE, (seg.session_id, *span)).fetchone()
                    count, tokens = count + n, tokens + t
            parent = source
            while parent.parent_id is not None and parent.fork_seq is not None and at_seq <= parent.fork_seq:
                grand = _session(conn, parent.parent_id)  # branch where the history really lives
                assert grand is not None
                parent = grand
            state = fork_state(decode_state(json_loads(source.state)), at_seq, messages=count)
            fork_id, stamp = new_session_id(), _stamp()
            conn.execute(
                sql.INSERT_SESSION,
                (
                    fork_id,
                    user_id,
                    source.title,
                    source.model,
                    source.metadata,
                    stamp,
                    stamp,
                    parent.id,
                    at_seq,
                    count,
                    tokens,
                    0,
                    0,
                    at_seq + 1,
                    dumps(encode_state(state)),
                    0,
                ),
            )
            return self._resolve(conn, fork_id, user_id).info()

    # -- messages --------------------------------------------------------------------------
    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        # Encode before taking the write lock: the lock is held for the inserts only.
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
        with self.db.transaction(write=True) as conn:
            row = _session(conn, session_id)
            if row is not None and (row.user_id != user_id or row.deleted):
                raise SessionNotFoundError(session_id)  # never reveal, nor write into, another user's session
            taken = _existing_ids(conn, [e[0] for e in encoded])
            if taken:
                index = next(i for i, e in enumerate(encoded) if e[0] in taken)
                raise InvalidMessageError(f"duplicate message id {encoded[index][0]!r}", field="id", index=index)
            stamp = _stamp()
            if row is None:
                conn.execute(
                    sql.INSERT_SESSION,
                    (
                        session_id,
                        user_id,
                        None,
                        model,
                        "{}",
                        stamp,
                        stamp,
                        None,
                        None,
                        0,
                        0,
                        0,
                        0,
                        0,
                        dumps(encode_state(SessionState())),
                        0,
                    ),
                )
            start = row.next_seq if row is not None else 0
            seqs = list(range(start, start + len(encoded)))
            conn.executemany(sql.INSERT_MESSAGE, [(session_id, seq, *e) for seq, e in zip(seqs, encoded, strict=True)])
            conn.execute(
                sql.AFTER_APPEND, (start + len(seqs), len(seqs), sum(e[3] for e in encoded), stamp, session_id)
            )
        return seqs

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        with self.db.transaction(write=False) as conn:
            row = self._resolve(conn, session_id, user_id)
            state = decode_state(json_loads(row.state), version=row.version)
            segs = self._segments(conn, row)
            pinned = self._read(conn, segs, sql.PINNED, state.pinned_start)
            window = self._read(conn, segs, sql.UNPINNED_RANGE, state.window_start)
            unfolded: list[StoredMessage] = []
            if unfolded_limit and state.window_start > state.folded_to + 1:
                for seg in reversed(segs):  # newest first, stopping at the limit
                    span = seg.clip(state.folded_to + 1, state.window_start - 1)
                    if span is not None and len(unfolded) < unfolded_limit:
                        query = (seg.session_id, *span, unfolded_limit - len(unfolded))
                        unfolded += map(_stored, conn.execute(sql.UNPINNED_TAIL, query))
                unfolded.reverse()
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return LoadedSession(row.info(), state, pinned, window, unfolded)

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        saved = replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
        with self.db.transaction(write=True) as conn:
            row = self._resolve(conn, session_id, user_id)
            if (
                conn.execute(sql.SAVE_STATE, (dumps(encode_state(saved)), _stamp(), row.id, expected_version)).rowcount
                != 1
            ):
                raise ConflictError(
                    f"session {row.id!r} state is at version {row.version}, expected {expected_version}"
                )
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
                yield from map(_stored, rows)
                span = (rows[-1][0] + 1, span[1]) if len(rows) == _PAGE else None

    def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        with self.db.transaction(write=True) as conn:
            row = self._resolve(conn, session_id, user_id)
            check_deletable(row.id, set(seqs), row.fork_seq, conn.execute(sql.CHILDREN, (row.id,)).fetchall())
            count = tokens = 0
            for seq in sorted(set(seqs)):
                found = conn.execute(sql.TOKENS_OF, (row.id, seq)).fetchone()
                if found is not None:
                    conn.execute(sql.DELETE_MESSAGE, (row.id, seq))
                    count, tokens = count + 1, tokens + found[1]
            conn.execute(sql.AFTER_DELETE, (count, tokens, _stamp(), row.id))

    # -- export / import -------------------------------------------------------------------
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self.db.transaction(write=False) as conn:  # one snapshot: header and lines agree
            row = self._resolve(conn, session_id, user_id)
            rows = self._read(conn, self._segments(conn, row), sql.RANGE, 0)
            state = decode_state(json_loads(row.state), version=row.version)
            return b"".join([export_header(row.info(), state, row.next_seq), *map(export_line, rows)])

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        with self.db.transaction(write=True) as conn:
            if _session(conn, parsed.id) is not None:
                raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported")
            taken = _existing_ids(conn, [r.message.id or "" for r in parsed.rows])
            for number, stored in enumerate(parsed.rows, start=2):
                if stored.message.id in taken:
                    raise StoreError(
                        f"import: line {number}: message id {stored.message.id!r} already exists; nothing was imported"
                    )
            tokens = sum(r.tokens for r in parsed.rows)
            conn.execute(
                sql.INSERT_SESSION,
                (
                    parsed.id,
                    user_id,
                    parsed.title,
                    parsed.model,
                    dumps(dict(parsed.metadata)),
                    encode_datetime(parsed.created_at),
                    encode_datetime(parsed.updated_at),
                    None,
                    None,
                    0,
                    0,
                    len(parsed.rows),
                    tokens,
                    parsed.next_seq,
                    dumps(encode_state(parsed.state)),
                    parsed.state.version,
                ),
            )
            conn.executemany(
                sql.INSERT_MESSAGE,
                [
                    (
                        parsed.id,
                        r.seq,
                        r.message.id,
                        r.message.role,
                        dumps(encode_message(r.message)),
                        r.tokens,
                        encode_datetime(r.message.created_at) if r.message.created_at is not None else None,
                    )
                    for r in parsed.rows
                ],
            )
        return parsed.info(user_id)

    def close(self) -> None:
        self.db.close()


class AsyncSQLiteStore(AsyncStoreWrapper[SQLiteStore]):
    """The async twin of :class:`SQLiteStore`: the same store and SQL, each call run in a worker thread."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        super().__init__(SQLiteStore(path, timeout=timeout))
        self.path = self.sync.path
