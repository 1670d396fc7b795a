"""``forget`` and ``compact`` in PostgreSQL: one transaction erases, ``VACUUM FULL`` clears the relation files.

The erasure is one read-committed transaction that locks the user's session rows first
(``FOR UPDATE``), so an append to one of them waits, then finds the session gone
(:class:`~convmem.errors.SessionLostError`); a fork or a delete of the same session is ordered
behind it. It removes the sessions (forks first, by the store's own rule for shared history), the
messages, the facts, the blocks, the recall documents (their ``tsvector`` is a column of the row, so
the GIN entries go with it) and their vectors first (pgvector's column included: migration 0007 dropped
the foreign key whose per-row cascade made this quadratic), and the user's document count.

What stays until :data:`COMPACT_SQL`: deleted rows are dead tuples in the heap and their index
entries, readable in the relation files until vacuumed; a plain ``VACUUM`` frees the space but
need not overwrite it, so ``compact`` runs ``VACUUM FULL``, which writes every table and index anew
(it locks each table for the time it takes). The server's write-ahead log keeps the inserts until
the server recycles its segments: that is the server's, outside the schema.
"""

from __future__ import annotations

from ...errors import SessionNotFoundError, StoreError
from .._forget import KINDS, descendants
from .._record import unscoped
from . import _sql as sql
from ._ops import Flow, Op, Query, record, resolve, user_key
from ._sessions import remove

__all__ = ["COMPACT_TABLES", "PENDING", "compact", "erase"]

PENDING = "dead tuples and index entries in the relation files until VACUUM FULL"
COMPACT_TABLES = ("messages", "sessions", "facts", "blocks", "recall_vectors", "recall_docs", "recall_user_counts")

_LOCK_USER = "SELECT id, parent_id FROM sessions WHERE user_key = %s ORDER BY id FOR UPDATE"
_COUNT_SESSIONS = "SELECT count(*) FROM sessions WHERE user_key = %s"
_COUNT_MESSAGES = "SELECT count(*) FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE user_key = %s)"
_DELETE_MESSAGES = "DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE user_key = %s)"
_DELETE_SESSIONS = "DELETE FROM sessions WHERE user_key = %s"


def _count(statement: str) -> str:
    return f"WITH gone AS ({statement} RETURNING 1) SELECT count(*) FROM gone"


_DELETE_FACTS = _count("DELETE FROM facts WHERE user_key = %s")
_DELETE_SESSION_FACTS = _count(
    "DELETE FROM facts WHERE user_key = %s AND (payload::json ->> 'session_id') = ANY(%s::text[])"
)
_DELETE_BLOCKS = _count("DELETE FROM blocks WHERE scope_key = %s")
_DOCS = "SELECT number FROM recall_docs WHERE user_key = %s"
_SESSION_DOCS = f"{_DOCS} AND session_id = ANY(%s::text[])"
_DELETE_VECTORS = _count("DELETE FROM recall_vectors WHERE user_key = %s AND number = ANY(%s::bigint[])")
# A user's erasure takes every vector of the user, also one whose document went first (a save_vectors racing it).
_DELETE_USER_VECTORS = _count("DELETE FROM recall_vectors WHERE user_key = %s")
_DELETE_DOCS = _count("DELETE FROM recall_docs WHERE user_key = %s AND number = ANY(%s::bigint[])")
_UNCOUNT_DOCS = "UPDATE recall_user_counts SET docs = greatest(docs - %s, 0) WHERE user_key = %s"
_DELETE_USER_COUNT = "DELETE FROM recall_user_counts WHERE user_key = %s"


def erase(user_id: str | None, session_id: str | None) -> Op[tuple[dict[str, int], list[str]]]:
    """Erase the user (``session_id`` None) or the session and its forks; returns (counts, session ids)."""
    owner = user_key(user_id)

    def flow(retried: bool) -> Flow[tuple[dict[str, int], list[str]]]:
        counts = dict.fromkeys(KINDS, 0)
        pairs = [(k, p) for k, p in (yield Query(_LOCK_USER, (owner,)))]
        sessions_before = (yield Query(_COUNT_SESSIONS, (owner,)))[0][0]
        messages_before = (yield Query(_COUNT_MESSAGES, (owner,)))[0][0]
        if session_id is None:
            erased = [unscoped(k) for k, _ in pairs]
            yield Query(_DELETE_MESSAGES, (owner,))
            yield Query(_DELETE_SESSIONS, (owner,))
            counts["facts"] = (yield Query(_DELETE_FACTS, (owner,)))[0][0]
            counts["blocks"] = (yield Query(_DELETE_BLOCKS, (owner,)))[0][0]
            docs = yield Query(_DOCS, (owner,))
        else:
            try:
                target = yield from resolve(session_id, user_id, lock=True)
            except SessionNotFoundError:
                return counts, []  # gone already: forgetting twice erases nothing the second time
            keys = descendants(target.key, pairs)
            erased = [unscoped(k) for k in keys]
            for k in keys:
                rows = yield Query(sql.SELECT_SESSION_LOCKED, (k,))
                if rows:  # removing a fork may have removed its hidden parent already
                    yield from remove(record(rows[0]))
            counts["facts"] = (yield Query(_DELETE_SESSION_FACTS, (owner, erased)))[0][0]
            docs = yield Query(_SESSION_DOCS, (owner, erased))
        counts["sessions"] = sessions_before - (yield Query(_COUNT_SESSIONS, (owner,)))[0][0]
        counts["messages"] = messages_before - (yield Query(_COUNT_MESSAGES, (owner,)))[0][0]
        numbers = [n for (n,) in docs]
        if session_id is None:
            counts["vectors"] = (yield Query(_DELETE_USER_VECTORS, (owner,)))[0][0]
        if numbers:
            if session_id is not None:
                counts["vectors"] = (yield Query(_DELETE_VECTORS, (owner, numbers)))[0][0]
            counts["recall_docs"] = (yield Query(_DELETE_DOCS, (owner, numbers)))[0][0]
            yield Query(_UNCOUNT_DOCS, (counts["recall_docs"], owner))
        if session_id is None:
            yield Query(_DELETE_USER_COUNT, (owner,))  # its key is the user's id
        return counts, erased

    return Op("forget", flow, "transaction", retry=False)


#: How long ``compact`` waits for older transactions of the database to end (see :func:`compact`).
WAIT_FOR_SNAPSHOTS = 30.0
# A transaction id newer than the erasure (it committed before the compaction began).
_STARTED = "SELECT (txid_current() %% 4294967296)::text"
# Other backends of this database whose snapshot horizon (xmin) or own transaction is older than that id: the
# erased rows are still visible to them, or to a snapshot their xmin holds back (VACUUM FULL keeps those rows).
_OLDER = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND (age(backend_xmin) > age(%s::xid) OR age(backend_xid) > age(%s::xid))"
)


def compact(wait: float = WAIT_FOR_SNAPSHOTS) -> Op[None]:
    """``VACUUM FULL`` of every table ``forget`` deletes from (each statement on its own, outside a transaction).

    ``VACUUM FULL`` copies every row that some open snapshot of the database can still see, so an erased row
    survives it while a transaction that began before the erasure is open (another client's, a long report):
    the compaction first waits up to ``wait`` seconds for those to end, and refuses with a StoreError naming how
    many are left, rather than report a compaction that left erased rows in the files.
    """

    def flow(retried: bool) -> Flow[None]:
        ((started,),) = yield Query(_STARTED)
        waited = 0.0
        while True:
            ((older,),) = yield Query(_OLDER, (started, started))
            if older == 0:
                break
            if waited >= wait:
                raise StoreError(
                    f"PostgreSQL compaction: {older} other transaction(s) of this database began before it and may "
                    f"still see erased rows (VACUUM FULL keeps what an open snapshot can see); waited {wait:g} s: "
                    "end them and run the compaction again"
                )
            yield Query("SELECT pg_sleep(0.05)")
            waited += 0.05
        for table in COMPACT_TABLES:
            yield Query(f"VACUUM FULL {table}")

    return Op("compact", flow, "statement")
