"""The PostgreSQL store's session management as I/O-free flows: list, update, delete, expire, fork, export, import.

The other half of :mod:`convmem.stores.postgres._ops` (same :class:`~._ops.Op`
and :class:`~._ops.Query` types, same drivers). Writes that create or
remove sessions lock the session row (``FOR UPDATE``) first, so a fork and
a delete of the same session, or two deletes, are ordered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ...errors import StoreError
from ...session import SessionInfo
from .._common import export_header, export_line, fork_state, json_object, new_session_id, now, parse_export, segments
from .._writes import scoped, unscoped
from ..codec import dumps, encode_state
from . import _sql as sql
from ._ops import (
    Flow,
    Op,
    Query,
    Row,
    chain,
    history,
    message_columns,
    new_session,
    resolve,
    spans,
    stored,
    user_key,
)


def remove(row: Row) -> Flow[None]:
    """Delete a session; history its forks still read is kept for them and the session hidden."""
    children = yield Query(sql.CHILDREN, (row.id,))
    if children:
        keep = max(fork_seq for _, fork_seq in children)
        gone = yield Query(sql.DELETE_AFTER, (row.id, keep))
        yield Query(sql.AFTER_DELETE, (len(gone), sum(t for (t,) in gone), row.updated_at, row.id))
        yield Query(sql.TOMBSTONE, (row.id,))
        return
    yield Query(sql.DELETE_ALL, (row.id,))
    yield Query(sql.DELETE_SESSION, (row.id,))
    if row.parent_id is not None:
        parents = yield Query(sql.SELECT_SESSION_LOCKED, (row.parent_id,))
        if parents and Row(*parents[0]).deleted:
            yield from remove(Row(*parents[0]))


def get_session(session_id: str, user_id: str | None) -> Op[SessionInfo]:
    def flow(retried: bool) -> Flow[SessionInfo]:
        return (yield from resolve(session_id, user_id)).info()

    return Op(f"read session {session_id!r}", flow)


def list_sessions(user_id: str | None, limit: int | None) -> Op[list[SessionInfo]]:
    def flow(retried: bool) -> Flow[list[SessionInfo]]:
        return [Row(*r).listed() for r in (yield Query(sql.LIST_SESSIONS, (user_key(user_id), limit)))]

    return Op("list sessions", flow)


def update_session(
    session_id: str, user_id: str | None, title: str | None, metadata: Mapping[str, Any] | None
) -> Op[SessionInfo]:
    encoded = dumps(json_object(metadata)) if metadata is not None else None

    def flow(retried: bool) -> Flow[SessionInfo]:
        row = yield from resolve(session_id, user_id, lock=True)
        return Row(*(yield Query(sql.UPDATE_SESSION, (title, encoded, now(), row.id)))[0]).info()

    return Op(f"update session {session_id!r}", flow, "transaction")


def delete_session(session_id: str, user_id: str | None) -> Op[None]:
    def flow(retried: bool) -> Flow[None]:
        yield from remove((yield from resolve(session_id, user_id, lock=True)))

    return Op(f"delete session {session_id!r}", flow, "transaction", retry=False)


def expire(older_than: timedelta, user_id: str | None) -> Op[list[str]]:
    cutoff = now() - older_than

    def flow(retried: bool) -> Flow[list[str]]:
        doomed = [i for (i,) in (yield Query(sql.EXPIRED, (user_key(user_id), cutoff)))]
        for key in doomed:
            rows = yield Query(sql.SELECT_SESSION, (key,))
            if rows and not Row(*rows[0]).deleted:  # a tombstoned parent may have gone with its last fork
                yield from remove(Row(*rows[0]))
        return [unscoped(key) for key in doomed]

    return Op("expire sessions", flow, "transaction", retry=False)


def fork(session_id: str, at_seq: int, user_id: str | None) -> Op[SessionInfo]:
    def flow(retried: bool) -> Flow[SessionInfo]:
        source = yield from resolve(session_id, user_id, lock=True)
        if not 0 <= at_seq < source.next_seq:
            raise StoreError(
                f"cannot fork session {source.name!r} at seq {at_seq}: its seqs run from 0 to {source.next_seq - 1}"
            )
        ancestors = yield from chain(source)
        [(count, tokens)] = yield Query(sql.COUNT_RANGE, spans(segments([(i, f) for i, f, _ in ancestors]), 0, at_seq))
        home = 0  # branch from the session where the shared history really lives
        while ancestors[home][2] is not None and ancestors[home][1] is not None and at_seq <= ancestors[home][1]:
            home += 1
        state = fork_state(source.session_state(), at_seq, messages=count)
        fork_id, stamp = scoped(user_id, new_session_id()), now()
        yield Query(
            sql.INSERT_SESSION,
            new_session(
                fork_id,
                user_id,
                stamp,
                stamp,
                title=source.title,
                model=source.model,
                metadata=source.metadata,
                parent_id=ancestors[home][0],
                fork_seq=at_seq,
                base_count=count,
                base_tokens=tokens,
                next_seq=at_seq + 1,
                state=dumps(encode_state(state)),
            ),
        )
        return Row(*(yield Query(sql.SELECT_SESSION, (fork_id,)))[0]).info()

    return Op(f"fork session {session_id!r}", flow, "transaction", retry=False)


def export_jsonl(session_id: str, user_id: str | None) -> Op[bytes]:
    def flow(retried: bool) -> Flow[bytes]:
        row = yield from resolve(session_id, user_id)
        segs = yield from history(row)
        rows = yield Query(sql.RANGE_PAGE, (*spans(segs, 0, row.next_seq - 1), None))
        header = export_header(row.info(), row.session_state(), row.next_seq)
        return b"".join([header, *(export_line(stored(row.id, *r)) for r in rows)])

    return Op(f"export session {session_id!r}", flow, "snapshot")


def import_jsonl(data: bytes | str, user_id: str | None) -> Op[SessionInfo]:
    parsed = parse_export(data)
    batch = [(r.message, r.tokens) for r in parsed.rows]

    key = scoped(user_id, parsed.id)

    def flow(retried: bool) -> Flow[SessionInfo]:
        if (yield Query(sql.SELECT_SESSION, (key,))):  # the user's own session of that id
            raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported")
        yield Query(
            sql.INSERT_SESSION,
            new_session(
                key,
                user_id,
                parsed.created_at,
                parsed.updated_at,
                title=parsed.title,
                model=parsed.model,
                metadata=dumps(dict(parsed.metadata)),
                message_count=len(batch),
                tokens=sum(r.tokens for r in parsed.rows),
                next_seq=parsed.next_seq,
                state=dumps(encode_state(parsed.state)),
                version=parsed.state.version,
            ),
        )
        if batch:
            yield Query(sql.INSERT_MESSAGES, (key, [r.seq for r in parsed.rows], *message_columns(batch)))
        return parsed.info(user_id)

    return Op(f"import session {parsed.id!r}", flow, "transaction", retry=False)
