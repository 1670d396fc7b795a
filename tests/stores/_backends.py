"""Every built-in backend by name, each in a location of its own (a schema, a key prefix, a directory)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from convmem.stores import FileStore, MemoryStore, SQLiteStore

from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

BACKENDS = ("memory", "sqlite", "files", "postgres", "redis")


@contextmanager
def backend(kind: str, location: Path) -> Iterator[Any]:
    """A fresh store of ``kind`` under ``location``; server data is dropped afterwards."""
    location.mkdir(parents=True, exist_ok=True)
    if kind == "memory":
        yield MemoryStore()
    elif kind == "sqlite":
        store = SQLiteStore(location / "db.sqlite")
        try:
            yield store
        finally:
            store.close()
    elif kind == "files":
        yield FileStore(location / "files")
    elif kind == "postgres":
        from convmem.stores.postgres import PostgresStore

        schema = schema_for(location)
        store = PostgresStore(PG_URL, schema=schema, max_size=2)
        try:
            yield store
        finally:
            store.close()
            drop_schemas({schema})
    elif kind == "redis":
        from convmem.stores.redis import RedisStore

        prefix = prefix_for(location)
        store = RedisStore(REDIS_URL, prefix=prefix)
        try:
            yield store
        finally:
            store.close()
            drop_prefixes({prefix})
    else:
        raise AssertionError(kind)
