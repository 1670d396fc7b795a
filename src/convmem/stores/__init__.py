"""Stores: where sessions and their append-only messages live.

The contract is in :mod:`convmem.stores.base`; the conformance suite every
backend passes is :mod:`convmem.testing`. Each backend is one subpackage
(``sqlite/``, ``files/``, ``postgres/``, ``redis/``) holding its store, its
long-term stores and its private SQL or Lua; what they all share stays here:
the contract (``base``), the write rules every backend calls (``_writes``),
the decoded session record (``_record``), the export format (``_export``), the
codecs (``codec``, ``_longterm_codec``), the thread wrapper of the async twins
(``_async``) and the server stores over an operation table (``_server``).
Built-in backends:

==================  ===============================================================
``MemoryStore``     in this process; the reference, and ``Memory()``'s default
``SQLiteStore``     one SQLite file (WAL); the default persistent store
``FileStore``       a directory of append-only JSONL files, one per session
``PostgresStore``   a PostgreSQL schema, for many processes (extra ``postgres``)
``RedisStore``      a Redis database, for many processes (extra ``redis``)
==================  ===============================================================

Each has an ``Async`` twin, and each backend keeps its long-term memory
(facts, working blocks, recall) in the same place: ``SQLiteFactStore``,
``PostgresRecallStore`` and so on (these need the ``recall`` extra).
Backends are imported on first use, so ``import convmem.stores`` stays cheap; a server backend whose extra is not
installed raises :class:`~convmem.errors.ConfigurationError` with the
``pip install`` command.

Example::

    from convmem.stores import open_store

    store = open_store("sqlite")                   # $CONVMEM_DB or the user data dir
    store = open_store("sqlite:///tmp/chat.db")    # or "/tmp/chat.db"
    store = open_store("files:///var/lib/chats")
    store = open_store("postgresql://app@db/chat")  # or postgres://
    store = open_store("redis://cache:6379/0")      # or rediss://
    store = await aopen_store("sqlite")            # the async twin, for AsyncMemory
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import lazy
from ..errors import ConfigurationError
from ..messages import StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState, SummaryRecord, status_of
from ._forget import ForgetReceipt, Forgetting
from ._sweep import Retention, sweep
from .base import AsyncSessionStore, AsyncStore, SessionStore, Store

if TYPE_CHECKING:
    from .files import AsyncFileStore, FileBlockStore, FileFactStore, FileRecallStore, FileStore
    from .memory import AsyncMemoryStore, MemoryStore
    from .postgres import AsyncPostgresStore, PostgresBlockStore, PostgresFactStore, PostgresRecallStore, PostgresStore
    from .redis import AsyncRedisStore, RedisBlockStore, RedisFactStore, RedisRecallStore, RedisStore
    from .sqlite import AsyncSQLiteStore, SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore, SQLiteStore

__all__ = [
    "AsyncFileStore",
    "AsyncMemoryStore",
    "AsyncPostgresStore",
    "AsyncRedisStore",
    "AsyncSQLiteStore",
    "AsyncSessionStore",
    "AsyncStore",
    "FileBlockStore",
    "FileFactStore",
    "FileRecallStore",
    "FileStore",
    "ForgetReceipt",
    "Forgetting",
    "LoadedSession",
    "MemoryStore",
    "PostgresBlockStore",
    "PostgresFactStore",
    "PostgresRecallStore",
    "PostgresStore",
    "RedisBlockStore",
    "RedisFactStore",
    "RedisRecallStore",
    "RedisStore",
    "Retention",
    "SQLiteBlockStore",
    "SQLiteFactStore",
    "SQLiteRecallStore",
    "SQLiteStore",
    "SessionInfo",
    "SessionState",
    "SessionStore",
    "Store",
    "StoredMessage",
    "SummaryRecord",
    "aopen_store",
    "open_store",
    "split_store_url",
    "status_of",
    "sweep",
]

_BACKENDS = {
    "files": ("AsyncFileStore", "FileStore", "FileBlockStore", "FileFactStore", "FileRecallStore"),
    "memory": ("AsyncMemoryStore", "MemoryStore"),
    "sqlite": ("AsyncSQLiteStore", "SQLiteStore", "SQLiteBlockStore", "SQLiteFactStore", "SQLiteRecallStore"),
    "postgres": (
        "AsyncPostgresStore",
        "PostgresStore",
        "PostgresBlockStore",
        "PostgresFactStore",
        "PostgresRecallStore",
    ),
    "redis": ("AsyncRedisStore", "RedisStore", "RedisBlockStore", "RedisFactStore", "RedisRecallStore"),
}
_LAZY = {name: module for module, names in _BACKENDS.items() for name in names}


__getattr__ = lazy(__name__, _LAZY)


def open_store(spec: str | None = None) -> SessionStore:
    """A store from a short spec.

    Args:
        spec: ``"memory"``; ``"sqlite"`` (the default path, also for ``None``);
            ``"sqlite:///abs/path.db"`` or any path ending in ``.db``,
            ``.sqlite`` or ``.sqlite3``; ``"files:///abs/dir"``; a PostgreSQL URL
            (``postgresql://`` or ``postgres://``; ``?schema=name`` chooses the schema, default
            ``convmem``); a Redis URL (``redis://``, ``rediss://`` or ``unix://``; ``?prefix=p:``
            chooses the key prefix, default ``convmem:``).

    Raises:
        ConfigurationError: the spec names no known backend, or the backend's extra is not installed.
        StoreError: a server backend cannot connect.
    """
    kind, argument = _parse(spec)
    url, options = split_store_url(argument) if kind in ("postgres", "redis") else (argument, {})
    store: SessionStore = __getattr__(_NAMES[kind])(*([] if url is None else [url]), **options)
    return store


async def aopen_store(spec: str | None = None) -> AsyncSessionStore:
    """The async twin of :func:`open_store`: the same specs, an async store.

    Opening an embedded store (SQLite, files) touches the disk, so it runs in a
    worker thread; a server store connects on its first awaited call.
    """
    if _parse(spec)[0] in ("sqlite", "files"):
        return await asyncio.to_thread(open_async_store_now, spec)
    return open_async_store_now(spec)


def open_async_store_now(spec: str | None = None) -> AsyncSessionStore:
    """:func:`aopen_store` without awaiting: for a constructor (``AsyncMemory(store=...)``) that cannot await."""
    kind, argument = _parse(spec)
    url, options = split_store_url(argument) if kind in ("postgres", "redis") else (argument, {})
    store: AsyncSessionStore = __getattr__("Async" + _NAMES[kind])(*([] if url is None else [url]), **options)
    return store


_URL_OPTIONS = {"postgres": "schema", "redis": "prefix"}


def split_store_url(url: str) -> tuple[str, dict[str, str]]:
    """A server store's URL without convmem's own query option, and that option.

    ``postgresql://...?schema=name`` chooses the PostgreSQL schema and ``redis://...?prefix=p:`` the
    Redis key prefix; every other query parameter stays in the URL for the driver.
    """
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    kind = "postgres" if url.startswith(("postgresql://", "postgres://")) else "redis"
    name = _URL_OPTIONS[kind]
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    chosen = [v for k, v in pairs if k == name]
    if not chosen:
        return url, {}
    if len(chosen) > 1 or not chosen[0]:
        raise ConfigurationError(f"store URL: give ?{name}= once, with a value")
    rest = urlencode([(k, v) for k, v in pairs if k != name])
    return urlunsplit(parts._replace(query=rest)), {name: chosen[0]}


_NAMES = {
    "memory": "MemoryStore",
    "sqlite": "SQLiteStore",
    "files": "FileStore",
    "postgres": "PostgresStore",
    "redis": "RedisStore",
}


def _parse(spec: str | None) -> tuple[str, Any]:
    """The backend a spec names, and the argument its store takes (a path, a URL, or None)."""
    if spec is None or spec == "sqlite":
        return "sqlite", None
    if spec == "memory":
        return "memory", None
    if spec.startswith("sqlite://"):
        return "sqlite", _url_path(spec, "sqlite://")
    if spec.startswith("files://"):
        return "files", _url_path(spec, "files://")
    if spec.startswith(("postgresql://", "postgres://")):
        return "postgres", spec
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return "redis", spec
    if Path(spec).suffix in (".db", ".sqlite", ".sqlite3"):
        return "sqlite", Path(spec).expanduser()
    raise ConfigurationError(
        f"unknown store {spec!r}; use 'memory', 'sqlite', 'sqlite:///path.db', a path ending in .db, 'files:///dir', "
        "'postgresql://...' or 'redis://...'"
    )


def _url_path(spec: str, scheme: str) -> Path:
    rest = spec[len(scheme) :].lstrip("/")
    if not spec[len(scheme) :].startswith("/") or not rest:
        raise ConfigurationError(f"store URL {spec!r} needs an absolute path: {scheme}/absolute/path")
    # scheme:///abs/path names /abs/path; scheme:///~/x is accepted for a path in the home directory.
    return Path(rest).expanduser() if rest.startswith("~") else Path("/" + rest)
