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

At open, each driver reads the server's ``maxmemory-policy`` (``CONFIG GET``, or ``INFO memory`` where
a managed Redis refuses ``CONFIG``, or the store's ``maxmemory_policy=`` where it refuses both, and says
which it used): under a policy that can evict the store's keys (``allkeys-*``; ``volatile-*`` when the
store sets a ``ttl``) an evicted key is an acknowledged message lost without a word, so the store refuses
to open (:func:`check_policy`) unless ``allow_eviction=True`` accepts the risk, with a warning; a session
that then lost rows raises SessionLostError when it is opened, read or exported (:mod:`._ops`). Under
``noeviction`` a full Redis refuses every command queued in ``MULTI``, reads included, so a read-only snapshot
that is refused for memory is read again without ``MULTI``: no write can land meanwhile, since every write is
refused too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import warnings
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
from ._ops import Cmd, Lua, Op, Pipe, Request

__all__ = ["AsyncDriver", "Eviction", "Settings", "SyncDriver", "check_policy", "convert"]

T = TypeVar("T")
ENV = "CONVMEM_REDIS_URL"


@dataclass(frozen=True, slots=True)
class Eviction:
    """What the store accepts of the server's memory policy (the store's options ``ttl`` and the two below).

    Attributes:
        expiring: whether the store's keys carry a TTL (``ttl=``), which ``volatile-*`` policies evict.
        allow: ``allow_eviction``: open under an evicting policy anyway, with a warning.
        policy: ``maxmemory_policy``: the policy to assume when the server says neither through CONFIG nor INFO.
    """

    expiring: bool = False
    allow: bool = False
    policy: str | None = None


def check_policy(policy: str | None, source: str, eviction: Eviction, where: str) -> None:
    """Refuse (ConfigurationError) or warn about a policy that can evict the store's keys; see the module doc."""
    if policy is None:
        raise ConfigurationError(
            f"{where}: the server's maxmemory-policy cannot be read (CONFIG GET and INFO memory were refused); "
            "pass maxmemory_policy= with the policy it runs (noeviction keeps every key)"
        )
    evicts = policy.startswith("allkeys-") or (eviction.expiring and policy.startswith("volatile-"))
    if not evicts:
        return
    text = (
        f"{where}: maxmemory-policy is {policy!r} ({source}), under which Redis may evict this store's keys "
        "when it is full and lose acknowledged messages"
    )
    if not eviction.allow:
        raise ConfigurationError(
            f"{text}; set maxmemory-policy to noeviction"
            + (" (or volatile-* without the store's ttl=)" if eviction.expiring else "")
            + ", or pass allow_eviction=True to accept the risk (a session that lost messages raises"
            " SessionLostError when opened)"
        )
    warnings.warn(
        f"{text}; allow_eviction=True: a session that lost messages raises SessionLostError when opened",
        RuntimeWarning,
        stacklevel=4,
    )


def _policy_from(config: Any) -> str | None:
    value = config.get("maxmemory-policy") if isinstance(config, dict) else None
    return value.decode() if isinstance(value, bytes) else value


def _info_policy(info: Any) -> dict[str, Any]:
    return {"maxmemory-policy": info.get("maxmemory_policy") if isinstance(info, dict) else None}


def _read_only(request: Pipe) -> bool:
    return all(str(args[0]).upper() in _READS for args in request.cmds)


_READS = frozenset(
    {"ZCOUNT", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZRANGE", "ZCARD", "HGET", "HMGET", "HGETALL", "HEXISTS"}
)


def _full(exc: ResponseError) -> bool:
    return "maxmemory" in str(exc)


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
    def __init__(self, settings: Settings, eviction: Eviction | None = None) -> None:
        self.settings = settings
        self.client = redis.Redis.from_url(settings.url, **settings.kwargs())
        self.scripts = {name: self.client.register_script(text) for name, text in SCRIPTS.items()}
        try:
            self.client.ping()
            if eviction is not None:
                check_policy(*self._policy(eviction), eviction, settings.where)
        except RedisError as exc:
            self.client.close()
            raise convert(exc, settings, "connect") from None
        except ConfigurationError:
            self.client.close()
            raise

    def _policy(self, eviction: Eviction) -> tuple[str | None, str]:
        with contextlib.suppress(ResponseError):  # a managed Redis may refuse CONFIG (renamed, an ACL): ask INFO
            policy = _policy_from(self.client.config_get("maxmemory-policy"))
            if policy is not None:
                return policy, "CONFIG GET"
        with contextlib.suppress(ResponseError):
            policy = _policy_from(_info_policy(self.client.info("memory")))
            if policy is not None:
                return policy, "INFO memory"
        return eviction.policy, "the maxmemory_policy option"

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
        try:
            with self.client.pipeline(transaction=request.atomic) as pipe:
                for args in request.cmds:
                    pipe.execute_command(*args)  # type: ignore[no-untyped-call]
                return pipe.execute()
        except ResponseError as exc:  # a full Redis refuses MULTI even for reads: read without it
            if not (request.atomic and _full(exc) and _read_only(request)):
                raise
            return self._do(Pipe(request.cmds, atomic=False))

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
    def __init__(self, settings: Settings, eviction: Eviction | None = None) -> None:
        self.settings = settings
        self.client = redis.asyncio.Redis.from_url(settings.url, **settings.kwargs())
        self.scripts = {name: self.client.register_script(text) for name, text in SCRIPTS.items()}
        self.eviction = eviction  # checked on the first operation: a constructor cannot await

    async def _policy(self, eviction: Eviction) -> tuple[str | None, str]:
        with contextlib.suppress(ResponseError):
            policy = _policy_from(await self.client.config_get("maxmemory-policy"))
            if policy is not None:
                return policy, "CONFIG GET"
        with contextlib.suppress(ResponseError):
            policy = _policy_from(_info_policy(await self.client.info("memory")))
            if policy is not None:
                return policy, "INFO memory"
        return eviction.policy, "the maxmemory_policy option"

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
        try:
            async with self.client.pipeline(transaction=request.atomic) as pipe:
                for args in request.cmds:
                    pipe.execute_command(*args)
                return await pipe.execute()
        except ResponseError as exc:  # a full Redis refuses MULTI even for reads: read without it
            if not (request.atomic and _full(exc) and _read_only(request)):
                raise
            return await self._do(Pipe(request.cmds, atomic=False))

    @unchained
    async def run(self, op: Op[T]) -> T:
        if self.eviction is not None:
            try:
                check_policy(*(await self._policy(self.eviction)), self.eviction, self.settings.where)
            except RedisError as exc:
                raise convert(exc, self.settings, "connect") from None
            self.eviction = None  # checked once it passed; a refusal refuses every operation
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
