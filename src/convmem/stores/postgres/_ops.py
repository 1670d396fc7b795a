"""The PostgreSQL store's operations as I/O-free flows, driven by the sync and the async store alike.

Each operation is a generator that yields :class:`Query` objects and
receives their rows (httpx's ``auth_flow`` is the model). The sync store
drives it on a ``psycopg.Connection``, the async one on an
``AsyncConnection``; all the logic (scoping, forks, counters, conflict
detection) is written once, here. An :class:`Op` says how to drive a flow:
alone or in one transaction, and whether it is safe to start it again when
the connection is lost midway. Flows that must tell "my own earlier attempt
committed" from "a real conflict" receive ``retried=True`` on a repeat:

* ``append`` is idempotent by message id: if every id of the batch is
  already stored in this session, in order, the earlier attempt committed
  and its seqs are returned; otherwise the duplicate is the caller's.
* ``save_state`` compares the stored state with the one it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Generic, Literal, NamedTuple, TypeAlias, TypeVar

from ...errors import ConflictError, InvalidMessageError, SessionNotFoundError
from ...messages import Message
from .._common import (
    Segment,
    check_deletable,
    json_object,
    now,
    pick,
    segments,
)
from ..base import LoadedSession, SessionInfo, SessionState, StoredMessage
from ..codec import decode_message, decode_state, dumps, encode_message, encode_state
from ..codec import loads as json_loads
from . import _sql as sql

T = TypeVar("T")
Rows: TypeAlias = list[tuple[Any, ...]]
Mode: TypeAlias = Literal["statement", "transaction", "snapshot"]
PAGE = 500  # rows per query when streaming a history


@dataclass(frozen=True, slots=True)
class Query:
    sql: str
    params: Sequence[Any] | Mapping[str, Any] = ()


Flow: TypeAlias = Generator[Query, Rows, T]


class UniqueViolation(Exception):
    """Thrown into a flow by the drivers when a statement hits a unique constraint."""


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """A flow and how to drive it.

    ``mode``: ``statement`` runs each query on its own (autocommit);
    ``transaction`` runs them in one read-committed transaction;
    ``snapshot`` in one repeatable-read, read-only transaction.
    ``retry``: the flow may be started again (with ``retried=True``) after a lost connection.
    """

    what: str
    start: Callable[[bool], Flow[T]]
    mode: Mode = "statement"
    retry: bool = True


class Row(NamedTuple):
    id: str
    user_id: str | None
    title: str | None
    model: str | None
    metadata: str
    created_at: datetime
    updated_at: datetime
    parent_id: str | None
    fork_seq: int | None
    base_count: int
    base_tokens: int
    message_count: int
    tokens: int
    next_seq: int
    state: str
    version: int
    deleted: bool

    def info(self) -> SessionInfo:
        return SessionInfo(
            self.id,
            self.user_id,
            self.title,
            self.model,
            json_loads(self.metadata),
            self.created_at.astimezone(timezone.utc),
            self.updated_at.astimezone(timezone.utc),
            self.base_count + self.message_count,
            self.base_tokens + self.tokens,
            self.parent_id,
            self.fork_seq,
        )

    def session_state(self) -> SessionState:
        return decode_state(json_loads(self.state), version=self.version)


def user_key(user_id: str | None) -> str:
    """The value of the generated ``user_key`` column for ``user_id`` (see :mod:`._pg_sql`)."""
    return "" if user_id is None else "u" + user_id


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def stored(seq: int, payload: str, tokens: int) -> StoredMessage:
    return StoredMessage(seq, decode_message(json_loads(payload)), tokens)


def spans(segs: Sequence[Segment], lo: int, hi: int | None) -> tuple[list[str], list[int], list[int]]:
    """The three arrays (session ids, low and high seqs) a segment query reads, clipped to ``lo..hi``."""
    ids: list[str] = []
    lows: list[int] = []
    highs: list[int] = []
    for seg in segs:
        span = seg.clip(lo, hi)
        if span is not None:
            ids.append(seg.session_id)
            lows.append(span[0])
            highs.append(span[1])
    return ids, lows, highs


def message_columns(messages: Sequence[tuple[Message, int]]) -> list[list[Any]]:
    return [
        [m.id or "" for m, _ in messages],
        [m.role for m, _ in messages],
        [dumps(encode_message(m)) for m, _ in messages],
        [t for _, t in messages],
    ]


def new_session(
    session_id: str, user_id: str | None, created_at: datetime, updated_at: datetime, **fields: Any
) -> dict[str, Any]:
    """``INSERT_SESSION`` parameters: the given fields over the defaults of a new, empty session."""
    defaults = {"title": None, "model": None, "metadata": "{}", "parent_id": None, "fork_seq": None, "state": "{}"}
    counters = dict.fromkeys(("base_count", "base_tokens", "message_count", "tokens", "next_seq", "version"), 0)
    ids = {"id": session_id, "user_id": user_id, "created_at": created_at, "updated_at": updated_at}
    return {**defaults, **counters, **ids, **fields}


# -- shared steps ---------------------------------------------------------------------------------
def resolve(session_id: str, user_id: str | None, *, lock: bool = False) -> Flow[Row]:
    """The user's live session named by ``session_id`` or a unique prefix of it."""
    key = user_key(user_id)
    query = sql.SELECT_OWN_LOCKED if lock else sql.SELECT_OWN
    rows = yield Query(query, (session_id, key))
    if not rows:
        ids = yield Query(sql.SELECT_BY_PREFIX, (key, _like_prefix(session_id)))
        rows = yield Query(query, (pick(session_id, [i for (i,) in ids]), key))
        if not rows:
            raise SessionNotFoundError(session_id)  # deleted between the two reads
    return Row(*rows[0])


def chain(row: Row) -> Flow[Rows]:
    """``(id, fork_seq, parent_id)`` of the session and its ancestors, nearest first."""
    if row.parent_id is None:
        return [(row.id, row.fork_seq, None)]
    return (yield Query(sql.CHAIN, (row.id,)))


def history(row: Row) -> Flow[list[Segment]]:
    return segments([(i, f) for i, f, _ in (yield from chain(row))])


# -- messages -------------------------------------------------------------------------------------
def append(
    session_id: str, messages: Sequence[tuple[Message, int]], user_id: str | None, model: str | None
) -> Op[list[int]]:
    """One statement: reserve seqs on the counter row and insert the batch (see ``_pg_sql.APPEND``)."""
    columns = message_columns(messages)
    params = {
        "session": session_id,
        "user": user_id,
        "model": model,
        "now": now(),
        "n": len(messages),
        "tokens": sum(t for _, t in messages),
        "state": dumps(encode_state(SessionState())),
        **dict(zip(("ids", "roles", "payloads", "each"), columns, strict=True)),
    }
    ids: list[str] = columns[0]

    def flow(retried: bool) -> Flow[list[int]]:
        while True:
            try:
                rows = yield Query(sql.APPEND, params)
            except UniqueViolation:
                owners = {i: (s, seq) for i, s, seq in (yield Query(sql.OWNERS, (ids,)))}
                if not owners:
                    continue  # the other message was deleted meanwhile: try again
                mine = [owners.get(i) for i in ids]
                if retried and all(o is not None and o[0] == session_id for o in mine):
                    seqs = [o[1] for o in mine if o is not None]
                    if seqs == list(range(seqs[0], seqs[0] + len(seqs))):
                        return seqs  # our own earlier attempt committed before the connection was lost
                index = next(n for n, i in enumerate(ids) if i in owners)
                raise InvalidMessageError(f"duplicate message id {ids[index]!r}", field="id", index=index) from None
            if not rows:
                raise SessionNotFoundError(session_id)  # never reveal, nor write into, another user's session
            return sorted(seq for (seq,) in rows)

    return Op(f"append to session {session_id!r}", flow)


def load(session_id: str, user_id: str | None, unfolded_limit: int) -> Op[LoadedSession]:
    """State, pinned messages and window in two round trips (three for a fork); never the archive.

    Reads are clipped to the seqs the session row counted, so a concurrent
    append cannot make the rows disagree with the state read beside them.
    """

    def flow(retried: bool) -> Flow[LoadedSession]:
        row = yield from resolve(session_id, user_id)
        state = row.session_state()
        segs = yield from history(row)
        last = row.next_seq - 1
        tail = unfolded_limit and state.window_start > state.folded_to + 1
        rows = yield Query(
            sql.LOAD,
            (
                *spans(segs, state.pinned_start, last),
                *spans(segs, state.window_start, last),
                *(spans(segs, state.folded_to + 1, min(last, state.window_start - 1)) if tail else ([], [], [])),
                unfolded_limit,
            ),
        )
        parts: tuple[list[StoredMessage], ...] = ([], [], [])
        for kind, seq, payload, tokens in sorted(rows, key=lambda r: (r[0], r[1])):
            parts[kind].append(stored(seq, payload, tokens))
        return LoadedSession(row.info(), state, parts[0], parts[1], parts[2])

    return Op(f"load session {session_id!r}", flow)


def segments_of(session_id: str, user_id: str | None, to_seq: int | None) -> Op[tuple[list[Segment], int]]:
    """Where the session's history lives, and the last seq to read (``to_seq`` clipped to the newest)."""

    def flow(retried: bool) -> Flow[tuple[list[Segment], int]]:
        row = yield from resolve(session_id, user_id)
        segs = yield from history(row)
        return segs, row.next_seq - 1 if to_seq is None else min(to_seq, row.next_seq - 1)

    return Op(f"read session {session_id!r}", flow)


def page(segs: list[Segment], lo: int, hi: int) -> Op[list[StoredMessage]]:
    def flow(retried: bool) -> Flow[list[StoredMessage]]:
        rows = yield Query(sql.RANGE_PAGE, (*spans(segs, lo, hi), PAGE))
        return [stored(*r) for r in rows]

    return Op("read messages", flow)


def save_state(session_id: str, state: SessionState, expected_version: int, user_id: str | None) -> Op[SessionState]:
    saved = replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
    encoded = dumps(encode_state(saved))
    key = user_key(user_id)

    def flow(retried: bool) -> Flow[SessionState]:
        if (yield Query(sql.SAVE_STATE, (encoded, now(), session_id, key, expected_version))):
            return saved
        row = yield from resolve(session_id, user_id)
        if row.id != session_id and (yield Query(sql.SAVE_STATE, (encoded, now(), row.id, key, expected_version))):
            return saved  # it was a prefix
        row = yield from resolve(row.id, user_id)
        if retried and row.version == expected_version + 1 and row.state == encoded:
            return saved  # our own earlier attempt committed before the connection was lost
        raise ConflictError(f"session {row.id!r} state is at version {row.version}, expected {expected_version}")

    return Op(f"save the state of session {session_id!r}", flow)


def delete_messages(session_id: str, seqs: Sequence[int], user_id: str | None) -> Op[None]:
    doomed = sorted(set(seqs))

    def flow(retried: bool) -> Flow[None]:
        row = yield from resolve(session_id, user_id, lock=True)
        check_deletable(row.id, set(doomed), row.fork_seq, (yield Query(sql.CHILDREN, (row.id,))))
        gone = yield Query(sql.DELETE_MESSAGES, (row.id, doomed))
        yield Query(sql.AFTER_DELETE, (len(gone), sum(t for (t,) in gone), now(), row.id))

    return Op(f"delete messages of session {session_id!r}", flow, "transaction")
