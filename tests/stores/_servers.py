"""The real PostgreSQL and Redis servers the server-backend tests run against, and per-test namespaces.

Each test gets its own PostgreSQL schema or Redis key prefix, derived from its
temporary directory, so tests can run in parallel; the fixtures here remove
what they created. URLs come from ``CONVMEM_POSTGRES_URL`` / ``CONVMEM_REDIS_URL``
or default to the servers ``.ci/run`` starts on this machine.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PG_URL = os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CONVMEM_REDIS_URL", "redis://127.0.0.1:6379/0")


def tag(location: Path | str) -> str:
    return hashlib.sha1(str(location).encode()).hexdigest()[:16]


def schema_for(location: Path | str) -> str:
    return f"convmem_t_{tag(location)}"


def prefix_for(location: Path | str) -> str:
    return f"convmem-t-{tag(location)}:"


def drop_schemas(schemas: set[str]) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for schema in sorted(schemas):
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
    schemas.clear()


def drop_prefixes(prefixes: set[str]) -> None:
    import redis

    with redis.Redis.from_url(REDIS_URL) as client:
        for prefix in sorted(prefixes):
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
    prefixes.clear()
