"""The Redis store's session management as I/O-free flows: update, delete, expire, fork, export, import.

The other half of :mod:`convmem.stores.redis._ops` (same requests, same
drivers). Each write is one script from :mod:`convmem.stores.redis._lua`.
A fork counts the rows it shares inside its script and is created only if
the count is still the one its state was computed from, so a concurrent
delete cannot leave it with wrong counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ...errors import SessionNotFoundError
from ...messages import PINNED_ROLES
from ...session import SessionInfo
from .._export import export_session, parse_export
from .._record import scoped, segments, unscoped
from .._writes import check_fork, fork_home, fork_state, json_object, new_session_id, now, taken
from ..codec import dumps, encode_datetime, encode_state
from ._ops import (
    Cmd,
    Flow,
    Keys,
    Op,
    Pipe,
    chain,
    check_whole,
    history,
    merged,
    optional,
    ranges,
    resolve,
    resolved,
    score,
    stamp,
    user_key,
    whole,
)
from ._rows import BACKEND, member, pairs, record


def update_session(
    keys: Keys, session_id: str, user_id: str | None, title: str | None, metadata: Mapping[str, Any] | None
) -> Op[SessionInfo]:
    encoded = optional(dumps(json_object(metadata)) if metadata is not None else None)

    def flow(retried: bool) -> Flow[SessionInfo]:
        key, _ = yield from resolve(keys, session_id, user_id)
        found = yield keys.script("update", key, user_key(user_id), *stamp(), optional(title), encoded)
        if not found:
            raise SessionNotFoundError(session_id)
        return record(key, pairs(found)).info()

    return Op(f"update session {session_id!r}", flow)


def delete_session(keys: Keys, session_id: str, user_id: str | None) -> Op[None]:
    def flow(retried: bool) -> Flow[None]:
        key, _ = yield from resolve(keys, session_id, user_id)
        if not (yield keys.script("delete", key, user_key(user_id))):
            raise SessionNotFoundError(session_id)

    return Op(f"delete session {session_id!r}", flow, retry=False)


def expire(keys: Keys, older_than: timedelta, user_id: str | None) -> Op[list[str]]:
    cutoff = score(now() - older_than)

    def flow(retried: bool) -> Flow[list[str]]:
        return sorted(unscoped(i.decode()) for i in (yield keys.script("expire", user_key(user_id), cutoff)))

    return Op("expire sessions", flow, retry=False)


def fork(keys: Keys, session_id: str, at_seq: int, user_id: str | None) -> Op[SessionInfo]:
    ukey = user_key(user_id)

    def flow(retried: bool) -> Flow[SessionInfo]:
        source = yield from resolved(keys, session_id, user_id)
        check_fork(source.id, source.next_seq, at_seq)
        ancestors = yield from chain(keys, source)
        spans = [
            (seg.session_id, *span)
            for seg in segments([(i, f) for i, f, _ in ancestors])
            if (span := seg.clip(0, at_seq)) is not None
        ]
        shared = [value for span in spans for value in span]
        home = fork_home([(i, f) for i, f, _ in ancestors], at_seq)
        fork_id = scoped(user_id, new_session_id())
        while True:
            probe = yield keys.script("fork", source.key, ukey, at_seq, *[""] * 7, *shared)
            _check_fork(probe, source.id, at_seq)
            count, tokens = int(probe[1]), int(probe[2])
            state = dumps(encode_state(fork_state(source.state(), at_seq, messages=count)))
            args = (fork_id, *stamp(), ancestors[home][0], state, count, tokens)
            reply = yield keys.script("fork", source.key, ukey, at_seq, *args, *shared)
            _check_fork(reply, source.id, at_seq)
            if reply[0] == b"ok":
                found = yield Cmd(("HGETALL", keys("s", fork_id)))
                return record(fork_id, pairs(found)).info()

    return Op(f"fork session {session_id!r}", flow, retry=False)


def _check_fork(reply: Any, session_id: str, at_seq: int) -> None:
    if reply[0] == b"notfound":
        raise SessionNotFoundError(session_id)
    if reply[0] == b"range":
        check_fork(session_id, int(reply[1]), at_seq)


def export_jsonl(keys: Keys, session_id: str, user_id: str | None) -> Op[bytes]:
    def flow(retried: bool) -> Flow[bytes]:
        session = yield from resolved(keys, session_id, user_id)
        segs = yield from history(keys, session)
        reads, counts = ranges(keys, segs, 0, session.next_seq - 1), whole(keys, segs)
        replies = yield Pipe([*reads, *counts])
        check_whole(session_id, replies[len(reads) :], "exported")  # never an export with holes
        return export_session(session, merged(replies[: len(reads)], session.key))

    return Op(f"export session {session_id!r}", flow)


def import_jsonl(keys: Keys, data: bytes | str, user_id: str | None) -> Op[SessionInfo]:
    parsed = parse_export(data)
    rows: list[Any] = []
    for r in parsed.rows:
        rows += [r.message.id or "", int(r.message.role in PINNED_ROLES), r.seq, member(r.message, r.tokens)]
    updated = encode_datetime(parsed.updated_at), score(parsed.updated_at)
    header = (optional(parsed.title), optional(parsed.model), dumps(dict(parsed.metadata)), parsed.next_seq)
    state = (dumps(encode_state(parsed.state)), parsed.state.version)

    def flow(retried: bool) -> Flow[SessionInfo]:
        ukey, created = user_key(user_id), encode_datetime(parsed.created_at)
        key = scoped(user_id, parsed.id)
        reply = yield keys.script("import", key, ukey, created, *updated, *header, *state, len(parsed.rows), *rows)
        if reply[0] == b"taken":  # the user's own session of that id
            raise taken(parsed.id)
        return parsed.record(BACKEND, key, user_id).info()

    return Op(f"import session {parsed.id!r}", flow, retry=False)
