"""The SQL text of the SQLite stores, and the append-only list of migrations.

:class:`~convmem.stores.sqlite.SQLiteStore` and its async twin run exactly
these statements. Schema (DESIGN.md's storage sketch, with two deliberate
differences):

* ``messages`` has no ``status`` column: the status is derived from the
  session state (see :mod:`convmem.stores.base`), so eviction never updates
  a message row and history is never rewritten.
* ``sessions`` carries the state (JSON, with its ``version`` for optimistic
  saves), the fork link (``parent_id``, ``fork_seq``) and running counters,
  so listing sessions never counts messages.

Migrations are ``(name, statements)`` pairs. The list is append-only and
ordered: never edit or reorder an entry, add a new one. Applied names are
recorded in ``schema_migrations``; a database that records a name this list
does not know was written by a newer convmem and is refused before anything
is changed.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "0001_sessions_and_messages",
        (
            """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT,
            title TEXT,
            model TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            parent_id TEXT REFERENCES sessions (id),
            fork_seq INTEGER,
            base_count INTEGER NOT NULL DEFAULT 0,
            base_tokens INTEGER NOT NULL DEFAULT 0,
            message_count INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            next_seq INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT '{}',
            version INTEGER NOT NULL DEFAULT 0,
            deleted INTEGER NOT NULL DEFAULT 0
        )
        """,
            "CREATE INDEX sessions_by_user ON sessions (user_id, updated_at)",
            "CREATE INDEX sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL",
            """
        CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions (id),
            seq INTEGER NOT NULL,
            id TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL,
            payload TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            created_at TEXT,
            PRIMARY KEY (session_id, seq)
        )
        """,
            # Pinned messages can sit anywhere in the archive; this index finds them without reading it.
            "CREATE INDEX messages_pinned ON messages (session_id, seq) WHERE role IN ('system', 'developer')",
        ),
    ),
]

CREATE_MIGRATIONS = "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
HAS_MIGRATIONS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
APPLIED = "SELECT name FROM schema_migrations ORDER BY rowid"
RECORD_MIGRATION = "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)"

SESSION_COLUMNS = (
    "id, user_id, title, model, metadata, created_at, updated_at, parent_id, fork_seq, base_count, base_tokens, "
    "message_count, tokens, next_seq, state, version, deleted"
)
SELECT_SESSION = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
# ?1 is the prefix, ?2 the user id.
SELECT_BY_PREFIX = (
    "SELECT id FROM sessions WHERE user_id IS ?2 AND deleted = 0 AND substr(id, 1, length(?1)) = ?1 LIMIT 50"
)
LIST_SESSIONS = (
    f"SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id IS ? AND deleted = 0 "
    "ORDER BY updated_at DESC, id DESC LIMIT ?"
)
EXPIRED = "SELECT id FROM sessions WHERE user_id IS ? AND deleted = 0 AND updated_at < ? ORDER BY id"
INSERT_SESSION = (
    "INSERT INTO sessions (id, user_id, title, model, metadata, created_at, updated_at, parent_id, fork_seq, "
    "base_count, base_tokens, message_count, tokens, next_seq, state, version) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_SESSION = (
    "UPDATE sessions SET title = coalesce(?, title), metadata = coalesce(?, metadata), updated_at = ? WHERE id = ?"
)
AFTER_APPEND = (
    "UPDATE sessions SET next_seq = ?, message_count = message_count + ?, tokens = tokens + ?, updated_at = ? "
    "WHERE id = ?"
)
AFTER_DELETE = "UPDATE sessions SET message_count = message_count - ?, tokens = tokens - ?, updated_at = ? WHERE id = ?"
SAVE_STATE = "UPDATE sessions SET state = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?"
TOMBSTONE = "UPDATE sessions SET deleted = 1 WHERE id = ?"
DELETE_SESSION = "DELETE FROM sessions WHERE id = ?"
CHILDREN = "SELECT id, fork_seq FROM sessions WHERE parent_id = ?"

INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, seq, id, role, payload, tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
EXISTING_IDS = "SELECT id FROM messages WHERE id IN ({marks})"
_ROWS = "SELECT seq, payload, tokens FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ?"
PINNED = (
    "SELECT seq, payload, tokens FROM messages INDEXED BY messages_pinned "
    "WHERE session_id = ? AND seq BETWEEN ? AND ? AND role IN ('system', 'developer') ORDER BY seq"
)
RANGE = f"{_ROWS} ORDER BY seq"
RANGE_PAGE = f"{_ROWS} ORDER BY seq LIMIT ?"
UNPINNED_RANGE = f"{_ROWS} AND role NOT IN ('system', 'developer') ORDER BY seq"
UNPINNED_TAIL = f"{_ROWS} AND role NOT IN ('system', 'developer') ORDER BY seq DESC LIMIT ?"
COUNT_RANGE = "SELECT count(*), coalesce(sum(tokens), 0) FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ?"
TOKENS_OF = "SELECT seq, tokens FROM messages WHERE session_id = ? AND seq = ?"
DELETE_MESSAGE = "DELETE FROM messages WHERE session_id = ? AND seq = ?"
DELETE_AFTER = "DELETE FROM messages WHERE session_id = ? AND seq > ?"
DELETE_ALL = "DELETE FROM messages WHERE session_id = ?"
