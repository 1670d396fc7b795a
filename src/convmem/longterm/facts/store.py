"""The in-memory :class:`~convmem.longterm.facts.FactStore`, and an async wrapper for any sync fact store.

The reference implementation: a dict of rows per user. Persistent fact
stores (SQLite, files) live next to their message stores and run the same
contract tests (``tests/longterm/test_facts.py``).

Example::

    store = MemoryFactStore()
    facts = Facts(store)
    facts.add("Alice lives in Lisbon", user_id="alice", subject="alice.home")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Generic, TypeVar

from ...errors import ConflictError
from .model import Fact, FactStore, query_time

__all__ = ["AsyncFactStoreWrapper", "MemoryFactStore", "check_changes", "select_facts"]

S = TypeVar("S", bound=FactStore)


def select_facts(rows: Sequence[Fact], *, valid_at: datetime | None, open_only: bool) -> list[Fact]:
    """Filter and order one user's rows as :meth:`FactStore.list_facts` promises."""
    valid_at = query_time(valid_at)
    if open_only:
        rows = [f for f in rows if f.valid_to is None]
    if valid_at is not None:
        rows = [f for f in rows if f.valid_at(valid_at)]
    return sorted(rows, key=lambda f: (f.valid_from, f.created_at, f.id))


def check_changes(stored: dict[str, Fact], added: Sequence[Fact], changed: Sequence[Fact]) -> None:
    """Raise ConflictError unless every changed fact is stored, open and of the same user, and no added id exists."""
    for fact in added:
        if fact.id in stored:
            raise ConflictError(f"fact {fact.id!r} already exists")
    for fact in changed:
        old = stored.get(fact.id)
        if old is None or old.user_id != fact.user_id:
            raise ConflictError(f"fact {fact.id!r} does not exist for user {fact.user_id!r}")
        if old.valid_to is not None:
            raise ConflictError(f"fact {fact.id!r} was already ended ({old.invalid_reason}); reload and retry")


class MemoryFactStore:
    """Facts in a dict; lost when the process ends. Thread-safe."""

    def __init__(self) -> None:
        self._rows: dict[str, Fact] = {}
        self._by_user: dict[str | None, list[str]] = {}
        self._lock = threading.Lock()

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        with self._lock:
            check_changes(self._rows, added, changed)
            for fact in changed:
                self._rows[fact.id] = fact
            for fact in added:
                self._rows[fact.id] = fact
                self._by_user.setdefault(fact.user_id, []).append(fact.id)

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        with self._lock:
            rows = [self._rows[i] for i in self._by_user.get(user_id, ())]
        return select_facts(rows, valid_at=valid_at, open_only=open_only)

    def close(self) -> None:
        pass


class AsyncFactStoreWrapper(Generic[S]):
    """Implements :class:`~convmem.longterm.facts.AsyncFactStore` over a sync one, off the event loop."""

    def __init__(self, sync: S, *, offload: bool = True) -> None:
        self.sync: S = sync
        self.offload = offload

    async def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        if self.offload:
            await asyncio.to_thread(self.sync.write_facts, added, changed)
        else:
            self.sync.write_facts(added, changed)

    async def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        if self.offload:
            return await asyncio.to_thread(
                self.sync.list_facts, user_id=user_id, valid_at=valid_at, open_only=open_only
            )
        return self.sync.list_facts(user_id=user_id, valid_at=valid_at, open_only=open_only)

    async def aclose(self) -> None:
        self.sync.close()
