"""PostgresStore passes the conformance suite (sync and async) against the real server, one schema per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convmem.stores.postgres import AsyncPostgresStore, PostgresStore
from convmem.testing import AsyncStoreConformance, StoreConformance

from ._servers import PG_URL, drop_schemas, schema_for

SCHEMAS: set[str] = set()


@pytest.fixture(autouse=True, scope="module")
def _drop_test_schemas() -> Iterator[None]:
    yield
    drop_schemas(SCHEMAS)


def _schema(location: Path) -> str:
    SCHEMAS.add(schema_for(location))
    return schema_for(location)


class TestPostgresStore(StoreConformance):
    def make_store(self, location: Path) -> PostgresStore:
        return PostgresStore(PG_URL, schema=_schema(location), max_size=4)


class TestAsyncPostgresStore(AsyncStoreConformance):
    def make_store(self, location: Path) -> AsyncPostgresStore:
        return AsyncPostgresStore(PG_URL, schema=_schema(location), max_size=4)
