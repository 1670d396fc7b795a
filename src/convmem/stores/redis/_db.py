"""Connections for the Redis stores: settings, the two drivers, retries, and error conversion.

This is the only place where redis-py exceptions enter convmem: :func:`convert`
turns each into a :class:`~convmem.errors.StoreError` naming the server as
``host:port/db``, never the password.

Both drivers run a flow on the one effect driver (:func:`convmem._effects.drive` /
:func:`~convmem._effects.adrive`): each request's reply is sent back into it.
redis-py's own retries are switched off (it would re-send a script whose
reply was lost, and run it twice). Instead, when the connection fails, an
operation is started again with backoff until ``retry_for`` seconds have
passed, if that is safe: reads always; the append and save-state scripts,
which recognise their own earlier attempt; any operation when the failure
was in connecting (nothing was sent) or the server was still loading its
data. Otherwise the StoreError says the outcome is unknown.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, BusyLoadingError, RedisError, ResponseError
from redis.retry import Retry

from ..._effects import adrive, drive
from ...errors import ConfigurationError, StoreError, redact, unchained
from ._lua import SCRIPTS
from ._ops import Cmd, Lua, Op, Request

__all__ = ["AsyncDriver", "Settings", "SyncDriver", "convert"]

T = TypeVar("T")
ENV = "CONVMEM_REDIS_URL"


@dataclass(frozen=True)
class Settings:
    url: str = field(repr=False)  # may hold the password: reprs show ``where``
    where: str
    password: str | None = field(repr=False)
    timeout: float
    retry_for: float
    max_connections: int

    @classmethod
    @unchained
    def of(cls, url: str | None, timeout: float, retry_for: float, max_connections: int) -> Settings:
        url = url or os.environ.get(ENV)
        if not url:
            raise ConfigurationError(f"RedisStore needs a URL: pass one or set {ENV} (redis://host:6379/0)")
        try:
            pool = redis.ConnectionPool.from_url(url)
        except (ValueError, RedisError) as exc:
            raise StoreError(redact(f"invalid Redis URL: {exc}", url)) from None
        params = pool.connection_kwargs
        pool.disconnect()
        place = params.get("path") or f"{params.get('host', 'localhost')}:{params.get('port', 6379)}"
        where = f"Redis {place}/{params.get('db', 0)}"
        return cls(url, where, params.get("password"), timeout, retry_for, max_connections)

    def kwargs(self) -> dict[str, Any]:
        return {
            "retry": Retry(NoBackoff(), 0),
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "max_connections": self.max_connections,
            "client_name": "convmem",
        }


def convert(exc: BaseException, settings: Settings, what: str, *, unknown: bool = False) -> StoreError:
    """The StoreError for a redis-py exception met while doing ``what``."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if unknown:
        text += "; the connection was lost mid-call, so whether it was applied is unknown"
    return StoreError(redact(f"{settings.where}: {what}: {text}", settings.password))


def _lost(exc: BaseException) -> bool:
    return isinstance(exc, redis.ConnectionError | redis.TimeoutError) and not isinstance(exc, AuthenticationError)


def _unsent(exc: BaseException) -> bool:
    # Nothing reached the server: it refused the connection, or it is loading its data and refused the command.
    return isinstance(exc, BusyLoadingError) or (_lost(exc) and "connecting to" in str(exc))


def _retry(op: Op[Any], exc: BaseException) -> bool:
    return _unsent(exc) or (op.retry and _lost(exc))


def _backoff(attempt: int) -> float:
    return min(0.5, 0.02 * 2.0**attempt)


class SyncDriver:
    """Runs operations on a ``redis.Redis`` client (its own connection pool)."""

    @unchained
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = redis.Redis.from_url(settings.url, **settings.kwargs())
        self.scripts = {name: self.client.register_script(text) for name, text in SCRIPTS.items()}
        try:
            self.client.ping()
        except RedisError as exc:
            self.client.close()
            raise convert(exc, settings, "connect") from None

    def _do(self, request: Request) -> Any:
        if isinstance(request, Cmd):
            try:
                return self.client.execute_command(*request.args)  # type: ignore[no-untyped-call]
            except ResponseError as exc:
                if request.tolerate and request.tolerate in str(exc):
                    return exc
                raise
        if isinstance(request, Lua):
            return self.scripts[request.name](args=list(request.args))
        with self.client.pipeline(transaction=request.atomic) as pipe:
            for args in request.cmds:
                pipe.execute_command(*args)  # type: ignore[no-untyped-call]
            return pipe.execute()

    @unchained
    def run(self, op: Op[T]) -> T:
        deadline = time.monotonic() + self.settings.retry_for
        attempt = 0
        while True:
            try:
                return drive(op.start(attempt > 0), self._do)
            except RedisError as exc:
                if not _retry(op, exc) or time.monotonic() >= deadline:
                    raise convert(exc, self.settings, op.what, unknown=_lost(exc) and not _unsent(exc)) from None
                time.sleep(_backoff(attempt))
                attempt += 1

    def close(self) -> None:
        self.client.close()


class AsyncDriver:
    """Runs operations on a ``redis.asyncio.Redis`` client."""

    @unchained
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = redis.asyncio.Redis.from_url(settings.url, **settings.kwargs())
        self.scripts = {name: self.client.register_script(text) for name, text in SCRIPTS.items()}

    async def _do(self, request: Request) -> Any:
        if isinstance(request, Cmd):
            try:
                return await self.client.execute_command(*request.args)  # type: ignore[no-untyped-call]
            except ResponseError as exc:
                if request.tolerate and request.tolerate in str(exc):
                    return exc
                raise
        if isinstance(request, Lua):
            return await self.scripts[request.name](args=list(request.args))
        async with self.client.pipeline(transaction=request.atomic) as pipe:
            for args in request.cmds:
                pipe.execute_command(*args)
            return await pipe.execute()

    @unchained
    async def run(self, op: Op[T]) -> T:
        deadline = time.monotonic() + self.settings.retry_for
        attempt = 0
        while True:
            try:
                return await adrive(op.start(attempt > 0), self._do)
            except RedisError as exc:
                if not _retry(op, exc) or time.monotonic() >= deadline:
                    raise convert(exc, self.settings, op.what, unknown=_lost(exc) and not _unsent(exc)) from None
                await asyncio.sleep(_backoff(attempt))
                attempt += 1

    async def close(self) -> None:
        await self.client.aclose()
