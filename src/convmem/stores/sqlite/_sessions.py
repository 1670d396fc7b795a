"""Session management of the SQLite store: list, retitle, delete, expire, fork, export and import.

Deleting a session that forks still read hides it and keeps only the rows
they share; removing its last fork removes it for good.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ...errors import StoreError
from ...session import SessionInfo
from .._common import (
    export_header,
    export_line,
    fork_state,
    json_object,
    new_session_id,
    now,
    parse_export,
)
from .._writes import scoped, unscoped
from ..codec import dumps, encode_datetime, encode_message, encode_state
from . import _sql as sql
from ._base import LAST_SEQ, Row, SQLiteBase, session_row, stamp

__all__ = ["SQLiteSessions"]


class SQLiteSessions(SQLiteBase):
    """Session management over :class:`SQLiteBase`."""

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        with self.db.transaction(write=False) as conn:
            rows = conn.execute(sql.LIST_SESSIONS, (user_id, -1 if limit is None else limit)).fetchall()
        return [Row(*row).listed() for row in rows]

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
            conn.execute(sql.UPDATE_SESSION, (title, encoded, stamp(), row.id))
            updated = session_row(conn, row.id)
            assert updated is not None
            return updated.info()

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        with self.db.transaction(write=True) as conn:
            self._remove(conn, self._resolve(conn, session_id, user_id))

    def _remove(self, conn: sqlite3.Connection, row: Row) -> None:
        children = conn.execute(sql.CHILDREN, (row.id,)).fetchall()
        if children:
            # Forks still read this history: hide the session and keep only the rows they share.
            keep = max(fork_seq for _, fork_seq in children)
            count, tokens = conn.execute(sql.COUNT_RANGE, (row.id, keep + 1, LAST_SEQ)).fetchone()
            conn.execute(sql.DELETE_AFTER, (row.id, keep))
            conn.execute(sql.AFTER_DELETE, (count, tokens, row.updated_at, row.id))
            conn.execute(sql.TOMBSTONE, (row.id,))
            return
        conn.execute(sql.DELETE_ALL, (row.id,))
        conn.execute(sql.DELETE_SESSION, (row.id,))
        if row.parent_id is not None:
            parent = session_row(conn, row.parent_id)
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
            if not 0 <= at_seq < source.next_seq:
                raise StoreError(
                    f"cannot fork session {source.name!r} at seq {at_seq}: its seqs run from 0 to {source.next_seq - 1}"
                )
            count = tokens = 0
            for seg in self._segments(conn, source):
                span = seg.clip(0, at_seq)
                if span is not None:
                    n, t = conn.execute(sql.COUNT_RANGE, (seg.session_id, *span)).fetchone()
                    count, tokens = count + n, tokens + t
            parent = source
            while parent.parent_id is not None and parent.fork_seq is not None and at_seq <= parent.fork_seq:
                grand = session_row(conn, parent.parent_id)  # branch where the history really lives
                assert grand is not None
                parent = grand
            state = fork_state(source.state_of(), at_seq, messages=count)
            fork_id, created = scoped(user_id, new_session_id()), stamp()
            conn.execute(
                sql.INSERT_SESSION,
                (
                    fork_id,
                    user_id,
                    source.title,
                    source.model,
                    source.metadata,
                    created,
                    created,
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
            made = session_row(conn, fork_id)
            assert made is not None
            return made.info()

    # -- export / import -------------------------------------------------------------------
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self.db.transaction(write=False) as conn:  # one snapshot: header and lines agree
            row = self._resolve(conn, session_id, user_id)
            rows = self._read(conn, self._segments(conn, row), sql.RANGE, 0)
            state = row.state_of()
            return b"".join([export_header(row.info(), state, row.next_seq), *map(export_line, rows)])

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        key = scoped(user_id, parsed.id)
        with self.db.transaction(write=True) as conn:
            if session_row(conn, key) is not None:  # the user's own session of that id
                raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported")
            tokens = sum(r.tokens for r in parsed.rows)
            conn.execute(
                sql.INSERT_SESSION,
                (
                    key,
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
                        key,
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
