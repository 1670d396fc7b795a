"""The SQLite tables as records: a ``sessions`` row decoded into a :class:`~convmem.stores._record.SessionRecord`
and encoded back, message rows decoded, and the reads every operation makes on a connection.

A row of ``sessions`` is keyed by the session id scoped by its user
(:func:`convmem.stores._record.scoped`); its JSON and timestamps stay text in
the record until they are asked for. Reads follow a session's fork chain
(:func:`convmem.stores._record.segments`): its own rows from ``fork_seq + 1``,
its ancestors' below that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...messages import Message, StoredMessage
from ...session import SessionState
from .._record import Segment, SessionRecord, encoded_json, from_columns, segments, unscoped
from .._writes import now
from ..codec import dumps, encode_datetime, encode_message, encode_state, read_row
from . import _sql as sql

__all__ = [
    "BACKEND",
    "LAST_SEQ",
    "chain",
    "history",
    "insert_session",
    "message_row",
    "read",
    "record",
    "session_row",
    "stamp",
    "stored_ids",
    "stored_row",
]

LAST_SEQ = 2**62
BACKEND = "sqlite"


def record(row: Sequence[Any]) -> SessionRecord:
    """A ``sessions`` row (``SESSION_COLUMNS`` order) decoded; its JSON and timestamps are decoded on demand."""
    return from_columns(BACKEND, row)


def session_row(conn: sqlite3.Connection, key: str) -> SessionRecord | None:
    row = conn.execute(sql.SELECT_SESSION, (key,)).fetchone()
    return record(row) if row is not None else None


def insert_session(conn: sqlite3.Connection, made: SessionRecord) -> None:
    """Write a new session row for ``made`` (a first append, a fork or an import)."""
    state = made.stored_state
    conn.execute(
        sql.INSERT_SESSION,
        (
            made.key,
            made.user_id,
            made.title,
            made.model,
            encoded_json(made.metadata),
            _text(made.created_at),
            _text(made.updated_at),
            made.parent_key,
            made.fork_seq,
            made.base_count,
            made.base_tokens,
            made.message_count,
            made.tokens,
            made.next_seq,
            dumps(encode_state(state)) if isinstance(state, SessionState) else _text(state),
            made.version,
        ),
    )


def _text(value: datetime | str | bytes) -> str:
    """A timestamp or JSON field as the table stores it: text (kept as read when it was never decoded)."""
    if isinstance(value, datetime):
        return encode_datetime(value)
    return value.decode() if isinstance(value, bytes) else value


def message_row(message: Message, tokens: int) -> tuple[str, str, str, int, str | None]:
    """A message's columns after ``(session_id, seq)``: id, role, payload, tokens, created_at."""
    created = encode_datetime(message.created_at) if message.created_at is not None else None
    return message.id or "", message.role, dumps(encode_message(message)), tokens, created


def stored_row(session_key: str, row: tuple[int, str, int]) -> StoredMessage:
    return read_row(BACKEND, unscoped(session_key), row[0], row[1], row[2])


def stamp() -> str:
    return encode_datetime(now())


def chain(conn: sqlite3.Connection, row: SessionRecord) -> list[SessionRecord]:
    """The session and its ancestors, nearest first."""
    out = [row]
    while out[-1].parent_key is not None:
        parent = session_row(conn, out[-1].parent_key)
        assert parent is not None  # a parent with forks is only ever hidden, never removed
        out.append(parent)
    return out


def history(conn: sqlite3.Connection, row: SessionRecord) -> list[Segment]:
    """Where the session's rows live (its fork chain's segments)."""
    return segments([(r.key, r.fork_seq) for r in chain(conn, row)])


def read(
    conn: sqlite3.Connection, segs: list[Segment], query: str, lo: int, hi: int | None = None
) -> list[StoredMessage]:
    """The rows ``query`` selects in ``lo..hi`` of every segment, oldest first."""
    out: list[StoredMessage] = []
    for seg in segs:
        span = seg.clip(lo, hi)
        if span is not None:
            out += [stored_row(seg.session_id, r) for r in conn.execute(query, (seg.session_id, *span)).fetchall()]
    return out


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
