"""The append-only list of migrations of the PostgreSQL stores (the schema's history, oldest first).

Migrations are ``(name, statements)`` pairs, applied in order under ``pg_advisory_xact_lock`` by
:mod:`convmem.stores.postgres._db`; never edit or reorder an entry, append a new one. Every statement runs
with the store's schema first in ``search_path``, so none names a schema.
"""

from __future__ import annotations

__all__ = ["LISTING_LAG", "MIGRATIONS", "VECTOR_PARTITIONS"]

VECTOR_PARTITIONS = 64  # hash partitions of recall_vectors, by user

MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "0001_sessions_and_messages",
        (
            """
        CREATE TABLE sessions (
            id text PRIMARY KEY,
            user_id text,
            user_key text GENERATED ALWAYS AS (coalesce('u' || user_id, '')) STORED,
            title text,
            model text,
            metadata text NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            parent_id text REFERENCES sessions (id),
            fork_seq bigint,
            base_count bigint NOT NULL DEFAULT 0,
            base_tokens bigint NOT NULL DEFAULT 0,
            message_count bigint NOT NULL DEFAULT 0,
            tokens bigint NOT NULL DEFAULT 0,
            next_seq bigint NOT NULL DEFAULT 0,
            state text NOT NULL DEFAULT '{}',
            version bigint NOT NULL DEFAULT 0,
            deleted boolean NOT NULL DEFAULT false
        )
        """,
            "CREATE INDEX sessions_by_user ON sessions (user_key, updated_at DESC, id DESC)",
            "CREATE INDEX sessions_by_prefix ON sessions (user_key, id text_pattern_ops)",
            "CREATE INDEX sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL",
            """
        CREATE TABLE messages (
            session_id text NOT NULL REFERENCES sessions (id),
            seq bigint NOT NULL,
            id text NOT NULL UNIQUE,
            role text NOT NULL,
            payload text NOT NULL,
            tokens bigint NOT NULL,
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
            # Facts are inserted and ended, never deleted; the validity columns serve valid_at queries.
            """
        CREATE TABLE facts (
            id text PRIMARY KEY,
            user_key text NOT NULL,
            payload text NOT NULL,
            valid_from timestamptz NOT NULL,
            valid_to timestamptz
        )
        """,
            "CREATE INDEX facts_by_user ON facts (user_key, valid_from)",
            """
        CREATE TABLE blocks (
            scope_key text NOT NULL,
            name text NOT NULL,
            payload text NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (scope_key, name)
        )
        """,
            # Recall documents with their lexical index: the key weighs A, the previous turn's text B.
            """
        CREATE TABLE recall_docs (
            number bigserial PRIMARY KEY,
            message_id text NOT NULL UNIQUE,
            user_key text NOT NULL,
            session_id text NOT NULL,
            seq bigint NOT NULL,
            role text NOT NULL,
            created_at text NOT NULL,
            text text NOT NULL,
            key text NOT NULL,
            context text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('english', key), 'A') || setweight(to_tsvector('english', context), 'B')
            ) STORED
        )
        """,
            "CREATE INDEX recall_docs_by_user ON recall_docs (user_key, number)",
            "CREATE INDEX recall_docs_tsv ON recall_docs USING gin (tsv)",
            """
        CREATE TABLE embeddings (
            message_id text NOT NULL,
            model text NOT NULL,
            dim integer NOT NULL,
            vector bytea NOT NULL,
            PRIMARY KEY (message_id, model)
        )
        """,
        ),
    ),
]

# The SQL form of convmem.stores._record.scoped: a user's session id as a key of the sessions table.
_SCOPED = "CASE WHEN {user} IS NULL THEN '-:' ELSE length({user}) || '=' || {user} || ':' END || {id}"
MIGRATIONS.append(
    (
        # Session ids become scoped by user (two users may both have a session "chat", and neither can
        # learn of the other's), and message ids unique per session instead of per database.
        "0003_sessions_scoped_by_user",
        (
            "ALTER TABLE messages DROP CONSTRAINT messages_session_id_fkey",
            "ALTER TABLE sessions DROP CONSTRAINT sessions_parent_id_fkey",
            "UPDATE messages m SET session_id = "
            + _SCOPED.format(user="s.user_id", id="m.session_id")
            + " FROM sessions s WHERE s.id = m.session_id",
            "UPDATE sessions SET parent_id = "
            + _SCOPED.format(user="user_id", id="parent_id")
            + " WHERE parent_id IS NOT NULL",
            "UPDATE sessions SET id = " + _SCOPED.format(user="user_id", id="id"),
            "ALTER TABLE messages ADD CONSTRAINT messages_session_id_fkey FOREIGN KEY (session_id) "
            "REFERENCES sessions (id)",
            "ALTER TABLE sessions ADD CONSTRAINT sessions_parent_id_fkey FOREIGN KEY (parent_id) "
            "REFERENCES sessions (id)",
            "ALTER TABLE messages DROP CONSTRAINT messages_id_key",
            "CREATE UNIQUE INDEX messages_ids ON messages (session_id, id)",
        ),
    )
)

MIGRATIONS.append(
    (
        # Message ids are unique only per session in some stores: a document is (user, session, message id),
        # and a vector belongs to a document (its number), with its user beside it so a vector search filters
        # by user without a join. Vectors are partitioned by user: an HNSW index filtered to one user among
        # many walks most of the graph for nothing; inside a partition the user is a large share of the rows
        # (measured in bench/README.md, "Search at scale"). created_ts (epoch seconds) lets searches filter
        # by time in the server. Vectors join their document by the message id, unique until now.
        "0004_recall_keyed_by_owner",
        (
            "ALTER TABLE recall_docs DROP CONSTRAINT recall_docs_message_id_key",
            "ALTER TABLE recall_docs ADD CONSTRAINT recall_docs_owner_key UNIQUE (user_key, session_id, message_id)",
            "ALTER TABLE recall_docs ADD COLUMN created_ts double precision",
            "UPDATE recall_docs SET created_ts = extract(epoch FROM split_part(created_at, '[', 1)::timestamptz)",
            "ALTER TABLE recall_docs ALTER COLUMN created_ts SET NOT NULL",
            """
        CREATE TABLE recall_vectors (
            number bigint NOT NULL REFERENCES recall_docs (number) ON DELETE CASCADE,
            user_key text NOT NULL,
            model text NOT NULL,
            dim integer NOT NULL,
            vector bytea NOT NULL,
            PRIMARY KEY (user_key, number, model)
        ) PARTITION BY HASH (user_key)
        """,
            *(
                f"CREATE TABLE recall_vectors_p{i} PARTITION OF recall_vectors "
                f"FOR VALUES WITH (MODULUS {VECTOR_PARTITIONS}, REMAINDER {i})"
                for i in range(VECTOR_PARTITIONS)
            ),
            "CREATE INDEX recall_vectors_by_user ON recall_vectors (user_key, model, number)",
            "INSERT INTO recall_vectors (number, user_key, model, dim, vector) "
            "SELECT d.number, d.user_key, e.model, e.dim, e.vector "
            "FROM embeddings e JOIN recall_docs d USING (message_id)",
            "DROP TABLE embeddings",
        ),
    )
)

MIGRATIONS.append(
    (
        # One GIN index over (owner, tsvector) replaces the one over the tsvector alone: a search's user and
        # words are one index scan, which never reads other users' postings (see _lexical.py).
        "0005_recall_lexical_by_owner",
        (
            "CREATE INDEX recall_docs_owner_tsv ON recall_docs USING gin "
            "(array_to_tsvector(ARRAY[md5(user_key)]), tsv)",
            "DROP INDEX recall_docs_tsv",
        ),
    )
)

MIGRATIONS.append(
    (
        # How many recall documents each user has, kept by a statement trigger in the inserting transaction:
        # lexical search scales its word-frequency sample by it, and count(*) over a user's rows read one heap
        # page per row until vacuum had marked them (64 ms of a 72 ms search for a user of 10,000 at 1M).
        # Recall documents are never deleted, so the count only grows.
        "0006_recall_user_counts",
        (
            "CREATE TABLE recall_user_counts (user_key text PRIMARY KEY, docs bigint NOT NULL)",
            "INSERT INTO recall_user_counts SELECT user_key, count(*) FROM recall_docs GROUP BY user_key",
            "CREATE FUNCTION recall_count_docs() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$"
            " BEGIN"
            " INSERT INTO recall_user_counts AS c (user_key, docs) SELECT user_key, count(*) FROM fresh GROUP BY 1"
            " ON CONFLICT (user_key) DO UPDATE SET docs = c.docs + EXCLUDED.docs;"
            " RETURN NULL;"
            " END $$",
            "CREATE TRIGGER recall_docs_count AFTER INSERT ON recall_docs REFERENCING NEW TABLE AS fresh "
            "FOR EACH STATEMENT EXECUTE FUNCTION recall_count_docs()",
        ),
    )
)

MIGRATIONS.append(
    (
        # Deleting a recall document ran the cascade of recall_vectors' foreign key once per row, over all 64
        # partitions (the key is the user, the reference the number): forget of a user with 5,000 documents
        # spent 10 s there, 100,000 over 3 minutes. Vectors are deleted explicitly, before their documents, by
        # forget (stores/postgres/_forget.py), the only deleter; inserts already select their document.
        "0007_recall_vectors_without_cascade",
        ("ALTER TABLE recall_vectors DROP CONSTRAINT IF EXISTS recall_vectors_number_fkey",),
    )
)

# How long a session's listing key may lag its exact update time (sql.LIST_SESSIONS). Migration 0008 writes it
# into its trigger: changing it needs a new migration that replaces the trigger.
LISTING_LAG = "interval '1 second'"

MIGRATIONS.append(
    (
        # Every append updates the session's row. With updated_at in an index, no such update could be HOT:
        # each one wrote a new entry in every index of the table, all under the same primary key, and a burst
        # of 20,000 messages left 19,990 dead versions that each lookup of the row walked (per-add p50 4.0 ms
        # at the start, 31.9 ms at the end, until VACUUM). The listing index now keys a coarse copy,
        # listed_at, that a trigger moves only when the exact time leaves [listed_at, listed_at + 1 s): within a
        # second of burst the indexed columns stay unchanged, and with free room on the page (fillfactor) the
        # update stays on it as a heap-only tuple that the next reader prunes. The listing stays exact: its
        # query widens the indexed page by the lag and sorts by the exact time (sql.LIST_SESSIONS).
        "0008_sessions_hot_updates",
        (
            "ALTER TABLE sessions ADD COLUMN listed_at timestamptz",
            "UPDATE sessions SET listed_at = updated_at",
            "ALTER TABLE sessions ALTER COLUMN listed_at SET NOT NULL",
            "DROP INDEX sessions_by_user",
            "CREATE INDEX sessions_by_user ON sessions (user_key, listed_at DESC, id DESC)",
            "ALTER TABLE sessions SET (fillfactor = 50)",
            "CREATE FUNCTION sessions_listed_at() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN"
            " IF TG_OP = 'INSERT' OR NEW.updated_at < OLD.listed_at"
            f" OR NEW.updated_at >= OLD.listed_at + {LISTING_LAG} THEN"
            " NEW.listed_at := NEW.updated_at;"
            " ELSE NEW.listed_at := OLD.listed_at;"
            " END IF;"
            " RETURN NEW;"
            " END $$",
            "CREATE TRIGGER sessions_listed_at BEFORE INSERT OR UPDATE ON sessions "
            "FOR EACH ROW EXECUTE FUNCTION sessions_listed_at()",
        ),
    )
)
