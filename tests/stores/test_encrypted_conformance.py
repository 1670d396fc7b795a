"""The store conformance suite, over an ``EncryptedStore`` on every backend: sealing changes no behaviour.

One key ring for the module, so a reopened store (a new wrapper over the same location) reads what the
first one wrote, as a restarted process with the same key file does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convmem.stores import FileStore, MemoryStore, SQLiteStore
from convmem.stores.encrypted import EncryptedStore, KeyRing
from convmem.testing import StoreConformance

from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

RING = KeyRing.generate("k1")
SCHEMAS: set[str] = set()
PREFIXES: set[str] = set()


@pytest.fixture(autouse=True, scope="module")
def _drop_test_data() -> Iterator[None]:
    yield
    drop_schemas(SCHEMAS)
    drop_prefixes(PREFIXES)


class TestEncryptedMemoryStore(StoreConformance):
    persistent = False

    def make_store(self, location: Path) -> EncryptedStore:
        return EncryptedStore(MemoryStore(), RING)


class TestEncryptedSQLiteStore(StoreConformance):
    releases_connection = True

    def make_store(self, location: Path) -> EncryptedStore:
        return EncryptedStore(SQLiteStore(location / "convmem.db"), RING)


class TestEncryptedFileStore(StoreConformance):
    def make_store(self, location: Path) -> EncryptedStore:
        return EncryptedStore(FileStore(location / "files"), RING)


class TestEncryptedPostgresStore(StoreConformance):
    releases_connection = True

    def make_store(self, location: Path) -> EncryptedStore:
        from convmem.stores.postgres import PostgresStore

        SCHEMAS.add(schema_for(location))
        return EncryptedStore(PostgresStore(PG_URL, schema=schema_for(location), max_size=2), RING)


class TestEncryptedRedisStore(StoreConformance):
    def make_store(self, location: Path) -> EncryptedStore:
        from convmem.stores.redis import RedisStore

        PREFIXES.add(prefix_for(location))
        return EncryptedStore(RedisStore(REDIS_URL, prefix=prefix_for(location)), RING)
