"""The in-memory reference store passes the conformance suite (sync and async)."""

from __future__ import annotations

from pathlib import Path

from convmem.stores import AsyncMemoryStore, MemoryStore, SessionStore
from convmem.testing import AsyncStoreConformance, StoreConformance


class TestMemoryStore(StoreConformance):
    persistent = False

    def make_store(self, location: Path) -> MemoryStore:
        return MemoryStore()


class TestAsyncMemoryStore(AsyncStoreConformance):
    persistent = False

    def make_store(self, location: Path) -> AsyncMemoryStore:
        return AsyncMemoryStore()


def test_the_async_twin_can_share_a_sync_store() -> None:
    sync = MemoryStore()
    assert AsyncMemoryStore(sync).sync is sync
    assert isinstance(sync, SessionStore)
