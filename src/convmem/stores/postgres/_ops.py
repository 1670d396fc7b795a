"""The PostgreSQL store's operations as I/O-free flows, driven by the sync and the async store alike.

Each operation is a generator that yields :class:`Query` objects and
receives their rows (httpx's ``auth_flow`` is the model). The sync store
drives it on a ``psycopg.Connection``, the async one on an
``AsyncConnection``; all the logic (scoping, forks, counters, conflict
detection) is written once, here. An :class:`Op` says how to drive a flow:
alone or in one transaction, and whether it is safe to start it again when
the connection is lost midway. Flows that must tell "my own earlier attempt
committed" from "a real conflict" receive ``retried=True`` on a repeat:

* ``append`` is idempotent by message id for every caller (see
  :mod:`convmem.stores.base`); a retry also recognises its own committed
  attempt although the session has moved past the seq it expected.
* ``save_state`` compares the stored state with the one it wrote.

Session ids are scoped by user: the ``sessions`` table is keyed by
:func:`convmem.stores._record.scoped`; :func:`record` decodes a row into a
:class:`~convmem.stores._record.SessionRecord`, whose ``id`` is the session id.
Every decision is a rule of :mod:`convmem.stores._writes`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from ...errors import SessionNotFoundError, StoreError
from ...messages import Message, StoredMessage
from ...session import LoadedSession, SessionState
from .._record import Segment, SessionRecord, encoded_json, from_columns, scoped, segments, unscoped
from .._writes import admit, check_deletable, check_expected, hidden, now, pick, replayed, saved_state
from ..base import AppendRequest
from ..codec import dumps, encode_message, encode_state, read_row
from . import _sql as sql

BACKEND = "postgres"

T = TypeVar("T")
Rows: TypeAlias = list[tuple[Any, ...]]
Mode: TypeAlias = Literal["statement", "transaction", "snapshot"]
PAGE = 500  # rows per query when streaming a history
RACES = 10  # an append that finds nothing to explain why it wrote nothing tries again this often


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


def record(row: Sequence[Any]) -> SessionRecord:
    """A ``sessions`` row (``SESSION_COLUMNS`` order) decoded; its JSON is decoded on demand."""
    return from_columns(BACKEND, row, utc=True)


def user_key(user_id: str | None) -> str:
    """The value of the generated ``user_key`` column for ``user_id`` (see :mod:`._sql`)."""
    return "" if user_id is None else "u" + user_id


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def stored(session_id: str, seq: int, payload: str, tokens: int) -> StoredMessage:
    """A message row decoded; damage is a StoreError naming the backend, the session and the seq."""
    return read_row(BACKEND, unscoped(session_id), seq, payload, tokens)


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


def new_session(made: SessionRecord) -> dict[str, Any]:
    """``INSERT_SESSION`` parameters for a new session (a fork or an import)."""
    state = made.stored_state
    return {
        "id": made.key,
        "user_id": made.user_id,
        "title": made.title,
        "model": made.model,
        "metadata": encoded_json(made.metadata),
        "created_at": made.created_at,
        "updated_at": made.updated_at,
        "parent_id": made.parent_key,
        "fork_seq": made.fork_seq,
        "base_count": made.base_count,
        "base_tokens": made.base_tokens,
        "message_count": made.message_count,
        "tokens": made.tokens,
        "next_seq": made.next_seq,
        "state": dumps(encode_state(state)) if isinstance(state, SessionState) else state,
        "version": made.version,
    }


# -- shared steps ---------------------------------------------------------------------------------
def resolve(session_id: str, user_id: str | None, *, lock: bool = False) -> Flow[SessionRecord]:
    """The user's live session named by ``session_id`` or a unique prefix of it."""
    key = user_key(user_id)
    query = sql.SELECT_OWN_LOCKED if lock else sql.SELECT_OWN
    rows = yield Query(query, (scoped(user_id, session_id), key))
    if not rows:
        keys = yield Query(sql.SELECT_BY_PREFIX, (key, _like_prefix(scoped(user_id, session_id))))
        rows = yield Query(query, (scoped(user_id, pick(session_id, [unscoped(k) for (k,) in keys])), key))
        if not rows:
            raise SessionNotFoundError(session_id)  # deleted between the two reads
    return record(rows[0])


def chain(row: SessionRecord) -> Flow[Rows]:
    """``(id, fork_seq, parent_id)`` of the session and its ancestors, nearest first."""
    if row.parent_key is None:
        return [(row.key, row.fork_seq, None)]
    return (yield Query(sql.CHAIN, (row.key,)))


def history(row: SessionRecord) -> Flow[list[Segment]]:
    return segments([(i, f) for i, f, _ in (yield from chain(row))])


# -- messages -------------------------------------------------------------------------------------
def append(request: AppendRequest, saved: SessionState | None) -> Op[list[int]]:
    """One statement: check the writer's view, reserve seqs, insert the batch and its state (``_sql.APPEND``).

    ``saved`` is the request's state as stored (:func:`~convmem.stores._writes.written_state`).
    """
    session_id, messages, user_id = request.session_id, request.messages, request.user_id
    expected_seq, expected_version = request.expected_seq, request.expected_version
    columns = message_columns(messages)
    key = scoped(user_id, session_id)
    params = {
        "session": key,
        "user": user_id,
        "model": request.model,
        "now": now(),
        "n": len(messages),
        "tokens": sum(t for _, t in messages),
        "state": None if saved is None else dumps(encode_state(saved)),
        "empty": dumps(encode_state(SessionState())),
        "created_version": 0 if saved is None else saved.version,
        "may_create": not expected_seq and not expected_version,
        "expected_seq": expected_seq,
        "expected_version": expected_version,
        **dict(zip(("ids", "roles", "payloads", "each"), columns, strict=True)),
    }
    ids: list[str] = columns[0]

    def flow(retried: bool) -> Flow[list[int]]:
        for _ in range(RACES):
            try:
                rows = yield Query(sql.APPEND if params["may_create"] else sql.APPEND_EXISTING, params)
            except UniqueViolation:
                rows = []  # an id stored already in the session: see below why
            if rows:
                return sorted(seq for (seq,) in rows)
            # Nothing written: the view is out of date, the session is gone or hidden, or the ids are stored.
            found = yield Query(sql.SELECT_SESSION, (key,))
            if not found:
                admit(request, None)
                continue  # created and deleted meanwhile: try again
            row = record(found[0])
            if row.deleted:
                raise hidden(session_id)
            segs = yield from history(row)
            stored_rows = yield Query(sql.STORED_IDS, (*spans(segs, 0, row.next_seq - 1), ids))
            held = {i: stored(key, seq, payload, tokens) for i, seq, payload, tokens in stored_rows}
            mine = [held[i].seq for i in ids if i in held]
            if retried and len(mine) == len(ids):
                start = mine[0] if expected_seq is None else expected_seq
                if mine == list(range(start, start + len(ids))):
                    return mine  # our own earlier attempt committed before the connection was lost
            check_expected(session_id, (row.next_seq, row.version), expected_seq, expected_version)
            again = replayed(session_id, messages, held)
            if again is not None:
                return again
            # Nothing explains it (a concurrent delete of the stored rows, a race): try again.
        raise StoreError(f"append to session {session_id!r} kept racing with concurrent deletes; nothing was written")

    return Op(f"append to session {session_id!r}", flow)


def load(session_id: str, user_id: str | None, unfolded_limit: int) -> Op[LoadedSession]:
    """State, pinned messages and window in two round trips (three for a fork); never the archive.

    Reads are clipped to the seqs the session row counted, so a concurrent
    append cannot make the rows disagree with the state read beside them.
    """

    def flow(retried: bool) -> Flow[LoadedSession]:
        row = yield from resolve(session_id, user_id)
        state = row.state()
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
            parts[kind].append(stored(row.key, seq, payload, tokens))
        return row.loaded(state, *parts)

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
        return [stored(segs[-1].session_id, *r) for r in rows]

    return Op("read messages", flow)


def save_state(session_id: str, state: SessionState, expected_version: int, user_id: str | None) -> Op[SessionState]:
    saved = saved_state(state, expected_version)
    encoded = dumps(encode_state(saved))
    key = user_key(user_id)

    def flow(retried: bool) -> Flow[SessionState]:
        exact = scoped(user_id, session_id)
        if (yield Query(sql.SAVE_STATE, (encoded, now(), exact, key, expected_version))):
            return saved
        row = yield from resolve(session_id, user_id)
        if row.key != exact and (yield Query(sql.SAVE_STATE, (encoded, now(), row.key, key, expected_version))):
            return saved  # it was a prefix
        row = yield from resolve(row.id, user_id)
        if retried and row.version == expected_version + 1 and row.stored_state == encoded:
            return saved  # our own earlier attempt committed before the connection was lost
        check_expected(row.id, (row.next_seq, row.version), None, expected_version)
        raise SessionNotFoundError(session_id)  # the version matched but the row did not: deleted meanwhile

    return Op(f"save the state of session {session_id!r}", flow)


def delete_messages(
    session_id: str, seqs: Sequence[int], user_id: str | None, expected_seq: int | None = None
) -> Op[None]:
    doomed = sorted(set(seqs))

    def flow(retried: bool) -> Flow[None]:
        row = yield from resolve(session_id, user_id, lock=True)
        check_expected(row.id, (row.next_seq, row.version), expected_seq, None)
        forks = [(unscoped(child), at) for child, at in (yield Query(sql.CHILDREN, (row.key,)))]
        check_deletable(row.id, set(doomed), row.fork_seq, forks)
        gone = yield Query(sql.DELETE_MESSAGES, (row.key, doomed))
        yield Query(sql.AFTER_DELETE, (len(gone), sum(t for (t,) in gone), now(), row.key))

    return Op(f"delete messages of session {session_id!r}", flow, "transaction")


def has_pgvector() -> Op[bool]:
    """Whether the server offers the pgvector extension."""

    def flow(retried: bool) -> Flow[bool]:
        [(count,)] = yield Query(sql.HAS_PGVECTOR)
        return bool(count)

    return Op("look for pgvector", flow)
