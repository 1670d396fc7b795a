"""Connections for the PostgreSQL stores: settings, migrations, the two drivers, and error conversion.

This is the only place where psycopg exceptions enter convmem: :func:`convert`
turns every one of them into a :class:`~convmem.errors.StoreError` that names
the server as ``host:port/dbname`` and never the password (it is scrubbed
from any driver text, too).

Both drivers run the flows of :mod:`convmem.stores.postgres._ops` the same way, on
the one effect driver (:func:`convmem._effects.drive` / :func:`~convmem._effects.adrive`:
each query's rows are sent back into the flow, a unique violation is thrown
into it), and retry them by the same rules:

* a connection comes from a psycopg pool; one the server closed while it sat
  idle (a readable socket on an idle connection means an error or EOF is
  waiting) is dropped at checkout, at the cost of one ``select`` instead of a
  round trip, and another is taken;
* when the connection is lost midway (``pg_terminate_backend``, a restart),
  an operation is started again, up to three times, if that is safe: reads
  and idempotent writes always (see :mod:`convmem.stores.postgres._ops`), other transactions when
  the failure came before ``COMMIT``; deadlocks and serialization failures
  (rolled back by the server) are retried too. Otherwise the StoreError says
  the outcome is unknown.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ..._effects import adrive, drive
from ...errors import ConfigurationError, StoreError, redact, unchained
from . import _sql as sql
from ._ops import Flow, Op, Query, Rows, UniqueViolation
from ._recall import EF_SEARCH, FIND_EXTENSION, vector_setup

__all__ = ["AsyncDriver", "Settings", "SyncDriver", "convert"]

T = TypeVar("T")
ENV = "CONVMEM_POSTGRES_URL"
RETRIES = 3
SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


@dataclass(frozen=True)
class Settings:
    """Where and how to connect; ``where`` names the server for error messages."""

    url: str = field(repr=False)  # may hold the password: reprs show ``where``
    schema: str
    where: str
    password: str | None = field(repr=False)
    min_size: int
    max_size: int
    timeout: float

    @classmethod
    @unchained
    def of(cls, url: str | None, schema: str, min_size: int, max_size: int, timeout: float) -> Settings:
        url = url or os.environ.get(ENV)
        if not url:
            raise ConfigurationError(f"PostgresStore needs a URL: pass one or set {ENV} (postgresql://host/db)")
        if not _SCHEMA.fullmatch(schema):
            raise ConfigurationError(f"schema {schema!r} must be a lowercase identifier ([a-z_][a-z0-9_]*)")
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreError(f"invalid PostgreSQL URL: {_scrub(str(exc), _password_in(url))}") from None
        where = f"PostgreSQL {params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        where += f"/{params.get('dbname') or params.get('user') or '?'}"
        return cls(url, schema, where, _as_str(params.get("password")), min_size, max_size, timeout)

    def kwargs(self, vector_search: bool = False) -> dict[str, Any]:
        params = conninfo_to_dict(self.url)
        options = str(params.get("options") or "")
        if vector_search:  # see _recall: iterative HNSW scans, so a walk filtered by user finds its rows
            options += f" -c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search={EF_SEARCH}"
        # The store's timeout bounds waiting behind another client's lock and any one statement, not only
        # connecting: first, so that options the URL sets itself win.
        waits = f"-c lock_timeout={self.timeout_ms} -c statement_timeout={self.timeout_ms}"
        return {
            "autocommit": True,
            "connect_timeout": max(1, round(self.timeout)),
            "application_name": params.get("application_name") or "convmem",
            "options": f"{waits} {options} -c search_path={self.schema}".strip(),
        }

    @property
    def timeout_ms(self) -> int:
        return max(1, round(self.timeout * 1000))


def _as_str(value: object) -> str | None:
    return None if value is None else str(value)


def _password_in(url: str) -> str | None:
    found = re.search(r"://[^:/@]*:([^@/]*)@", url) or re.search(r"password=([^&\s]+)", url)
    return found.group(1) if found else None


def _scrub(text: str, password: str | None) -> str:
    return redact(text, password)


def convert(exc: BaseException, settings: Settings, what: str, *, unknown: bool = False) -> StoreError:
    """The StoreError for a driver (or pool) exception met while doing ``what``."""
    if isinstance(exc, PoolTimeout):
        text = f"no connection within {settings.timeout:g}s (server down or pool exhausted)"
    elif isinstance(exc, UniqueViolation):
        text = f"already exists ({exc})"
    elif isinstance(exc, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
        text = f"gave up after the store's timeout of {settings.timeout:g}s ({' '.join(str(exc).split())})"
    else:
        text = " ".join(str(exc).split()) or type(exc).__name__
    if unknown:
        text += "; the connection was lost while committing, so whether it was applied is unknown"
    return StoreError(_scrub(f"{settings.where}: {what}: {text}", settings.password))


def _lost(exc: BaseException) -> bool:
    """The connection (not the statement) failed: a fresh connection may succeed.

    A PoolTimeout is not one: it has already waited as long as the caller allowed.
    """
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and not isinstance(
        exc, pg_errors.QueryCanceled
    )


def _retry(op: Op[Any], exc: BaseException, committing: bool) -> bool:
    if isinstance(exc, _RETRYABLE):
        return True  # the server rolled the transaction back
    return _lost(exc) and (op.retry or (op.mode != "statement" and not committing))


def _stale(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """The server closed this idle connection (a terminated backend, a restart): it cannot be used.

    An idle connection has nothing to read, so anything there is the server's
    goodbye (or EOF). Checked on every checkout: one ``select`` instead of a
    round trip, and unlike the pool's ``check`` hook, no back-off sleep after it.
    """
    if conn.closed:
        return True
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def migrate(schema: str) -> Generator[Query, Rows, str | None]:
    """Bring the schema up to date under an advisory lock; refuse a foreign or newer schema untouched.

    Returns the schema of the pgvector extension, or None when it is not installed; when it is, the
    recall vectors get its column and indexes (:func:`convmem.stores.postgres._recall.vector_setup`).
    """
    yield Query(sql.NO_LOCK_TIMEOUT)
    yield Query(sql.NO_STATEMENT_TIMEOUT)
    tables = {t for (t,) in (yield Query(sql.SCHEMA_TABLES, (schema,)))}
    applied = [n for (n,) in (yield Query(sql.APPLIED))] if "schema_migrations" in tables else []
    if tables and not applied:
        raise StoreError(
            f"schema {schema!r} holds tables of another program (no convmem migrations recorded); "
            "convmem left it untouched"
        )
    _check_applied(schema, applied)
    lock = Query(sql.ADVISORY_LOCK, (schema,))  # held until commit: one process migrates, the others wait
    if len(applied) < len(sql.MIGRATIONS):
        yield lock
        yield Query(sql.CREATE_SCHEMA.format(schema=schema))
        yield Query(sql.CREATE_MIGRATIONS)
        applied = [n for (n,) in (yield Query(sql.APPLIED))]  # another process may have migrated meanwhile
        _check_applied(schema, applied)
        for name, statements in sql.MIGRATIONS[len(applied) :]:
            for statement in statements:
                yield Query(statement)
            yield Query(sql.RECORD_MIGRATION, (name,))
    found = yield Query(FIND_EXTENSION)
    vector_schema: str | None = found[0][0] if found else None
    yield from vector_setup(vector_schema, lock)
    return vector_schema


def _check_applied(schema: str, applied: list[str]) -> None:
    known = [name for name, _ in sql.MIGRATIONS]
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise StoreError(
            f"schema {schema!r} was written by a newer convmem (unknown migrations: {', '.join(unknown)}); "
            "upgrade convmem to open it"
        )
    if applied != known[: len(applied)]:
        raise StoreError(f"schema {schema!r} records migrations out of order: {', '.join(applied)}")


# -- sync -----------------------------------------------------------------------------------------
def _run_sync(conn: psycopg.Connection[Any], flow: Flow[T]) -> T:
    def perform(query: Query) -> Rows:
        try:
            cursor = conn.execute(query.sql.encode(), query.params)
            return cursor.fetchall() if cursor.description is not None else []
        except pg_errors.UniqueViolation as exc:  # thrown into the flow, which may explain it (a stored id)
            raise UniqueViolation(exc.diag.message_detail or str(exc)) from None

    return drive(flow, perform)


class SyncDriver:
    """Runs operations on a ``psycopg_pool.ConnectionPool``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.vector_schema = self._call(self._migrate, "open the store")  # pgvector's schema, or None
        self.pool = ConnectionPool(
            settings.url,
            kwargs=settings.kwargs(self.vector_schema is not None),
            min_size=settings.min_size,
            max_size=settings.max_size,
            open=False,
            timeout=settings.timeout,
            name="convmem",
        )
        self.pool.open(wait=False)

    def _migrate(self) -> str | None:
        # Losing an established connection (a terminated backend) is retried: migrating is idempotent under
        # the lock. Failing to connect is not: the server is unreachable or refuses us, and saying so is better.
        for attempt in range(RETRIES + 1):
            conn = psycopg.connect(self.settings.url, **self.settings.kwargs())
            try:
                with conn, conn.transaction():
                    return _run_sync(conn, migrate(self.settings.schema))
            except psycopg.Error as exc:
                if attempt == RETRIES or not _lost(exc):
                    raise
            time.sleep(0.02 * 2.0**attempt)
        raise AssertionError("unreachable")

    @unchained
    def _call(self, fn: Callable[[], T], what: str) -> T:
        try:
            return fn()
        except (psycopg.Error, PoolTimeout, UniqueViolation) as exc:
            raise convert(exc, self.settings, what) from None

    @unchained
    def run(self, op: Op[T]) -> T:
        attempt = stale = 0
        while True:
            committing = False
            try:
                with self.pool.connection() as conn:
                    if _stale(conn) and stale <= self.settings.max_size:
                        conn.close()  # the pool drops it and opens another; nothing was sent, so just go again
                        stale += 1
                        continue
                    if op.mode == "statement":
                        return _run_sync(conn, op.start(attempt > 0))
                    with conn.transaction():
                        if op.mode == "snapshot":
                            conn.execute(SNAPSHOT)
                        result = _run_sync(conn, op.start(attempt > 0))
                        committing = True
                    return result
            except (psycopg.Error, PoolTimeout, UniqueViolation) as exc:
                if attempt == RETRIES or not _retry(op, exc, committing):
                    raise convert(exc, self.settings, op.what, unknown=committing and _lost(exc)) from None
                time.sleep(0.02 * 2.0**attempt)
                attempt += 1

    def close(self) -> None:
        self.pool.close()


# -- async ----------------------------------------------------------------------------------------
async def _run_async(conn: psycopg.AsyncConnection[Any], flow: Flow[T]) -> T:
    async def perform(query: Query) -> Rows:
        try:
            cursor = await conn.execute(query.sql.encode(), query.params)
            return await cursor.fetchall() if cursor.description is not None else []
        except pg_errors.UniqueViolation as exc:  # see _run_sync
            raise UniqueViolation(exc.diag.message_detail or str(exc)) from None

    return await adrive(flow, perform)


class AsyncDriver:
    """Runs operations on a ``psycopg_pool.AsyncConnectionPool``, opened on first use (inside the loop)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool: AsyncConnectionPool | None = None
        self.vector_schema: str | None = None  # known once the pool is open
        self._opening = asyncio.Lock()

    @unchained
    async def _open(self) -> AsyncConnectionPool:
        async with self._opening:
            if self.pool is None:
                try:
                    self.vector_schema = await self._migrate()
                except (psycopg.Error, UniqueViolation) as exc:
                    raise convert(exc, self.settings, "open the store") from None
                pool = AsyncConnectionPool(
                    self.settings.url,
                    kwargs=self.settings.kwargs(self.vector_schema is not None),
                    min_size=self.settings.min_size,
                    max_size=self.settings.max_size,
                    open=False,
                    timeout=self.settings.timeout,
                    name="convmem",
                )
                await pool.open(wait=False)
                self.pool = pool
            return self.pool

    async def _migrate(self) -> str | None:
        for attempt in range(RETRIES + 1):  # see SyncDriver._migrate
            conn = await psycopg.AsyncConnection.connect(self.settings.url, **self.settings.kwargs())
            try:
                async with conn, conn.transaction():
                    return await _run_async(conn, migrate(self.settings.schema))
            except psycopg.Error as exc:
                if attempt == RETRIES or not _lost(exc):
                    raise
            await asyncio.sleep(0.02 * 2.0**attempt)
        raise AssertionError("unreachable")

    @unchained
    async def run(self, op: Op[T]) -> T:
        pool = self.pool or await self._open()
        attempt = stale = 0
        while True:
            committing = False
            try:
                async with pool.connection() as conn:
                    if _stale(conn) and stale <= self.settings.max_size:
                        await conn.close()  # see SyncDriver.run
                        stale += 1
                        continue
                    if op.mode == "statement":
                        return await _run_async(conn, op.start(attempt > 0))
                    async with conn.transaction():
                        if op.mode == "snapshot":
                            await conn.execute(SNAPSHOT)
                        result = await _run_async(conn, op.start(attempt > 0))
                        committing = True
                    return result
            except (psycopg.Error, PoolTimeout, UniqueViolation) as exc:
                if attempt == RETRIES or not _retry(op, exc, committing):
                    raise convert(exc, self.settings, op.what, unknown=committing and _lost(exc)) from None
                await asyncio.sleep(0.02 * 2.0**attempt)
                attempt += 1

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
