"""``forget`` and ``compact`` in SQLite: one write transaction erases, a VACUUM clears the file.

The erasure runs in one ``BEGIN IMMEDIATE`` transaction: sessions and messages (forks first, so no
parent is hidden to keep rows for a fork that goes too), facts, blocks, and recall documents with
their vectors and their FTS5 entries. The FTS5 index is contentless, so each entry is deleted with
the ``'delete'`` command and the document's own indexed text (still in ``recall_docs`` until the
same transaction removes it). ``secure_delete`` is ``FAST`` for the connection: deleted cells are zeroed
where that costs no extra write; pages freed whole keep their bytes until ``compact``.

What stays until :func:`compact`: FTS5 keeps deleted terms in its segments until they are merged,
freed pages keep their bytes, and the WAL keeps old page images until a checkpoint. ``compact`` merges the FTS5 segments
(``'optimize'``), rebuilds the file (``VACUUM``) and truncates the WAL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from ...errors import SessionNotFoundError, StoreError
from .._forget import KINDS, descendants
from .._longterm_codec import key
from .._record import SessionRecord, unscoped
from . import _sql as sql
from ._db import Database
from ._rows import session_row

__all__ = ["PENDING", "compact", "erase"]

PENDING = "deleted FTS5 terms in unmerged index segments, freed pages, and old pages in the WAL"

_COUNT_SESSIONS = "SELECT count(*) FROM sessions WHERE user_id IS ?"
_COUNT_MESSAGES = "SELECT count(*) FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE user_id IS ?)"
_USER_SESSIONS = "SELECT id, parent_id FROM sessions WHERE user_id IS ?"
_DELETE_USER_MESSAGES = "DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE user_id IS ?)"
_DELETE_USER_SESSIONS = "DELETE FROM sessions WHERE user_id IS ?"
_IN_IDS = "(SELECT value FROM json_each(?))"
_DELETE_FACTS = "DELETE FROM facts WHERE user_key = ?"
_DELETE_SESSION_FACTS = f"DELETE FROM facts WHERE user_key = ? AND json_extract(payload, '$.session_id') IN {_IN_IDS}"
_DELETE_BLOCKS = "DELETE FROM blocks WHERE scope_key = ?"
_DOCS = "SELECT number, key, context FROM recall_docs WHERE user_key = ?"
_SESSION_DOCS = f"{_DOCS} AND session_id IN {_IN_IDS}"
_DELETE_FTS = "INSERT INTO recall_fts (recall_fts, rowid, body, context) VALUES ('delete', ?, ?, ?)"
_DELETE_VECTORS = f"DELETE FROM recall_vectors WHERE number IN {_IN_IDS}"
_DELETE_DOCS = f"DELETE FROM recall_docs WHERE number IN {_IN_IDS}"
_DELETE_RECALL_USER = "DELETE FROM recall_users WHERE user_key = ?"


def erase(
    db: Database,
    user_id: str | None,
    session_id: str | None,
    resolve: Callable[[sqlite3.Connection, str, str | None], SessionRecord],
    remove: Callable[[sqlite3.Connection, SessionRecord], None],
) -> tuple[dict[str, int], list[str]]:
    """Erase the user (``session_id`` None) or the session and its forks; returns (counts, session ids).

    ``resolve`` and ``remove`` are the store's own: a prefix resolves as in every other call, and a
    session is removed by the rule that keeps the rows a surviving fork still reads.
    """
    counts = dict.fromkeys(KINDS, 0)
    owner = key(user_id)
    with db.transaction(write=True) as conn:
        sessions_before = conn.execute(_COUNT_SESSIONS, (user_id,)).fetchone()[0]
        messages_before = conn.execute(_COUNT_MESSAGES, (user_id,)).fetchone()[0]
        if session_id is None:
            erased = [unscoped(k) for (k, _) in conn.execute(_USER_SESSIONS, (user_id,))]
            conn.execute(_DELETE_USER_MESSAGES, (user_id,))
            conn.execute(_DELETE_USER_SESSIONS, (user_id,))
            counts["facts"] = conn.execute(_DELETE_FACTS, (owner,)).rowcount
            counts["blocks"] = conn.execute(_DELETE_BLOCKS, (owner,)).rowcount
            docs = conn.execute(_DOCS, (owner,)).fetchall()
        else:
            try:
                target = resolve(conn, session_id, user_id)
            except SessionNotFoundError:
                return counts, []  # gone already: forgetting twice erases nothing the second time
            keys = descendants(target.key, conn.execute(_USER_SESSIONS, (user_id,)).fetchall())
            erased = [unscoped(k) for k in keys]
            for k in keys:
                row = session_row(conn, k)
                if row is not None:  # removing a fork may have removed its hidden parent already
                    remove(conn, row)
            ids = json.dumps(erased)
            counts["facts"] = conn.execute(_DELETE_SESSION_FACTS, (owner, ids)).rowcount
            docs = conn.execute(_SESSION_DOCS, (owner, ids)).fetchall()
        counts["sessions"] = sessions_before - conn.execute(_COUNT_SESSIONS, (user_id,)).fetchone()[0]
        counts["messages"] = messages_before - conn.execute(_COUNT_MESSAGES, (user_id,)).fetchone()[0]
        if docs:
            user = conn.execute(sql.SELECT_RECALL_USER, (owner,)).fetchone()
            high = int(user[0]) << sql.FTS_USER_SHIFT if user is not None else 0
            conn.executemany(_DELETE_FTS, [(high | number, body, context) for number, body, context in docs])
            numbers = json.dumps([number for number, _, _ in docs])
            counts["vectors"] = conn.execute(_DELETE_VECTORS, (numbers,)).rowcount
            counts["recall_docs"] = conn.execute(_DELETE_DOCS, (numbers,)).rowcount
        if session_id is None:
            conn.execute(_DELETE_RECALL_USER, (owner,))  # the user's id in plain text goes too
    return counts, erased


def compact(db: Database) -> None:
    """Merge the FTS5 segments, rebuild the file and truncate the WAL: nothing erased stays in a byte of it."""
    with db.transaction(write=True) as conn:
        conn.execute("INSERT INTO recall_fts (recall_fts) VALUES ('optimize')")
    busy = db.outside_transaction("VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)")
    if busy and busy[0]:
        raise StoreError(
            f"SQLite database {db.path}: another connection is reading, so the WAL could not be truncated; "
            "run compact again when it is done"
        )
