"""RedisStore passes the conformance suite (sync and async) against the real server, one key prefix per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convmem.stores.redis import AsyncRedisStore, RedisStore
from convmem.testing import AsyncStoreConformance, StoreConformance

from ._servers import REDIS_URL, drop_prefixes, prefix_for

PREFIXES: set[str] = set()


@pytest.fixture(autouse=True, scope="module")
def _drop_test_keys() -> Iterator[None]:
    yield
    drop_prefixes(PREFIXES)


def _prefix(location: Path) -> str:
    PREFIXES.add(prefix_for(location))
    return prefix_for(location)


class TestRedisStore(StoreConformance):
    def make_store(self, location: Path) -> RedisStore:
        return RedisStore(REDIS_URL, prefix=_prefix(location))

    def per_kind(self, store: Any, kind: str) -> Any:
        from convmem.stores.redis.longterm import RedisBlockStore, RedisFactStore, RedisRecallStore

        return {"facts": RedisFactStore, "blocks": RedisBlockStore, "recall": RedisRecallStore}[kind](store)


class TestAsyncRedisStore(AsyncStoreConformance):
    def make_store(self, location: Path) -> AsyncRedisStore:
        return AsyncRedisStore(REDIS_URL, prefix=_prefix(location))
