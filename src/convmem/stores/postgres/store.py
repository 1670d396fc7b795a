"""PostgreSQL stores for many processes and machines: ``PostgresStore`` and its async twin.

Install with ``pip install 'convmem[postgres]'`` (psycopg 3 and psycopg_pool).

Design:

* Stateless app processes in front, PostgreSQL as the engine. Each store
  holds a connection pool; everything it knows lives in the database, so any
  number of processes can serve the same sessions.
* Gap-free seqs under concurrency: an append is *one* statement that bumps
  the session's counter row (``next_seq``) with ``INSERT ... ON CONFLICT DO
  UPDATE ... RETURNING`` and inserts the batch at the seqs it reserved. The
  row lock orders concurrent appends to one session; appends to different
  sessions never wait for each other; a failed append rolls its bump back.
* State saves are optimistic: ``UPDATE ... WHERE version = expected``; the
  loser gets :class:`~convmem.errors.ConflictError`.
* Opening a session reads the session row, then pinned messages, window and
  unfolded tail in one ``UNION ALL`` statement: two round trips, never the
  archive.
* Migrations run under ``pg_advisory_xact_lock``, so processes starting at
  once are safe; a schema written by a newer convmem (unknown migrations), or
  holding tables of another program, is refused before anything is changed.
* The sync and async stores run the same I/O-free operations
  (:mod:`convmem.stores.postgres._ops`) over the same SQL (:mod:`convmem.stores.postgres._sql`);
  driver errors become :class:`~convmem.errors.StoreError` naming host and
  port, never the password, in one place (:mod:`convmem.stores.postgres._db`),
  which also retries safely when a connection is lost.

Recall and long-term memory (facts, working blocks, recall documents) live
in the same schema, in :mod:`convmem.stores.postgres.longterm`:

* lexical: a stored ``tsvector`` with a GIN index, ranked by ``ts_rank``;
* dense: pgvector is detected (:meth:`PostgresStore.has_pgvector` reads
  ``pg_available_extensions``); the server these stores were tested on has
  none, and no pgvector path is shipped. Vectors are float32 ``bytea`` rows,
  loaded once per user and scored exactly with numpy in the client: 100k
  vectors of 384 dimensions is 150 MB and about 7 ms per query, a
  sensible ceiling of a few hundred thousand per user; beyond that, an ANN
  index belongs in the server.

Example::

    from convmem import Memory
    from convmem.stores import PostgresStore

    store = PostgresStore("postgresql://app@db.internal/chat")   # or $CONVMEM_POSTGRES_URL
    memory = Memory(model="gpt-4o", store=store, user_id="alice")
    memory.add({"role": "user", "content": "hello"})
    again = Memory.open(memory.session_id, store=store, user_id="alice")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import ConfigurationError

try:
    import psycopg  # noqa: F401 - only to fail early, with the install hint
    import psycopg_pool  # noqa: F401
except ImportError as exc:
    raise ConfigurationError(
        f"PostgresStore needs psycopg 3 and psycopg_pool ({exc.name} is missing): pip install 'convmem[postgres]'"
    ) from None

from .._forget import ForgetReceipt
from .._server import AsyncServerStore, Operations, ServerStore
from . import _forget
from . import _ops as ops
from . import _sessions as sessions
from ._db import AsyncDriver, Settings, SyncDriver

if TYPE_CHECKING:
    from .longterm import AsyncPostgresFactStore, PostgresBlockStore, PostgresFactStore, PostgresRecallStore

__all__ = ["AsyncPostgresStore", "PostgresStore"]

OPERATIONS = Operations(
    append=ops.append,
    load=ops.load,
    save_state=ops.save_state,
    segments_of=ops.segments_of,
    page=ops.page,
    delete_messages=ops.delete_messages,
    get_session=sessions.get_session,
    list_sessions=sessions.list_sessions,
    update_session=sessions.update_session,
    delete_session=sessions.delete_session,
    expire=sessions.expire,
    fork=sessions.fork,
    export_jsonl=sessions.export_jsonl,
    import_jsonl=sessions.import_jsonl,
    page_size=ops.PAGE,
)


class PostgresStore(ServerStore):
    """A :class:`~convmem.stores.base.SessionStore` in a PostgreSQL schema, shared by any number of processes.

    Args:
        url: a libpq URL or conninfo string; defaults to ``$CONVMEM_POSTGRES_URL``.
        schema: the schema holding convmem's tables (created on first use).
        min_size: connections the pool keeps open.
        max_size: connections the pool may open.
        timeout: seconds to wait for a connection (and to connect), behind another client's lock
            (``lock_timeout``) and for any one statement (``statement_timeout``); migrations wait as long as they need.

    Raises:
        ConfigurationError: no URL, or a bad schema name.
        StoreError: the server cannot be reached or refuses us (host and port named,
            never the password), or the schema is foreign or newer than this convmem.
    """

    db: SyncDriver

    def __init__(
        self,
        url: str | None = None,
        *,
        schema: str = "convmem",
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
    ) -> None:
        self.settings = Settings.of(url, schema, min_size, max_size, timeout)
        self.db = SyncDriver(self.settings)  # runs the operations; the long-term stores share it
        self.ops = OPERATIONS
        self.rows_read = 0  # rows returned by load(); lets the conformance suite see load skip the archive

    def has_pgvector(self) -> bool:
        """Whether the server offers the pgvector extension."""
        return self.db.run(ops.has_pgvector())

    # -- erasure (see convmem.stores._forget) -------------------------------------------------
    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase the user, or the session with its forks, in one transaction (see :mod:`._forget`)."""
        counts, erased = self.db.run(_forget.erase(user_id, session_id))
        if compact:
            self.compact()
        command = f"convmem compact --db <this store URL> (VACUUM FULL of schema {self.settings.schema})"
        return ForgetReceipt.made(
            user_id, session_id, counts, erased, compacted=compact, pending=_forget.PENDING, command=command
        )

    def compact(self) -> None:
        """``VACUUM FULL`` of the tables ``forget`` deletes from: no erased row stays in their files."""
        self.db.run(_forget.compact())

    # -- long-term memory (needs the ``recall`` extra) ---------------------------------------
    def facts(self) -> PostgresFactStore:
        """The facts under this store's schema, on its pool; they close with the store."""
        from .longterm import PostgresFactStore

        return PostgresFactStore(self)

    def blocks(self) -> PostgresBlockStore:
        """The working blocks under this store's schema, on its pool; they close with the store."""
        from .longterm import PostgresBlockStore

        return PostgresBlockStore(self)

    def recall(self) -> PostgresRecallStore:
        """The recall documents under this store's schema, on its pool; they close with the store."""
        from .longterm import PostgresRecallStore

        return PostgresRecallStore(self)


class AsyncPostgresStore(AsyncServerStore):
    """The async twin of :class:`PostgresStore` (psycopg's ``AsyncConnection``; same operations, same SQL).

    The pool opens, and the schema is migrated, on the first awaited call, inside the running loop.
    """

    db: AsyncDriver

    def __init__(
        self,
        url: str | None = None,
        *,
        schema: str = "convmem",
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
    ) -> None:
        self.settings = Settings.of(url, schema, min_size, max_size, timeout)
        self.db = AsyncDriver(self.settings)
        self.ops = OPERATIONS
        self.rows_read = 0

    async def has_pgvector(self) -> bool:
        """Whether the server offers the pgvector extension."""
        return await self.db.run(ops.has_pgvector())

    def facts(self) -> AsyncPostgresFactStore:
        """The facts under this store's schema, awaited on its pool; they close with the store.

        Blocks and recall have sync contracts only (see :mod:`convmem.stores.base`): for them, open a
        :class:`PostgresStore` over the same URL.
        """
        from .longterm import AsyncPostgresFactStore

        return AsyncPostgresFactStore(self)
