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

from ...errors import SessionNotFoundError, StoreError
from ...messages import PINNED_ROLES
from ...session import SessionInfo
from .._common import export_header, export_line, fork_state, json_object, new_session_id, now, parse_export, segments
from .._writes import scoped, unscoped
from ..codec import dumps, encode_datetime, encode_state
from ._ops import (
    Cmd,
    Flow,
    Keys,
    Op,
    Pipe,
    chain,
    history,
    merged,
    optional,
    ranges,
    resolve,
    score,
    stamp,
    user_key,
)
from ._rows import Session, member, pairs


def update_session(
    keys: Keys, session_id: str, user_id: str | None, title: str | None, metadata: Mapping[str, Any] | None
) -> Op[SessionInfo]:
    encoded = optional(dumps(json_object(metadata)) if metadata is not None else None)

    def flow(retried: bool) -> Flow[SessionInfo]:
        session = yield from resolve(keys, session_id, user_id)
        found = yield keys.script("update", session.id, user_key(user_id), *stamp(), optional(title), encoded)
        if not found:
            raise SessionNotFoundError(session_id)
        return Session(session.id, pairs(found)).info()

    return Op(f"update session {session_id!r}", flow)


def delete_session(keys: Keys, session_id: str, user_id: str | None) -> Op[None]:
    def flow(retried: bool) -> Flow[None]:
        session = yield from resolve(keys, session_id, user_id)
        if not (yield keys.script("delete", session.id, user_key(user_id))):
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
        source = yield from resolve(keys, session_id, user_id)
        if not 0 <= at_seq < source.next_seq:
            raise StoreError(
                f"cannot fork session {source.name!r} at seq {at_seq}: its seqs run from 0 to {source.next_seq - 1}"
            )
        ancestors = yield from chain(keys, source)
        spans = [
            (seg.session_id, *span)
            for seg in segments([(i, f) for i, f, _ in ancestors])
            if (span := seg.clip(0, at_seq)) is not None
        ]
        shared = [value for span in spans for value in span]
        home = 0  # branch from the session where the shared history really lives
        while (branched := ancestors[home][1]) is not None and ancestors[home][2] is not None and at_seq <= branched:
            home += 1
        fork_id = scoped(user_id, new_session_id())
        while True:
            probe = yield keys.script("fork", source.id, ukey, at_seq, *[""] * 7, *shared)
            _check_fork(probe, source.name, at_seq)
            count, tokens = int(probe[1]), int(probe[2])
            state = dumps(encode_state(fork_state(source.state(), at_seq, messages=count)))
            args = (fork_id, *stamp(), ancestors[home][0], state, count, tokens)
            reply = yield keys.script("fork", source.id, ukey, at_seq, *args, *shared)
            _check_fork(reply, source.name, at_seq)
            if reply[0] == b"ok":
                found = yield Cmd(("HGETALL", keys("s", fork_id)))
                return Session(fork_id, pairs(found)).info()

    return Op(f"fork session {session_id!r}", flow, retry=False)


def _check_fork(reply: Any, session_id: str, at_seq: int) -> None:
    if reply[0] == b"notfound":
        raise SessionNotFoundError(session_id)
    if reply[0] == b"range":
        raise StoreError(
            f"cannot fork session {session_id!r} at seq {at_seq}: its seqs run from 0 to {int(reply[1]) - 1}"
        )


def export_jsonl(keys: Keys, session_id: str, user_id: str | None) -> Op[bytes]:
    def flow(retried: bool) -> Flow[bytes]:
        session = yield from resolve(keys, session_id, user_id)
        segs = yield from history(keys, session)
        rows = merged((yield Pipe(ranges(keys, segs, 0, session.next_seq - 1))), session.id)
        header = export_header(session.info(), session.state(), session.next_seq)
        return b"".join([header, *map(export_line, rows)])

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
            raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported")
        return parsed.info(user_id)

    return Op(f"import session {parsed.id!r}", flow, retry=False)
