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
    (
        "0002_long_term_memory",
        (
            # Facts are inserted and ended, never deleted; *_ts columns (epoch seconds) serve range queries.
            """
        CREATE TABLE facts (
            id TEXT PRIMARY KEY,
            user_key TEXT NOT NULL,
            payload TEXT NOT NULL,
            valid_from_ts REAL NOT NULL,
            valid_to_ts REAL
        )
        """,
            "CREATE INDEX facts_by_user ON facts (user_key, valid_from_ts)",
            # Working blocks, one row per (scope, name), with an optimistic version.
            """
        CREATE TABLE blocks (
            scope_key TEXT NOT NULL,
            name TEXT NOT NULL,
            payload TEXT NOT NULL,
            version INTEGER NOT NULL,
            PRIMARY KEY (scope_key, name)
        )
        """,
            # Recall: archived messages as indexed (key text, filters), an FTS5 index over them, and vectors.
            """
        CREATE TABLE recall_docs (
            number INTEGER PRIMARY KEY,
            message_id TEXT NOT NULL UNIQUE,
            user_key TEXT NOT NULL,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            created_at TEXT NOT NULL,
            created_ts REAL NOT NULL,
            text TEXT NOT NULL,
            key TEXT NOT NULL,
            context TEXT NOT NULL
        )
        """,
            "CREATE INDEX recall_docs_by_user ON recall_docs (user_key, number)",
            "CREATE VIRTUAL TABLE recall_fts USING fts5(body, context, content='', tokenize='porter unicode61')",
            """
        CREATE TABLE embeddings (
            message_id TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (message_id, model)
        )
        """,
        ),
    ),
    (
        # The owner column carries one token per user ('u' + hex of the user key), so FTS5 itself
        # restricts a search to the user's rows and ranks only those; joining first was 40x slower.
        "0003_recall_fts_owner",
        (
            "DROP TABLE recall_fts",
            "CREATE VIRTUAL TABLE recall_fts USING fts5(body, context, owner, content='', tokenize='porter unicode61')",
            "INSERT INTO recall_fts (rowid, body, context, owner) "
            "SELECT number, key, context, 'u' || hex(user_key) FROM recall_docs",
        ),
    ),
]

# The SQL form of convmem.stores._record.scoped: a user's session id as a key of the sessions table.
_SCOPED = "CASE WHEN {user} IS NULL THEN '-:' ELSE length({user}) || '=' || {user} || ':' END || {id}"
MIGRATIONS.append(
    (
        # Session ids become scoped by user (two users may both have a session "chat", and neither can
        # learn of the other's), and message ids unique per session instead of per database.
        "0004_sessions_scoped_by_user",
        (
            "PRAGMA defer_foreign_keys = ON",  # keys change in several tables; checked at commit
            """
        CREATE TABLE messages_scoped (
            session_id TEXT NOT NULL REFERENCES sessions (id),
            seq INTEGER NOT NULL,
            id TEXT NOT NULL,
            role TEXT NOT NULL,
            payload TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            created_at TEXT,
            PRIMARY KEY (session_id, seq)
        )
        """,
            "INSERT INTO messages_scoped (session_id, seq, id, role, payload, tokens, created_at) SELECT "
            + _SCOPED.format(user="s.user_id", id="m.session_id")
            + ", m.seq, m.id, m.role, m.payload, m.tokens, m.created_at FROM messages m JOIN sessions s "
            "ON s.id = m.session_id",
            "DROP TABLE messages",
            "ALTER TABLE messages_scoped RENAME TO messages",
            "CREATE INDEX messages_pinned ON messages (session_id, seq) WHERE role IN ('system', 'developer')",
            "CREATE UNIQUE INDEX messages_ids ON messages (session_id, id)",
            "UPDATE sessions SET parent_id = "
            + _SCOPED.format(user="user_id", id="parent_id")
            + " WHERE parent_id IS NOT NULL",
            "UPDATE sessions SET id = " + _SCOPED.format(user="user_id", id="id"),
        ),
    )
)

MIGRATIONS.append(
    (
        # Message ids are unique only per session in some stores: a document is (user, session, message id),
        # and a vector belongs to a document (its number), not to a bare message id that another user's or
        # session's message may share. Numbers (the FTS rowids) are kept. Vectors join their document by the
        # message id, unique until now.
        "0005_recall_keyed_by_owner",
        (
            """
        CREATE TABLE recall_docs_keyed (
            number INTEGER PRIMARY KEY,
            message_id TEXT NOT NULL,
            user_key TEXT NOT NULL,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            created_at TEXT NOT NULL,
            created_ts REAL NOT NULL,
            text TEXT NOT NULL,
            key TEXT NOT NULL,
            context TEXT NOT NULL,
            UNIQUE (user_key, session_id, message_id)
        )
        """,
            "INSERT INTO recall_docs_keyed SELECT number, message_id, user_key, session_id, seq, role, created_at, "
            "created_ts, text, key, context FROM recall_docs",
            """
        CREATE TABLE recall_vectors (
            number INTEGER NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (number, model)
        )
        """,
            "INSERT INTO recall_vectors SELECT d.number, e.model, e.dim, e.vector "
            "FROM embeddings e JOIN recall_docs d ON d.message_id = e.message_id",
            "DROP TABLE embeddings",
            "DROP TABLE recall_docs",
            "ALTER TABLE recall_docs_keyed RENAME TO recall_docs",
            "CREATE INDEX recall_docs_by_user ON recall_docs (user_key, number)",
        ),
    )
)

MIGRATIONS.append(
    (
        # A search scores one user's rows only if FTS5 can find them without reading every user's: the FTS
        # rowid carries the user's number in its high bits (recall_users) and the document's number in the
        # low ones, so one user's rows are one rowid range, which FTS5 seeks to. The owner column goes.
        "0006_recall_fts_by_user_range",
        (
            "CREATE TABLE recall_users (id INTEGER PRIMARY KEY, user_key TEXT NOT NULL UNIQUE)",
            "INSERT INTO recall_users (user_key) SELECT DISTINCT user_key FROM recall_docs ORDER BY user_key",
            "DROP TABLE recall_fts",
            "CREATE VIRTUAL TABLE recall_fts USING fts5(body, context, content='', tokenize='porter unicode61')",
            "INSERT INTO recall_fts (rowid, body, context) SELECT (u.id << 36) | d.number, d.key, d.context "
            "FROM recall_docs d JOIN recall_users u ON u.user_key = d.user_key ORDER BY 1",
        ),
    )
)

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
# An append that carries the state it implies (see convmem.stores.base): one transaction writes both.
AFTER_APPEND_WITH_STATE = (
    "UPDATE sessions SET next_seq = ?, message_count = message_count + ?, tokens = tokens + ?, updated_at = ?, "
    "state = ?, version = ? WHERE id = ?"
)
AFTER_DELETE = "UPDATE sessions SET message_count = message_count - ?, tokens = tokens - ?, updated_at = ? WHERE id = ?"
SAVE_STATE = "UPDATE sessions SET state = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?"
TOMBSTONE = "UPDATE sessions SET deleted = 1 WHERE id = ?"
DELETE_SESSION = "DELETE FROM sessions WHERE id = ?"
CHILDREN = "SELECT id, fork_seq FROM sessions WHERE parent_id = ?"

INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, seq, id, role, payload, tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# The rows of one segment of a session's history that hold any of the given message ids.
STORED_IDS = (
    "SELECT id, seq, payload, tokens FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ? AND id IN ({marks})"
)
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

# -- long-term memory (0002) ---------------------------------------------------------------------
# user_key / scope_key: JSON of the user id, so that None ("null") and "" stay distinct and indexable.
INSERT_FACT = "INSERT INTO facts (id, user_key, payload, valid_from_ts, valid_to_ts) VALUES (?, ?, ?, ?, ?)"
SELECT_FACT = "SELECT user_key, payload, valid_to_ts FROM facts WHERE id = ?"
UPDATE_FACT = "UPDATE facts SET payload = ?, valid_to_ts = ? WHERE id = ? AND valid_to_ts IS NULL"
LIST_FACTS = "SELECT payload FROM facts WHERE user_key = ?"
LIST_OPEN_FACTS = "SELECT payload FROM facts WHERE user_key = ? AND valid_to_ts IS NULL"
LIST_FACTS_AT = (
    "SELECT payload FROM facts WHERE user_key = ? AND valid_from_ts <= ? AND (valid_to_ts IS NULL OR valid_to_ts > ?)"
)

SELECT_BLOCK = "SELECT payload, version FROM blocks WHERE scope_key = ? AND name = ?"
INSERT_BLOCK = "INSERT INTO blocks (scope_key, name, payload, version) VALUES (?, ?, ?, ?)"
UPDATE_BLOCK = "UPDATE blocks SET payload = ?, version = ? WHERE scope_key = ? AND name = ? AND version = ?"
LIST_BLOCKS = "SELECT payload, version FROM blocks WHERE scope_key = ? ORDER BY name"

INSERT_RECALL_DOC = (
    "INSERT OR IGNORE INTO recall_docs (message_id, user_key, session_id, seq, role, created_at, created_ts, text, "
    "key, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_RECALL_FTS = "INSERT INTO recall_fts (rowid, body, context) VALUES (?, ?, ?)"
ADD_RECALL_USER = "INSERT OR IGNORE INTO recall_users (user_key) VALUES (?)"
SELECT_RECALL_USER = "SELECT id FROM recall_users WHERE user_key = ?"
# FTS rowids: (user number << 36) | document number.
FTS_USER_SHIFT = 36
# How many of the user's rows (its rowid range: ?2 to ?3) match the words ?1.
COUNT_TERM = "(SELECT count(*) FROM recall_fts WHERE recall_fts MATCH ? AND rowid BETWEEN ? AND ?)"
LOAD_RECALL_DOCS = (
    "SELECT message_id, session_id, seq, role, created_at, text, key, context FROM recall_docs "
    "WHERE user_key = ? ORDER BY number"
)
LOAD_VECTORS = (
    "SELECT d.session_id, d.message_id, v.dim, v.vector FROM recall_docs d "
    "JOIN recall_vectors v ON v.number = d.number WHERE d.user_key = ? AND v.model = ? ORDER BY d.number"
)
# A vector is stored against its document, found by (user, session, message id); none found, nothing stored.
UPSERT_VECTOR = (
    "INSERT OR REPLACE INTO recall_vectors (number, model, dim, vector) "
    "SELECT number, ?, ?, ? FROM recall_docs WHERE user_key = ? AND session_id = ? AND message_id = ?"
)
# The message's own words weigh twice its context's (BM25F-style column weights), as in the in-process index.
# A user's rows are one rowid range (migration 0006), so FTS5 reads and ranks that user's rows only.
# ?1 the words, ?2..?3 the user's rowid range, ?4 the limit, ?5 the user key (checked again on the documents).
SEARCH_RECALL = (
    "SELECT d.session_id, d.message_id, f.score FROM (SELECT rowid, -bm25(recall_fts, 2.0, 1.0) AS score "
    "FROM recall_fts WHERE recall_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3 ORDER BY bm25(recall_fts, 2.0, 1.0) "
    "LIMIT ?4) f JOIN recall_docs d ON d.number = (f.rowid & ((1 << 36) - 1)) AND d.user_key = ?5 "
    "ORDER BY f.score DESC, d.number"
)
