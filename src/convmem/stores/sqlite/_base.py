"""The part of the SQLite store every operation shares: rows, lookups, fork chains, and closing.

:class:`SQLiteBase` resolves ids and prefixes (scoped by user) and reads a
session's history across its fork chain; the session-management and the
message operations build on it (:mod:`convmem.stores.sqlite._sessions`,
:mod:`convmem.stores.sqlite.store`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

from ...errors import StoreError
from ...messages import StoredMessage
from ...session import SessionInfo, SessionState
from .._common import (
    Segment,
    damaged_info,
    now,
    pick,
    read_session_info,
    segments,
)
from .._writes import scoped, unscoped
from ..codec import decode_datetime, encode_datetime, read_row, read_state
from . import _sql as sql
from ._db import Database

__all__ = ["BACKEND", "LAST_SEQ", "Row", "SQLiteBase", "session_row", "stamp", "stored_ids", "stored_row"]

LAST_SEQ = 2**62
BACKEND = "sqlite"


class Row(NamedTuple):
    """A row of the sessions table, in SESSION_COLUMNS order; ``id`` is the scoped key, ``name`` the session id."""

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

    @property
    def name(self) -> str:
        return unscoped(self.id)

    def info(self) -> SessionInfo:
        """The session's info; a corrupt record is a StoreError naming the session."""
        parent = None if self.parent_id is None else unscoped(self.parent_id)
        return read_session_info(BACKEND, self.name, self, parent, decode_datetime)

    def listed(self) -> SessionInfo:
        """The info ``list_sessions`` shows: a corrupt record is listed as damaged, not raised."""
        try:
            return self.info()
        except StoreError as exc:
            return damaged_info(self.name, self.user_id, exc)

    def state_of(self) -> SessionState:
        return read_state(BACKEND, self.name, self.state, version=self.version)


def session_row(conn: sqlite3.Connection, session_id: str) -> Row | None:
    row = conn.execute(sql.SELECT_SESSION, (session_id,)).fetchone()
    return Row(*row) if row is not None else None


def stored_row(session_id: str, row: tuple[int, str, int]) -> StoredMessage:
    return read_row(BACKEND, unscoped(session_id), row[0], row[1], row[2])


def stamp() -> str:
    return encode_datetime(now())


def stored_ids(conn: sqlite3.Connection, segs: Sequence[Segment], ids: Sequence[str]) -> dict[str, StoredMessage]:
    """The rows of a session's history (every segment) that hold any of ``ids``, by id."""
    found: dict[str, StoredMessage] = {}
    for seg in segs:
        for start in range(0, len(ids), 500):  # stay under SQLite's limit on bound parameters
            chunk = ids[start : start + 500]
            query = sql.STORED_IDS.format(marks=", ".join("?" * len(chunk)))
            for message_id, seq, payload, tokens in conn.execute(
                query, (seg.session_id, seg.lo, seg.hi, *chunk)
            ).fetchall():
                found[message_id] = stored_row(seg.session_id, (seq, payload, tokens))
    return found


class SQLiteBase:
    """The connection, lookups and reads shared by every SQLite operation."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        self.db = Database(path, timeout=timeout)
        self.path = self.db.path
        self.rows_read = 0  # rows decoded by load(); shows (and lets tests check) that it skips the archive

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    # -- lookup ----------------------------------------------------------------------------
    def _resolve(self, conn: sqlite3.Connection, session_id: str, user_id: str | None) -> Row:
        row = session_row(conn, scoped(user_id, session_id))
        if row is not None and not row.deleted:
            return row
        keys = [i for (i,) in conn.execute(sql.SELECT_BY_PREFIX, (scoped(user_id, session_id), user_id))]
        found = session_row(conn, scoped(user_id, pick(session_id, map(unscoped, keys))))
        assert found is not None  # picked from the same snapshot
        return found

    def _segments(self, conn: sqlite3.Connection, row: Row) -> list[Segment]:
        chain: list[tuple[str, int | None]] = [(row.id, row.fork_seq)]
        parent_id = row.parent_id
        while parent_id is not None:
            parent = session_row(conn, parent_id)
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
                out += [stored_row(seg.session_id, r) for r in conn.execute(query, (seg.session_id, *span)).fetchall()]
        return out

    # -- sessions --------------------------------------------------------------------------
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        with self.db.transaction(write=False) as conn:
            return self._resolve(conn, session_id, user_id).info()

    def close(self) -> None:
        self.db.close()
