"""The Redis store's operations as I/O-free flows, driven by the sync and the async store alike.

Like :mod:`convmem.stores.postgres._ops`: each operation is a generator that yields
requests (:class:`Cmd`, a :class:`Pipe` of commands, or a :class:`Lua` script
call from :mod:`convmem.stores.redis._lua`) and receives their replies. Writes
are single scripts; reads are plain commands, and the rows of one read come
from one ``MULTI`` so they are a consistent snapshot. Reads are clipped to
the seqs the session hash counted, so a concurrent append cannot make the
rows disagree with the state read beside them.

Flows started again after a lost connection get ``retried=True``; the
append and save-state scripts then recognise their own earlier, committed
attempt (see :mod:`convmem.stores.redis._lua`). Session keys are scoped by
user (:func:`convmem.stores._record.scoped`); :func:`resolve` finds a
session's key and hash, :func:`~convmem.stores.redis._rows.record` decodes it
into a :class:`~convmem.stores._record.SessionRecord`. Every decision is a
rule of :mod:`convmem.stores._writes`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, TypeAlias, TypeVar

from ...errors import SessionLostError, SessionNotFoundError, StoreError
from ...messages import PINNED_ROLES, StoredMessage
from ...session import LoadedSession, SessionInfo, SessionState
from .._record import Segment, SessionRecord, scoped, segments, unscoped
from .._writes import check_deletable, check_expected, hidden, lost, now, pick, replayed, saved_state
from ..base import AppendRequest
from ..codec import dumps, encode_datetime, encode_state
from ._rows import listed, member, pairs, record, row, text

T = TypeVar("T")
PAGE = 500  # rows per request when streaming a history
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Cmd:
    args: tuple[Any, ...]
    tolerate: str = ""  # an error reply containing this text is returned as the reply instead of raised


@dataclass(frozen=True, slots=True)
class Pipe:
    cmds: Sequence[tuple[Any, ...]]
    atomic: bool = True  # MULTI/EXEC: the replies are one snapshot


@dataclass(frozen=True, slots=True)
class Lua:
    name: str
    args: Sequence[Any]


Request: TypeAlias = Cmd | Pipe | Lua
Flow: TypeAlias = Generator[Request, Any, T]


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """A flow, and whether it may be started again (``retried=True``) after a lost connection."""

    what: str
    start: Callable[[bool], Flow[T]]
    retry: bool = True


@dataclass(frozen=True, slots=True)
class Keys:
    """The store's key prefix and session TTL (milliseconds, 0 for none)."""

    prefix: str
    ttl_ms: int = 0

    def __call__(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    def script(self, name: str, *args: Any) -> Lua:
        return Lua(name, (self.prefix, self.ttl_ms, *args))


def user_key(user_id: str | None) -> str:
    return "-" if user_id is None else "=" + user_id


def optional(value: str | None) -> str:
    return "" if value is None else "=" + value


def score(moment: datetime) -> int:
    """A time as a recency score: exact integer microseconds since the epoch."""
    return (moment - _EPOCH) // _MICRO


def stamp() -> tuple[str, int]:
    """Now, as stored (text) and as a recency score."""
    moment = now()
    return encode_datetime(moment), score(moment)


# -- shared steps ---------------------------------------------------------------------------------
def resolve(keys: Keys, session_id: str, user_id: str | None) -> Flow[tuple[str, dict[bytes, bytes]]]:
    """The key and hash of the user's live session named by ``session_id`` or a unique prefix of it.

    The hash is not decoded: deleting or retitling a session whose record is damaged still works.
    """
    ukey = user_key(user_id)
    exact = scoped(user_id, session_id)
    found = pairs((yield Cmd(("HGETALL", keys("s", exact)))))
    if found.get(b"user") == ukey.encode() and found.get(b"deleted") != b"1":
        return exact, found
    low = exact.encode()
    ids = yield Cmd(("ZRANGEBYLEX", keys("l", ukey), b"[" + low, b"(" + low + b"\xff", "LIMIT", 0, 50))
    flags = yield Pipe([("HMGET", keys("s", i.decode()), "user", "deleted") for i in ids], atomic=False)
    live = [unscoped(i.decode()) for i, (u, d) in zip(ids, flags, strict=True) if u == ukey.encode() and d != b"1"]
    chosen = scoped(user_id, pick(session_id, live))
    found = pairs((yield Cmd(("HGETALL", keys("s", chosen)))))
    if found.get(b"user") != ukey.encode() or found.get(b"deleted") == b"1":
        raise SessionNotFoundError(session_id)  # deleted between the two reads
    return chosen, found


def resolved(keys: Keys, session_id: str, user_id: str | None) -> Flow[SessionRecord]:
    """The user's live session, decoded (see :func:`resolve`)."""
    return record(*(yield from resolve(keys, session_id, user_id)))


def chain(keys: Keys, session: SessionRecord) -> Flow[list[tuple[str, int | None, str | None]]]:
    """``(id, fork_seq, parent_id)`` of the session and its ancestors, nearest first."""
    out = [(session.key, session.fork_seq, session.parent_key)]
    while out[-1][2] is not None:
        parent = out[-1][2]
        grand, fork_seq = yield Cmd(("HMGET", keys("s", parent), "parent", "fork_seq"))
        out.append((parent, None if fork_seq is None else int(fork_seq), text(grand)))
    return out


def history(keys: Keys, session: SessionRecord) -> Flow[list[Segment]]:
    return segments([(i, f) for i, f, _ in (yield from chain(keys, session))])


def ranges(
    keys: Keys, segs: Sequence[Segment], lo: int, hi: int, kinds: str = "mp", limit: int = 0
) -> list[tuple[Any, ...]]:
    """ZRANGEBYSCORE commands for rows ``lo..hi`` of every segment (and kind: m unpinned, p pinned)."""
    page = ("LIMIT", 0, limit) if limit else ()
    return [
        ("ZRANGEBYSCORE", keys(kind, seg.session_id), *span, *page)
        for seg in segs
        if (span := seg.clip(lo, hi)) is not None
        for kind in kinds
    ]


def merged(replies: Sequence[Sequence[bytes]], session_id: str) -> list[StoredMessage]:
    return sorted((row(raw, session_id) for reply in replies for raw in reply), key=lambda r: r.seq)


# -- messages -------------------------------------------------------------------------------------
def append(keys: Keys, request: AppendRequest, saved: SessionState | None) -> Op[list[int]]:
    """One script: check the writer's view and the ids, allocate seqs, write the batch (and ``saved``, its state)."""
    session_id, messages, user_id, model = request.session_id, request.messages, request.user_id, request.model
    expected_seq, expected_version = request.expected_seq, request.expected_version
    rows: list[Any] = []
    for message, tokens in messages:
        rows += [message.id or "", int(message.role in PINNED_ROLES), tokens, member(message, tokens)]
    empty = dumps(encode_state(SessionState()))
    view = ("" if expected_seq is None else expected_seq, "" if expected_version is None else expected_version)
    encoded = "" if saved is None else dumps(encode_state(saved))
    key = scoped(user_id, session_id)

    def flow(retried: bool) -> Flow[list[int]]:
        text, score = stamp()
        args = (key, user_key(user_id), text, score, int(retried), optional(model), empty, len(messages))
        reply = yield keys.script("append", *args, *view, encoded, *rows)
        tag = reply[0]
        if tag == b"lost":
            raise lost(session_id, expected_seq or 0)
        if tag == b"notfound":
            raise hidden(session_id)
        if tag == b"stale":
            check_expected(session_id, (int(reply[1]), int(reply[2])), expected_seq, expected_version)
        if tag == b"held":
            pairs_ = zip(reply[1::2], reply[2::2], strict=True)
            held = {messages[int(i)][0].id or "": row(raw, key) for i, raw in pairs_}
            again = replayed(session_id, messages, held)
            assert again is not None
            return again
        start = int(reply[1])
        return list(range(start, start + len(messages)))

    return Op(f"append to session {session_id!r}", flow)


def load(keys: Keys, session_id: str, user_id: str | None, unfolded_limit: int) -> Op[LoadedSession]:
    def flow(retried: bool) -> Flow[LoadedSession]:
        session = yield from resolved(keys, session_id, user_id)
        state = session.state()
        segs = yield from history(keys, session)
        last = session.next_seq - 1
        pinned = ranges(keys, segs, state.pinned_start, last, "p")
        window = ranges(keys, segs, state.window_start, last, "m")
        tail: list[tuple[Any, ...]] = []
        if unfolded_limit and state.window_start > state.folded_to + 1:
            for seg in reversed(segs):  # newest first: each reply is newest first, capped at the limit
                span = seg.clip(state.folded_to + 1, min(last, state.window_start - 1))
                if span is not None:
                    tail.append(
                        ("ZREVRANGEBYSCORE", keys("m", seg.session_id), span[1], span[0], "LIMIT", 0, unfolded_limit)
                    )
        # How many rows the whole history holds, in the same snapshot: an evicting Redis drops whole keys
        # (a row set, a parent's record), and the session must not open with the hole that leaves.
        counts = whole(keys, segs)
        replies = yield Pipe([*pinned, *window, *tail, *counts])
        check_whole(session_id, replies[len(replies) - len(counts) :], "opened")
        replies = replies[: len(replies) - len(counts)]
        unfolded = [row(raw, session.key) for reply in replies[len(pinned) + len(window) :] for raw in reply][
            :unfolded_limit
        ]
        return session.loaded(
            state,
            merged(replies[: len(pinned)], session.key),
            merged(replies[len(pinned) : len(pinned) + len(window)], session.key),
            unfolded[::-1],
        )

    return Op(f"load session {session_id!r}", flow)


def segments_of(keys: Keys, session_id: str, user_id: str | None, to_seq: int | None) -> Op[tuple[list[Segment], int]]:
    def flow(retried: bool) -> Flow[tuple[list[Segment], int]]:
        session = yield from resolved(keys, session_id, user_id)
        segs = yield from history(keys, session)
        last = session.next_seq - 1
        return segs, last if to_seq is None else min(to_seq, last)

    return Op(f"read session {session_id!r}", flow)


def page(keys: Keys, segs: list[Segment], lo: int, hi: int) -> Op[list[StoredMessage]]:
    def flow(retried: bool) -> Flow[list[StoredMessage]]:
        # Every page is checked whole, not only the open: an evicting Redis can drop a row set at any
        # command once over maxmemory, so a read after the open can meet a hole the open did not.
        reads, counts = ranges(keys, segs, lo, hi, limit=PAGE), whole(keys, segs)
        replies = yield Pipe([*reads, *counts])
        check_whole(unscoped(segs[-1].session_id), replies[len(reads) :], "read")
        return merged(replies[: len(reads)], segs[-1].session_id)[:PAGE]

    return Op("read messages", flow)


def whole(keys: Keys, segs: Sequence[Segment]) -> list[tuple[Any, ...]]:
    """Commands that say, in the snapshot of the read they join, whether the history of the session (the last of
    ``segs``) is whole: its record's counts, then how many rows each segment holds (every seq it may hold)."""
    session = segs[-1].session_id
    return [("HMGET", keys("s", session), "user", "deleted", "base_count", "count")] + [
        ("ZCOUNT", keys(kind, seg.session_id), seg.lo, seg.hi) for seg in segs for kind in "mp"
    ]


def check_whole(session_id: str, replies: Sequence[Any], doing: str) -> None:
    """Raise unless the replies of :func:`whole` show every stored row of ``session_id`` still held.

    Raises:
        SessionNotFoundError: the session's record is gone (deleted, or evicted with its record).
        SessionLostError: rows were stored that the server no longer holds.
    """
    user, deleted, base, count = replies[0]
    if user is None or deleted == b"1":
        raise SessionNotFoundError(session_id)
    stored = int(base or 0) + int(count or 0)
    held = sum(int(n) for n in replies[1:])
    if held != stored:
        raise SessionLostError(
            f"Redis session {session_id!r}: {stored} messages were stored, {held} remain (evicted by the server's"
            f" maxmemory-policy, or deleted outside convmem); it is not {doing} with holes"
        )


def save_state(
    keys: Keys, session_id: str, state: SessionState, expected_version: int, user_id: str | None
) -> Op[SessionState]:
    saved = saved_state(state, expected_version)
    encoded = dumps(encode_state(saved))
    ukey = user_key(user_id)

    def flow(retried: bool) -> Flow[SessionState]:
        target = scoped(user_id, session_id)
        reply = yield keys.script("save_state", target, ukey, *stamp(), expected_version, encoded, int(retried))
        if reply[0] == b"notfound":
            target = (yield from resolve(keys, session_id, user_id))[0]  # a prefix, or not found
            reply = yield keys.script("save_state", target, ukey, *stamp(), expected_version, encoded, int(retried))
        if reply[0] == b"conflict":
            check_expected(unscoped(target), (0, int(reply[1])), None, expected_version)
        if reply[0] != b"ok":
            raise SessionNotFoundError(session_id)
        return saved

    return Op(f"save the state of session {session_id!r}", flow)


def delete_messages(
    keys: Keys, session_id: str, seqs: Sequence[int], user_id: str | None, expected_seq: int | None = None
) -> Op[None]:
    doomed = sorted(set(seqs))
    expected = "" if expected_seq is None else expected_seq

    def flow(retried: bool) -> Flow[None]:
        key, _ = yield from resolve(keys, session_id, user_id)
        reply = yield keys.script("delete_messages", key, user_key(user_id), *stamp(), expected, *doomed)
        if reply[0] == b"notfound":
            raise SessionNotFoundError(session_id)
        if reply[0] == b"stale":
            check_expected(unscoped(key), (int(reply[1]), int(reply[2])), expected_seq, None)
        if reply[0] == b"refused":
            fork_seq = int(reply[1]) if reply[1] else None
            forks = [(unscoped(c.decode()), int(at)) for c, at in zip(reply[2::2], reply[3::2], strict=True)]
            check_deletable(unscoped(key), set(doomed), fork_seq, forks)
            raise StoreError(f"session {unscoped(key)!r}: messages shared with a fork cannot be deleted")

    return Op(f"delete messages of session {session_id!r}", flow)


def get_session(keys: Keys, session_id: str, user_id: str | None) -> Op[SessionInfo]:
    def flow(retried: bool) -> Flow[SessionInfo]:
        return (yield from resolved(keys, session_id, user_id)).info()

    return Op(f"read session {session_id!r}", flow)


def list_sessions(keys: Keys, user_id: str | None, limit: int | None) -> Op[list[SessionInfo]]:
    index = keys("r", user_key(user_id))

    def flow(retried: bool) -> Flow[list[SessionInfo]]:
        while True:
            ids = [i.decode() for i in (yield Cmd(("ZREVRANGE", index, 0, -1 if limit is None else limit - 1)))]
            found = yield Pipe([("HGETALL", keys("s", i)) for i in ids], atomic=False)
            gone = [i for i, f in zip(ids, found, strict=True) if not f]
            if not gone:
                return [listed(i, pairs(f), user_id) for i, f in zip(ids, found, strict=True)]
            yield Cmd(("ZREM", index, *gone))  # sessions whose TTL ran out: drop them from the index

    return Op("list sessions", flow)


def has_search() -> Op[bool]:
    """Whether the server has the RediSearch module."""

    def flow(retried: bool) -> Flow[bool]:
        modules = yield Cmd(("MODULE", "LIST"))
        # redis-py gives each module as a dict (or, without its reply callback, as a flat list of pairs).
        fields = [m if isinstance(m, dict) else dict(zip(m[::2], m[1::2], strict=True)) for m in modules]
        names = {str(f.get(b"name", b""), "utf-8").lower() for f in fields}
        return bool(names & {"search", "ft", "searchlight"})

    return Op("list modules", flow)
