"""The SQL text of the PostgreSQL stores, and the append-only list of migrations.

:class:`~convmem.stores.postgres.PostgresStore` and its async twin run exactly
these statements (they share the operations in :mod:`convmem.stores.postgres._ops`).
The schema follows the SQLite one (:mod:`convmem.stores.sqlite._sql`), with these
PostgreSQL-specific choices:

* Every table lives in one schema (``convmem`` by default), selected through
  the connection's ``search_path``, so the statements below carry no schema
  name and one database can hold several independent stores.
* ``sessions.next_seq`` is the per-session counter row: an append bumps it
  with ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` in the same statement
  that inserts the messages, so seqs are gap-free under any concurrency and a
  failed append leaves no hole.
* JSON (message payload, metadata, state) is stored as ``text``, not
  ``jsonb``: the codec's bytes come back unchanged (``jsonb`` reorders keys,
  and exports must be byte for byte).
* ``user_key`` (generated from ``user_id``, ``''`` for no user) makes the
  user scope an equality, so the per-user indexes serve ``user_id IS NULL`` too.

The migrations live in :mod:`convmem.stores.postgres._migrations`.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "VECTOR_PARTITIONS"]

from ._migrations import LISTING_LAG, MIGRATIONS, VECTOR_PARTITIONS

# A migration may wait for another process's and build indexes on big tables: the store's timeout is not its.
NO_LOCK_TIMEOUT = "SET LOCAL lock_timeout = 0"
NO_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = 0"
ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(hashtext('convmem.migrate:' || %s))"
SCHEMA_TABLES = "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
APPLIED = "SELECT name FROM schema_migrations ORDER BY applied_order"
CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "name text PRIMARY KEY, applied_order serial, applied_at timestamptz NOT NULL DEFAULT now())"
)
RECORD_MIGRATION = "INSERT INTO schema_migrations (name) VALUES (%s)"

SESSION_COLUMNS = (
    "id, user_id, title, model, metadata, created_at, updated_at, parent_id, fork_seq, base_count, base_tokens, "
    "message_count, tokens, next_seq, state, version, deleted"
)
SELECT_SESSION = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s"
SELECT_SESSION_LOCKED = f"{SELECT_SESSION} FOR UPDATE"
SELECT_OWN = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s AND user_key = %s AND NOT deleted"
SELECT_OWN_LOCKED = f"{SELECT_OWN} FOR UPDATE"
SELECT_BY_PREFIX = "SELECT id FROM sessions WHERE user_key = %s AND NOT deleted AND id LIKE %s ESCAPE '\\' LIMIT 50"
# Most recently updated first, exactly, from the coarse index (migration 0008): a trigger keeps every row's
# listed_at <= updated_at < listed_at + LISTING_LAG. The first `limit` rows by listed_at have updated_at >= m
# (their smallest listed_at), so the exact page's own rows all have updated_at >= m, hence listed_at > m - lag:
# reading that range and sorting it by the exact time gives the exact page.
LIST_SESSIONS = f"""
    WITH page AS (
        SELECT listed_at FROM sessions WHERE user_key = %(user)s AND NOT deleted
        ORDER BY listed_at DESC, id DESC LIMIT %(limit)s
    )
    SELECT {SESSION_COLUMNS} FROM sessions WHERE user_key = %(user)s AND NOT deleted
        AND listed_at > (SELECT coalesce(min(listed_at), '-infinity') FROM page) - {LISTING_LAG}
    ORDER BY updated_at DESC, id DESC LIMIT %(limit)s
"""
# updated_at < cutoff implies listed_at < cutoff, which the index can take.
EXPIRED = (
    "SELECT id FROM sessions WHERE user_key = %(user)s AND NOT deleted AND listed_at < %(cutoff)s "
    "AND updated_at < %(cutoff)s ORDER BY id FOR UPDATE"
)
# The session and its ancestors, nearest first: (id, fork_seq, parent_id).
CHAIN = """
    WITH RECURSIVE chain AS (
        SELECT id, fork_seq, parent_id, 0 AS depth FROM sessions WHERE id = %s
        UNION ALL
        SELECT s.id, s.fork_seq, s.parent_id, c.depth + 1 FROM sessions s JOIN chain c ON s.id = c.parent_id
    )
    SELECT id, fork_seq, parent_id FROM chain ORDER BY depth
"""
INSERT_SESSION = (
    "INSERT INTO sessions (id, user_id, title, model, metadata, created_at, updated_at, parent_id, fork_seq, "
    "base_count, base_tokens, message_count, tokens, next_seq, state, version) VALUES (%(id)s, %(user_id)s, "
    "%(title)s, %(model)s, %(metadata)s, %(created_at)s, %(updated_at)s, %(parent_id)s, %(fork_seq)s, "
    "%(base_count)s, %(base_tokens)s, %(message_count)s, %(tokens)s, %(next_seq)s, %(state)s, %(version)s)"
)
UPDATE_SESSION = (
    f"UPDATE sessions SET title = coalesce(%s, title), metadata = coalesce(%s, metadata), updated_at = %s "
    f"WHERE id = %s RETURNING {SESSION_COLUMNS}"
)
AFTER_DELETE = (
    "UPDATE sessions SET message_count = message_count - %s, tokens = tokens - %s, updated_at = %s WHERE id = %s"
)
# An exact-id save: one statement when it wins; no row back means a prefix, another user, or a lost race.
SAVE_STATE = (
    "UPDATE sessions SET state = %s, version = version + 1, updated_at = %s "
    "WHERE id = %s AND user_key = %s AND NOT deleted AND version = %s RETURNING version"
)
TOMBSTONE = "UPDATE sessions SET deleted = true WHERE id = %s"
DELETE_SESSION = "DELETE FROM sessions WHERE id = %s"
CHILDREN = "SELECT id, fork_seq FROM sessions WHERE parent_id = %s"

# One statement per append: bump the counter row (creating the session on its first message, if the writer
# expects none) and insert the batch at the seqs it reserved, with the state it implies, if any. The row lock
# taken by ON CONFLICT DO UPDATE orders concurrent appends to one session; if the insert fails (an id stored
# already in the session), the bump rolls back with it, so no seq is skipped. No row back means the writer's
# view is out of date, the session is hidden or gone, or an id is one of the history a fork shares: the flow
# reads why (convmem.stores.postgres._ops.append).
_ANCESTORS = """
    WITH RECURSIVE ancestors AS (
        SELECT parent_id AS sid, fork_seq AS cap FROM sessions WHERE id = %(session)s AND parent_id IS NOT NULL
        UNION ALL
        SELECT p.parent_id, least(a.cap, p.fork_seq) FROM sessions p JOIN ancestors a ON p.id = a.sid
        WHERE p.parent_id IS NOT NULL
    ),
    shared AS (
        -- Only per ancestor: as a join, the planner scanned the whole messages table for the ids on every
        -- append, before finding that the session has no ancestors (a per-add cost growing with every user's
        -- history). A fork's append may still scan (the planner's choice inside the subplan).
        SELECT 1 FROM ancestors a WHERE EXISTS (
            SELECT 1 FROM messages m
            WHERE m.session_id = a.sid AND m.id = ANY(%(ids)s::text[]) AND m.seq <= a.cap
        )
        LIMIT 1
    ),
"""
_CHECKED = """
    NOT s.deleted
    AND (%(expected_seq)s::bigint IS NULL OR s.next_seq = %(expected_seq)s::bigint)
    AND (%(expected_version)s::bigint IS NULL OR s.version = %(expected_version)s::bigint)
    AND NOT EXISTS (SELECT 1 FROM shared)
"""
_COUNTED = """
    next_seq = s.next_seq + %(n)s,
    message_count = s.message_count + %(n)s,
    tokens = s.tokens + %(tokens)s,
    updated_at = %(now)s,
    state = coalesce(%(state)s::text, s.state),
    version = CASE WHEN %(state)s::text IS NULL THEN s.version ELSE s.version + 1 END
"""
_INSERT_BATCH = """
    INSERT INTO messages (session_id, seq, id, role, payload, tokens)
    SELECT %(session)s, s.next_seq - %(n)s + m.ord - 1, m.id, m.role, m.payload, m.tokens
    FROM s, unnest(%(ids)s::text[], %(roles)s::text[], %(payloads)s::text[], %(each)s::bigint[])
        WITH ORDINALITY AS m (id, role, payload, tokens, ord)
    RETURNING seq
"""
# A writer that may create the session (it expects no messages yet).
APPEND = f"""{_ANCESTORS}
    s AS (
        INSERT INTO sessions AS s (id, user_id, model, created_at, updated_at, next_seq, message_count, tokens,
                                   state, version)
        VALUES (%(session)s, %(user)s, %(model)s, %(now)s, %(now)s, %(n)s, %(n)s, %(tokens)s,
                coalesce(%(state)s::text, %(empty)s), %(created_version)s)
        ON CONFLICT (id) DO UPDATE SET {_COUNTED}
        WHERE {_CHECKED}
        RETURNING s.next_seq
    )
{_INSERT_BATCH}"""
# A writer that holds messages of the session: it never creates it (a vanished session is lost, not reborn).
APPEND_EXISTING = f"""{_ANCESTORS}
    s AS (
        UPDATE sessions AS s SET {_COUNTED}
        WHERE s.id = %(session)s AND {_CHECKED}
        RETURNING s.next_seq
    )
{_INSERT_BATCH}"""
INSERT_MESSAGES = """
    INSERT INTO messages (session_id, seq, id, role, payload, tokens)
    SELECT %s, m.* FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::bigint[]) AS m
"""

# Row reads take a session's segments (where each part of a fork's history lives) as three arrays.
_SEGMENTS = (
    "FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS g (sid, lo, hi) "
    "JOIN messages m ON m.session_id = g.sid AND m.seq BETWEEN g.lo AND g.hi"
)
_PINNED = "m.role IN ('system', 'developer')"
# What opening a session reads, in one round trip: 0 = pinned, 1 = window, 2 = the unfolded tail (newest first).
LOAD = f"""
    (SELECT 0, m.seq, m.payload, m.tokens {_SEGMENTS} WHERE {_PINNED} ORDER BY m.seq)
    UNION ALL
    (SELECT 1, m.seq, m.payload, m.tokens {_SEGMENTS} WHERE NOT {_PINNED} ORDER BY m.seq)
    UNION ALL
    (SELECT 2, m.seq, m.payload, m.tokens {_SEGMENTS} WHERE NOT {_PINNED} ORDER BY m.seq DESC LIMIT %s)
"""
RANGE_PAGE = f"SELECT m.seq, m.payload, m.tokens {_SEGMENTS} ORDER BY m.seq LIMIT %s"
# The rows of a session's history (its segments) that hold any of the given message ids.
STORED_IDS = f"SELECT m.id, m.seq, m.payload, m.tokens {_SEGMENTS} WHERE m.id = ANY(%s)"
COUNT_RANGE = f"SELECT count(*), coalesce(sum(m.tokens), 0) {_SEGMENTS}"
DELETE_MESSAGES = "DELETE FROM messages WHERE session_id = %s AND seq = ANY(%s) RETURNING tokens"
DELETE_AFTER = "DELETE FROM messages WHERE session_id = %s AND seq > %s RETURNING tokens"
DELETE_ALL = "DELETE FROM messages WHERE session_id = %s"

# -- long-term memory (0002) ----------------------------------------------------------------------
INSERT_FACT = "INSERT INTO facts (id, user_key, payload, valid_from, valid_to) VALUES (%s, %s, %s, %s, %s)"
FACT_EXISTS = "SELECT 1 FROM facts WHERE id = %s"
FACT_OWNER = "SELECT user_key FROM facts WHERE id = %s"
# Ending a fact: only if it is still open (a concurrent writer that ended it first wins).
UPDATE_FACT = (
    "UPDATE facts SET payload = %s, valid_to = %s WHERE id = %s AND user_key = %s AND valid_to IS NULL RETURNING id"
)
LIST_FACTS = "SELECT payload FROM facts WHERE user_key = %s"
LIST_OPEN_FACTS = "SELECT payload FROM facts WHERE user_key = %s AND valid_to IS NULL"
LIST_FACTS_AT = (
    "SELECT payload FROM facts WHERE user_key = %s AND valid_from <= %s AND (valid_to IS NULL OR valid_to > %s)"
)

SELECT_BLOCK = "SELECT payload FROM blocks WHERE scope_key = %s AND name = %s"
# Optimistic save: insert the first version, or replace the expected one; no row back means a lost race.
INSERT_BLOCK = (
    "INSERT INTO blocks (scope_key, name, payload, version) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (scope_key, name) DO NOTHING RETURNING version"
)
UPDATE_BLOCK = (
    "UPDATE blocks SET payload = %s, version = %s WHERE scope_key = %s AND name = %s AND version = %s RETURNING version"
)
LIST_BLOCKS = "SELECT payload FROM blocks WHERE scope_key = %s ORDER BY name"

INSERT_RECALL_DOCS = """
    INSERT INTO recall_docs (message_id, user_key, session_id, seq, role, created_at, created_ts, text, key, context)
    SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::text[], %s::text[],
                         %s::double precision[], %s::text[], %s::text[], %s::text[])
    ORDER BY 1 = 1  -- keep the given order, so numbers follow it
    ON CONFLICT (user_key, session_id, message_id) DO NOTHING
    RETURNING user_key, session_id, message_id
"""
LOAD_RECALL_DOCS = (
    "SELECT message_id, session_id, seq, role, created_at, text, key, context FROM recall_docs "
    "WHERE user_key = %s ORDER BY number"
)
LOAD_VECTORS = (
    "SELECT d.session_id, d.message_id, v.dim, v.vector FROM recall_vectors v JOIN recall_docs d USING (number) "
    "WHERE v.user_key = %s AND v.model = %s ORDER BY v.number"
)
HAS_PGVECTOR = "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
