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
* Every decision (the writer's view, retries, forks, what may be deleted) is
  a rule of :mod:`convmem.stores._writes`; the rows are read into and written
  from :class:`~convmem.stores._record.SessionRecord` by
  :mod:`convmem.stores.sqlite._rows`; the SQL text and the migrations live in
  :mod:`convmem.stores.sqlite._sql`; driver errors become
  :class:`~convmem.errors.StoreError` in one place (:mod:`convmem.stores.sqlite._db`).
* Deleting a session that forks still read hides it and keeps only the rows
  they share; removing its last fork removes it for good.

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
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ...messages import StoredMessage
from ...session import LoadedSession, SessionInfo, SessionState
from .._async import AsyncStoreWrapper
from .._export import export_session, parse_export
from .._forget import ForgetReceipt
from .._record import Segment, SessionRecord, scoped, unscoped
from .._writes import (
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
from ..base import AppendRequest
from ..codec import dumps, encode_datetime, encode_state
from . import _forget
from . import _sql as sql
from ._db import Database
from ._rows import (
    BACKEND,
    LAST_SEQ,
    chain,
    history,
    insert_session,
    message_row,
    read,
    record,
    session_row,
    stamp,
    stored_ids,
    stored_row,
)

if TYPE_CHECKING:
    from .longterm import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore

__all__ = ["AsyncSQLiteStore", "SQLiteStore"]

_PAGE = 500  # rows per query when streaming a history


@ids_checked
class SQLiteStore:
    """A :class:`~convmem.stores.base.SessionStore` in one SQLite file.

    Args:
        path: the database file; default ``$CONVMEM_DB`` or ``convmem.db`` in the user data directory.
        timeout: seconds to wait for another process's write lock.
        read_only: open for reading only (``mode=ro``, or ``immutable=1`` where even that cannot open it:
            see :mod:`convmem.stores.sqlite._db`); every write is then a StoreError. A database file this
            process may not write is opened so without asking.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0, read_only: bool = False
    ) -> None:
        self.db = Database(path, timeout=timeout, read_only=read_only)
        self.path = self.db.path
        self.rows_read = 0  # rows decoded by load(); shows (and lets tests check) that it skips the archive

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def _resolve(self, conn: sqlite3.Connection, session_id: str, user_id: str | None) -> SessionRecord:
        row = session_row(conn, scoped(user_id, session_id))
        if row is not None and not row.deleted:
            return row
        keys = [i for (i,) in conn.execute(sql.SELECT_BY_PREFIX, (scoped(user_id, session_id), user_id))]
        found = session_row(conn, scoped(user_id, pick(session_id, map(unscoped, keys))))
        assert found is not None  # picked from the same snapshot
        return found

    # -- messages --------------------------------------------------------------------------
    def append(self, request: AppendRequest) -> list[int]:
        saved = written_state(request)
        if not request.messages:
            return []  # a session is created by its first message, not by an empty batch
        # Encode before taking the write lock: the lock is held for the checks and the inserts only.
        encoded = [message_row(m, t) for m, t in request.messages]
        key = scoped(request.user_id, request.session_id)
        with self.db.transaction(write=True) as conn:
            row = session_row(conn, key)
            admit(request, None if row is None else row.view(), deleted=row is not None and row.deleted)
            if row is not None:
                stored = stored_ids(conn, history(conn, row), [e[0] for e in encoded])
                again = replayed(request.session_id, request.messages, stored)
                if again is not None:
                    return again
            when = stamp()
            if row is None:
                made = SessionRecord(
                    BACKEND,
                    key,
                    request.session_id,
                    request.user_id,
                    None,
                    request.model,
                    "{}",
                    when,
                    when,
                    SessionState(),
                )
                insert_session(conn, made)
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
            state = row.state()
            segs = history(conn, row)
            pinned = read(conn, segs, sql.PINNED, state.pinned_start)
            window = read(conn, segs, sql.UNPINNED_RANGE, state.window_start)
            unfolded: list[StoredMessage] = []
            tail = unfolded_span(state, unfolded_limit)
            if tail is not None:
                for seg in reversed(segs):  # newest first, stopping at the limit
                    span = seg.clip(*tail)
                    if span is not None and len(unfolded) < unfolded_limit:
                        query = (seg.session_id, *span, unfolded_limit - len(unfolded))
                        unfolded += [
                            stored_row(seg.session_id, r) for r in conn.execute(sql.UNPINNED_TAIL, query).fetchall()
                        ]
                unfolded.reverse()
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return row.loaded(state, pinned, window, unfolded)

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        saved = saved_state(state, expected_version)
        with self.db.transaction(write=True) as conn:
            row = self._resolve(conn, session_id, user_id)
            check_expected(row.id, (row.next_seq, row.version), None, expected_version)
            conn.execute(sql.SAVE_STATE, (dumps(encode_state(saved)), stamp(), row.key, expected_version))
        return saved

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        with self.db.transaction(write=False) as conn:
            segs = history(conn, self._resolve(conn, session_id, user_id))
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
            check_expected(row.id, (row.next_seq, row.version), expected_seq, None)
            forks = [(unscoped(child), at) for child, at in conn.execute(sql.CHILDREN, (row.key,))]
            check_deletable(row.id, set(seqs), row.fork_seq, forks)
            count = tokens = 0
            for seq in sorted(set(seqs)):
                found = conn.execute(sql.TOKENS_OF, (row.key, seq)).fetchone()
                if found is not None:
                    conn.execute(sql.DELETE_MESSAGE, (row.key, seq))
                    count, tokens = count + 1, tokens + found[1]
            conn.execute(sql.AFTER_DELETE, (count, tokens, stamp(), row.key))

    # -- sessions --------------------------------------------------------------------------
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        with self.db.transaction(write=False) as conn:
            return self._resolve(conn, session_id, user_id).info()

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        with self.db.transaction(write=False) as conn:
            rows = conn.execute(sql.LIST_SESSIONS, (user_id, -1 if limit is None else limit)).fetchall()
        return [record(row).listed() for row in rows]

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
            conn.execute(sql.UPDATE_SESSION, (title, encoded, stamp(), row.key))
            updated = session_row(conn, row.key)
            assert updated is not None
            return updated.info()

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        with self.db.transaction(write=True) as conn:
            self._remove(conn, self._resolve(conn, session_id, user_id))

    def _remove(self, conn: sqlite3.Connection, row: SessionRecord) -> None:
        children = conn.execute(sql.CHILDREN, (row.key,)).fetchall()
        if children:
            # Forks still read this history: hide the session and keep only the rows they share.
            keep = max(fork_seq for _, fork_seq in children)
            count, tokens = conn.execute(sql.COUNT_RANGE, (row.key, keep + 1, LAST_SEQ)).fetchone()
            conn.execute(sql.DELETE_AFTER, (row.key, keep))
            conn.execute(sql.AFTER_DELETE, (count, tokens, row.updated_at, row.key))
            conn.execute(sql.TOMBSTONE, (row.key,))
            return
        conn.execute(sql.DELETE_ALL, (row.key,))
        conn.execute(sql.DELETE_SESSION, (row.key,))
        if row.parent_key is not None:
            parent = session_row(conn, row.parent_key)
            if parent is not None and parent.deleted:
                self._remove(conn, parent)

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        cutoff = encode_datetime(now() - older_than)
        with self.db.transaction(write=True) as conn:
            doomed = [i for (i,) in conn.execute(sql.EXPIRED, (user_id, cutoff))]
            for key in doomed:
                row = session_row(conn, key)
                assert row is not None
                self._remove(conn, row)
        return [unscoped(key) for key in doomed]

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        with self.db.transaction(write=True) as conn:
            source = self._resolve(conn, session_id, user_id)
            check_fork(source.id, source.next_seq, at_seq)
            ancestors = chain(conn, source)
            count = tokens = 0
            for seg in history(conn, source):
                span = seg.clip(0, at_seq)
                if span is not None:
                    n, t = conn.execute(sql.COUNT_RANGE, (seg.session_id, *span)).fetchone()
                    count, tokens = count + n, tokens + t
            home = ancestors[fork_home([(r.key, r.fork_seq) for r in ancestors], at_seq)]
            fork_id = new_session_id()
            made = fork_record(
                source,
                at_seq,
                key=scoped(user_id, fork_id),
                session_id=fork_id,
                parent=(home.key, home.id),
                shared=(count, tokens),
                when=stamp(),
            )
            insert_session(conn, made)
            return made.info()

    # -- export / import -------------------------------------------------------------------
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self.db.transaction(write=False) as conn:  # one snapshot: header and lines agree
            row = self._resolve(conn, session_id, user_id)
            return export_session(row, read(conn, history(conn, row), sql.RANGE, 0))

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        key = scoped(user_id, parsed.id)
        made = parsed.record(BACKEND, key, user_id)
        with self.db.transaction(write=True) as conn:
            if session_row(conn, key) is not None:  # the user's own session of that id
                raise taken(parsed.id)
            insert_session(conn, made)
            conn.executemany(sql.INSERT_MESSAGE, [(key, r.seq, *message_row(r.message, r.tokens)) for r in parsed.rows])
        return made.info()

    # -- erasure (see convmem.stores._forget) -------------------------------------------------
    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase the user, or the session with its forks, in one transaction (see :mod:`._forget`)."""
        counts, erased = _forget.erase(self.db, user_id, session_id, self._resolve, self._remove)
        if compact:
            self.compact()
        command = f"convmem compact --db sqlite://{os.path.abspath(self.path)}"
        return ForgetReceipt.made(
            user_id, session_id, counts, erased, compacted=compact, pending=_forget.PENDING, command=command
        )

    def compact(self) -> None:
        """Merge the FTS5 index, VACUUM the file and truncate its WAL (nothing erased stays on disk)."""
        _forget.compact(self.db)

    # -- long-term memory (needs the ``recall`` extra) ---------------------------------------
    def facts(self) -> SQLiteFactStore:
        """The facts in this database, on this store's connection; they close with the store."""
        from .longterm import SQLiteFactStore

        return SQLiteFactStore(self)

    def blocks(self) -> SQLiteBlockStore:
        """The working blocks in this database, on this store's connection; they close with the store."""
        from .longterm import SQLiteBlockStore

        return SQLiteBlockStore(self)

    def recall(self) -> SQLiteRecallStore:
        """The recall documents (FTS5 and vectors) in this database, on this store's connection."""
        from .longterm import SQLiteRecallStore

        return SQLiteRecallStore(self)

    def close(self) -> None:
        self.db.close()


class AsyncSQLiteStore(AsyncStoreWrapper[SQLiteStore]):
    """The async twin of :class:`SQLiteStore`: the same store and SQL, each call run in a worker thread."""

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0, read_only: bool = False
    ) -> None:
        super().__init__(SQLiteStore(path, timeout=timeout, read_only=read_only))
        self.path = self.sync.path
