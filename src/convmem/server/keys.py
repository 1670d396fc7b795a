"""Tenants and API keys: created once, stored hashed, checked on every request.

A key looks like ``cmk_<key id>_<secret>``: the key id (8 hex digits) names it
in listings and revocations; the secret is 32 random bytes. Only the SHA-256
of the whole key is stored (a key is random and long, so a fast hash is as good
as a slow one here, and it lets a lookup be one indexed read). The plain key
exists in exactly two places: the response (or CLI line) that creates it, and
its holder. Nothing here logs, echoes or ``repr``\\ s a key.

The registry lives in SQLite (a file the workers of one host share) or in a
PostgreSQL schema (for workers on several hosts)::

    registry = open_registry("sqlite:///var/lib/convmem/keys.db")
    key = registry.create_key("acme")          # shown once
    registry.tenant_of(key.secret)             # 'acme'

Checks are cached in-process for ``ttl`` seconds (a revoked key stops working
on other workers within that time, on this one at once).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, ConflictError, ConvmemError, ServiceError, StoreError
from .tenancy import check_tenant

__all__ = ["ADMIN_ENV", "KEYS_ENV", "ApiKey", "KeyInfo", "KeyRegistry", "admin_matches", "open_registry"]

ADMIN_ENV = "CONVMEM_ADMIN_KEY"
KEYS_ENV = "CONVMEM_KEYS"
_KEY = re.compile(r"cmk_([0-9a-f]{8})_[A-Za-z0-9_-]{43}")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, created_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS api_keys (key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL REFERENCES tenants(name),"
    " key_hash TEXT NOT NULL UNIQUE, label TEXT, created_at TEXT NOT NULL, revoked_at TEXT)",
)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def admin_matches(given: str | None) -> bool:
    """Whether ``given`` is the admin key of ``$CONVMEM_ADMIN_KEY`` (compared in constant time)."""
    expected = os.environ.get(ADMIN_ENV)
    if not expected or not given:
        return False
    return hmac.compare_digest(hash_key(given), hash_key(expected))


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """A key as listed: never its secret."""

    key_id: str
    tenant: str
    label: str | None
    created_at: str
    revoked_at: str | None = None


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A newly created key. ``secret`` is the only copy; it is kept out of ``repr``."""

    info: KeyInfo
    secret: str = field(repr=False)


class KeyRegistry:
    """Tenants and hashed keys in one SQL database (SQLite or PostgreSQL)."""

    def __init__(self, connect: Any, *, placeholder: str, where: str, ttl: float = 5.0) -> None:
        self._connect = connect
        self._ph = placeholder
        self.where = where
        self.ttl = ttl
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, float]] = {}
        with self._tx() as run:
            for statement in _SCHEMA:
                run(statement)

    def __repr__(self) -> str:
        return f"KeyRegistry({self.where})"

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Any]:
        try:
            with self._lock, self._connect(write) as conn:
                cursor = conn.cursor()

                def run(statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
                    cursor.execute(statement.replace("?", self._ph), tuple(params))
                    return list(cursor.fetchall()) if cursor.description else []

                yield run
        except ConvmemError:  # the registry's own (a tenant name, a taken id, no such key)
            raise
        except Exception as exc:  # driver errors, converted in this one place; they never hold a key
            raise StoreError(f"key registry {self.where}: {type(exc).__name__}") from None

    # -- tenants -----------------------------------------------------------------------------
    def create_tenant(self, name: str, *, exist_ok: bool = False) -> None:
        check_tenant(name)
        with self._tx() as run:
            if run("SELECT 1 FROM tenants WHERE name = ?", (name,)):
                if exist_ok:
                    return
                raise ConflictError(f"tenant {name!r} exists")
            run("INSERT INTO tenants (name, created_at) VALUES (?, ?)", (name, _now()))

    def tenants(self) -> list[str]:
        with self._tx() as run:
            return [name for (name,) in run("SELECT name FROM tenants ORDER BY name")]

    # -- keys --------------------------------------------------------------------------------
    def create_key(self, tenant: str, *, label: str | None = None) -> ApiKey:
        """A new key for ``tenant`` (created if absent). The returned secret is not stored anywhere."""
        self.create_tenant(tenant, exist_ok=True)
        key_id = secrets.token_hex(4)
        secret = f"cmk_{key_id}_{secrets.token_urlsafe(32)}"
        info = KeyInfo(key_id, tenant, label, _now())
        with self._tx() as run:
            run(
                "INSERT INTO api_keys (key_id, tenant, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
                (key_id, tenant, hash_key(secret), label, info.created_at),
            )
        return ApiKey(info, secret)

    def keys(self, tenant: str | None = None) -> list[KeyInfo]:
        query = "SELECT key_id, tenant, label, created_at, revoked_at FROM api_keys"
        with self._tx() as run:
            rows = run(query + " WHERE tenant = ? ORDER BY created_at", (tenant,)) if tenant else run(query)
        return [KeyInfo(*row) for row in rows]

    def revoke(self, key_id: str, *, tenant: str | None = None) -> KeyInfo:
        """Revoke a key by id (within ``tenant`` if given); a 404 ServiceError if there is no such key."""
        with self._tx() as run:
            rows = run("SELECT key_id, tenant, label, created_at, revoked_at FROM api_keys WHERE key_id = ?", (key_id,))
            if not rows or (tenant is not None and rows[0][1] != tenant):
                raise _no_key(key_id)
            if rows[0][4] is None:
                run("UPDATE api_keys SET revoked_at = ? WHERE key_id = ?", (_now(), key_id))
        with self._lock:
            self._cache.clear()
        return self.keys_by_id(key_id)

    def keys_by_id(self, key_id: str) -> KeyInfo:
        with self._tx() as run:
            rows = run("SELECT key_id, tenant, label, created_at, revoked_at FROM api_keys WHERE key_id = ?", (key_id,))
        if not rows:
            raise _no_key(key_id)
        return KeyInfo(*rows[0])

    def tenant_of(self, key: str | None) -> str | None:
        """The tenant of a valid, unrevoked key; None for anything else (no reason is given)."""
        if not key or not _KEY.fullmatch(key):
            return None
        digest = hash_key(key)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        with self._tx(write=False) as run:  # a read: never queues behind other workers' writes
            rows = run("SELECT tenant FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL", (digest,))
        if not rows:
            return None
        tenant = str(rows[0][0])
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (tenant, now + self.ttl)
        return tenant

    def close(self) -> None:
        closer = getattr(self._connect, "close", None)
        if closer is not None:
            closer()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class _SQLite:
    """A connection factory over one SQLite file: WAL, a busy timeout, one connection per registry."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")

    @contextmanager
    def __call__(self, write: bool) -> Iterator[Any]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()


class _Postgres:
    def __init__(self, url: str, schema: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise ConfigurationError(
                "a PostgreSQL key registry needs psycopg: pip install 'convmem[postgres]'"
            ) from None
        self._psycopg = psycopg
        self._url, self._schema = url, schema
        self._conn: Any = None

    @contextmanager
    def __call__(self, write: bool) -> Iterator[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = self._psycopg.connect(self._url, autocommit=False)
            with self._conn.cursor() as cursor:
                cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {self._schema}")
                cursor.execute(f"SET search_path TO {self._schema}")
            self._conn.commit()
        try:
            with self._conn.transaction():
                yield self._conn
        except self._psycopg.OperationalError:
            self._conn.close()  # a dropped connection is reopened by the next call
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def open_registry(spec: str | None = None, *, ttl: float = 5.0) -> KeyRegistry:
    """The key registry at ``spec``: a SQLite path or ``sqlite:///path``, or ``postgresql://...[#schema]``.

    Defaults to ``$CONVMEM_KEYS``, else ``keys.db`` in the user data directory.
    """
    spec = spec or os.environ.get(KEYS_ENV)
    if spec and spec.startswith(("postgresql://", "postgres://")):
        url, _, schema = spec.partition("#")
        schema = schema or "convmem_keys"
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
            raise ConfigurationError(f"key registry schema {schema!r} must be a lowercase identifier")
        return KeyRegistry(_Postgres(url, schema), placeholder="%s", where=f"PostgreSQL schema {schema}", ttl=ttl)
    if spec:
        path = Path(spec[len("sqlite://") :] if spec.startswith("sqlite://") else spec).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("convmem", appauthor=False)) / "keys.db"
    try:
        return KeyRegistry(_SQLite(path), placeholder="?", where=f"SQLite {path}", ttl=ttl)
    except sqlite3.Error as exc:
        raise StoreError(f"key registry SQLite {path}: {exc}") from None


def _no_key(key_id: str) -> ServiceError:
    return ServiceError(404, "not-found", "Not found", f"key not found: {key_id!r}")
