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

from ...session import SessionInfo
from .._export import export_session, parse_export
from .._record import SessionRecord, scoped, segments, unscoped
from .._writes import check_fork, fork_home, fork_record, json_object, new_session_id, now, taken
from ..codec import dumps
from . import _sql as sql
from ._ops import (
    BACKEND,
    Flow,
    Op,
    Query,
    chain,
    history,
    message_columns,
    new_session,
    record,
    resolve,
    spans,
    stored,
    user_key,
)


def remove(row: SessionRecord) -> Flow[None]:
    """Delete a session; history its forks still read is kept for them and the session hidden."""
    children = yield Query(sql.CHILDREN, (row.key,))
    if children:
        keep = max(fork_seq for _, fork_seq in children)
        gone = yield Query(sql.DELETE_AFTER, (row.key, keep))
        yield Query(sql.AFTER_DELETE, (len(gone), sum(t for (t,) in gone), row.updated_at, row.key))
        yield Query(sql.TOMBSTONE, (row.key,))
        return
    yield Query(sql.DELETE_ALL, (row.key,))
    yield Query(sql.DELETE_SESSION, (row.key,))
    if row.parent_key is not None:
        parents = yield Query(sql.SELECT_SESSION_LOCKED, (row.parent_key,))
        if parents and record(parents[0]).deleted:
            yield from remove(record(parents[0]))


def get_session(session_id: str, user_id: str | None) -> Op[SessionInfo]:
    def flow(retried: bool) -> Flow[SessionInfo]:
        return (yield from resolve(session_id, user_id)).info()

    return Op(f"read session {session_id!r}", flow)


def list_sessions(user_id: str | None, limit: int | None) -> Op[list[SessionInfo]]:
    def flow(retried: bool) -> Flow[list[SessionInfo]]:
        rows = yield Query(sql.LIST_SESSIONS, {"user": user_key(user_id), "limit": limit})
        return [record(r).listed() for r in rows]

    return Op("list sessions", flow)


def update_session(
    session_id: str, user_id: str | None, title: str | None, metadata: Mapping[str, Any] | None
) -> Op[SessionInfo]:
    encoded = dumps(json_object(metadata)) if metadata is not None else None

    def flow(retried: bool) -> Flow[SessionInfo]:
        row = yield from resolve(session_id, user_id, lock=True)
        return record((yield Query(sql.UPDATE_SESSION, (title, encoded, now(), row.key)))[0]).info()

    return Op(f"update session {session_id!r}", flow, "transaction")


def delete_session(session_id: str, user_id: str | None) -> Op[None]:
    def flow(retried: bool) -> Flow[None]:
        yield from remove((yield from resolve(session_id, user_id, lock=True)))

    return Op(f"delete session {session_id!r}", flow, "transaction", retry=False)


def expire(older_than: timedelta, user_id: str | None) -> Op[list[str]]:
    cutoff = now() - older_than

    def flow(retried: bool) -> Flow[list[str]]:
        doomed = [i for (i,) in (yield Query(sql.EXPIRED, {"user": user_key(user_id), "cutoff": cutoff}))]
        for key in doomed:
            rows = yield Query(sql.SELECT_SESSION, (key,))
            if rows and not record(rows[0]).deleted:  # a tombstoned parent may have gone with its last fork
                yield from remove(record(rows[0]))
        return [unscoped(key) for key in doomed]

    return Op("expire sessions", flow, "transaction", retry=False)


def fork(session_id: str, at_seq: int, user_id: str | None) -> Op[SessionInfo]:
    def flow(retried: bool) -> Flow[SessionInfo]:
        source = yield from resolve(session_id, user_id, lock=True)
        check_fork(source.id, source.next_seq, at_seq)
        ancestors = yield from chain(source)
        [(count, tokens)] = yield Query(sql.COUNT_RANGE, spans(segments([(i, f) for i, f, _ in ancestors]), 0, at_seq))
        home = ancestors[fork_home([(i, f) for i, f, _ in ancestors], at_seq)][0]
        fork_id = new_session_id()
        made = fork_record(
            source,
            at_seq,
            key=scoped(user_id, fork_id),
            session_id=fork_id,
            parent=(home, unscoped(home)),
            shared=(count, tokens),
            when=now(),
        )
        yield Query(sql.INSERT_SESSION, new_session(made))
        return record((yield Query(sql.SELECT_SESSION, (made.key,)))[0]).info()

    return Op(f"fork session {session_id!r}", flow, "transaction", retry=False)


def export_jsonl(session_id: str, user_id: str | None) -> Op[bytes]:
    def flow(retried: bool) -> Flow[bytes]:
        row = yield from resolve(session_id, user_id)
        segs = yield from history(row)
        rows = yield Query(sql.RANGE_PAGE, (*spans(segs, 0, row.next_seq - 1), None))
        return export_session(row, (stored(row.key, *r) for r in rows))

    return Op(f"export session {session_id!r}", flow, "snapshot")


def import_jsonl(data: bytes | str, user_id: str | None) -> Op[SessionInfo]:
    parsed = parse_export(data)
    batch = [(r.message, r.tokens) for r in parsed.rows]

    key = scoped(user_id, parsed.id)
    made = parsed.record(BACKEND, key, user_id)

    def flow(retried: bool) -> Flow[SessionInfo]:
        if (yield Query(sql.SELECT_SESSION, (key,))):  # the user's own session of that id
            raise taken(parsed.id)
        yield Query(sql.INSERT_SESSION, new_session(made))
        if batch:
            yield Query(sql.INSERT_MESSAGES, (key, [r.seq for r in parsed.rows], *message_columns(batch)))
        return made.info()

    return Op(f"import session {parsed.id!r}", flow, "transaction", retry=False)
