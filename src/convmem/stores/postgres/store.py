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

from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from ...errors import ConfigurationError
from ...messages import Message

try:
    import psycopg  # noqa: F401 - only to fail early, with the install hint
    import psycopg_pool  # noqa: F401
except ImportError as exc:
    raise ConfigurationError(
        f"PostgresStore needs psycopg 3 and psycopg_pool ({exc.name} is missing): pip install 'convmem[postgres]'"
    ) from None

from .._common import Segment, check_batch
from ..base import LoadedSession, SessionInfo, SessionState, StoredMessage
from . import _ops as ops
from . import _sessions as sessions
from ._db import AsyncDriver, Settings, SyncDriver
from ._ops import Query
from ._sql import HAS_PGVECTOR

__all__ = ["AsyncPostgresStore", "PostgresStore"]


def _has_pgvector() -> ops.Flow[bool]:
    [(count,)] = yield Query(HAS_PGVECTOR)
    return bool(count)


class PostgresStore:
    """A :class:`~convmem.stores.base.SessionStore` in a PostgreSQL schema, shared by any number of processes.

    Args:
        url: a libpq URL or conninfo string; defaults to ``$CONVMEM_POSTGRES_URL``.
        schema: the schema holding convmem's tables (created on first use).
        min_size: connections the pool keeps open.
        max_size: connections the pool may open.
        timeout: seconds to wait for a connection (and to connect).

    Raises:
        ConfigurationError: no URL, or a bad schema name.
        StoreError: the server cannot be reached or refuses us (host and port named,
            never the password), or the schema is foreign or newer than this convmem.
    """

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
        self.rows_read = 0  # rows returned by load(); lets the conformance suite see load skip the archive

    def has_pgvector(self) -> bool:
        """Whether the server offers the pgvector extension."""
        return self.db.run(ops.Op("look for pgvector", lambda retried: _has_pgvector()))

    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        return self.db.run(ops.append(session_id, messages, user_id, model))

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded = self.db.run(ops.load(session_id, user_id, unfolded_limit))
        self.rows_read += len(loaded.pinned) + len(loaded.window) + len(loaded.unfolded)
        return loaded

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        return self.db.run(ops.save_state(session_id, state, expected_version, user_id))

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        segs, last = self.db.run(ops.segments_of(session_id, user_id, to_seq))
        return self._pages(segs, from_seq, last)

    def _pages(self, segs: list[Segment], lo: int, hi: int) -> Iterator[StoredMessage]:
        # One short query per page: a caller that iterates slowly holds no connection.
        while lo <= hi:
            rows = self.db.run(ops.page(segs, lo, hi))
            yield from rows
            if len(rows) < ops.PAGE:
                return
            lo = rows[-1].seq + 1

    def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        self.db.run(ops.delete_messages(session_id, seqs, user_id))

    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        return self.db.run(sessions.get_session(session_id, user_id))

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        return self.db.run(sessions.list_sessions(user_id, limit))

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        return self.db.run(sessions.update_session(session_id, user_id, title, metadata))

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self.db.run(sessions.delete_session(session_id, user_id))

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        return self.db.run(sessions.expire(older_than, user_id))

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        return self.db.run(sessions.fork(session_id, at_seq, user_id))

    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        return self.db.run(sessions.export_jsonl(session_id, user_id))

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        return self.db.run(sessions.import_jsonl(data, user_id))

    def close(self) -> None:
        self.db.close()


class AsyncPostgresStore:
    """The async twin of :class:`PostgresStore` (psycopg's ``AsyncConnection``; same operations, same SQL).

    The pool opens, and the schema is migrated, on the first awaited call, inside the running loop.
    """

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
        self.rows_read = 0

    async def has_pgvector(self) -> bool:
        """Whether the server offers the pgvector extension."""
        return await self.db.run(ops.Op("look for pgvector", lambda retried: _has_pgvector()))

    async def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []
        return await self.db.run(ops.append(session_id, messages, user_id, model))

    async def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded = await self.db.run(ops.load(session_id, user_id, unfolded_limit))
        self.rows_read += len(loaded.pinned) + len(loaded.window) + len(loaded.unfolded)
        return loaded

    async def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        return await self.db.run(ops.save_state(session_id, state, expected_version, user_id))

    async def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> list[StoredMessage]:
        segs, hi = await self.db.run(ops.segments_of(session_id, user_id, to_seq))
        out: list[StoredMessage] = []
        lo = from_seq
        while lo <= hi:
            rows = await self.db.run(ops.page(segs, lo, hi))
            out += rows
            if len(rows) < ops.PAGE:
                break
            lo = rows[-1].seq + 1
        return out

    async def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        await self.db.run(ops.delete_messages(session_id, seqs, user_id))

    async def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        return await self.db.run(sessions.get_session(session_id, user_id))

    async def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        return await self.db.run(sessions.list_sessions(user_id, limit))

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        return await self.db.run(sessions.update_session(session_id, user_id, title, metadata))

    async def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        await self.db.run(sessions.delete_session(session_id, user_id))

    async def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        return await self.db.run(sessions.expire(older_than, user_id))

    async def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        return await self.db.run(sessions.fork(session_id, at_seq, user_id))

    async def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        return await self.db.run(sessions.export_jsonl(session_id, user_id))

    async def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        return await self.db.run(sessions.import_jsonl(data, user_id))

    async def aclose(self) -> None:
        await self.db.close()
