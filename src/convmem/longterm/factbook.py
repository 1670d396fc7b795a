"""``Facts`` and ``AsyncFacts``: write, extract and query facts with temporal validity.

The twins share one pure planner (:mod:`convmem.longterm._factplan`); they
differ only in how they call the store and the extractor. Every write reads
the user's open facts, plans the rows and writes them in one transaction; a
concurrent writer that ended the same fact first makes the write fail with
:class:`~convmem.errors.ConflictError` instead of silently ending it twice.

Both twins are eviction sinks: given to ``Memory(sinks=[facts])`` with an
extractor, they extract facts from every evicted unit. A failed extraction
changes nothing (invariant 8); the memory reports it as a warning.

Example::

    facts = Facts()                                   # in memory; Facts(SQLiteFactStore(...)) persists
    home = facts.add("Alice lives in Lisbon", user_id="alice", subject="alice.home")
    facts.update(home.id, "Alice lives in Porto", user_id="alice")
    [f.text for f in facts.facts(user_id="alice")]              # ['Alice lives in Porto']
    [f.text for f in facts.facts(user_id="alice", valid_at=t0)] # what held at t0
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from ..errors import ConflictError, LLMError
from ..messages import Message
from ..stores.base import StoredMessage
from ._factplan import FactChanges, plan_changes
from .facts import (
    AsyncFactExtractor,
    AsyncFactStore,
    Fact,
    FactAdd,
    FactExtractor,
    FactInvalidate,
    FactOperation,
    FactStore,
    FactUpdate,
)
from .factstore import AsyncFactStoreWrapper, MemoryFactStore

__all__ = ["AsyncFacts", "Facts"]

Clock = Callable[[], datetime]
EXTRACT_ROLES = frozenset({"user", "assistant"})


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _messages(units: Sequence[Sequence[StoredMessage]]) -> list[Message]:
    """The evicted messages an extractor reads: user and assistant text (tool plumbing carries no facts)."""
    return [s.message for unit in units for s in unit if s.message.role in EXTRACT_ROLES and s.message.text.strip()]


def _single(changes: FactChanges, op: FactOperation) -> Fact:
    """The fact a single direct operation produced; raises ConflictError if it was rejected."""
    if changes.rejected:
        raise ConflictError(changes.rejected[0].reason)
    if isinstance(op, FactInvalidate):
        return next(f for f in changes.changed if f.id == op.fact_id)
    if changes.added:
        return changes.added[-1]
    return changes.merged[-1]


class _FactsBase:
    def __init__(self, extractor: Any, clock: Clock | None) -> None:
        self.extractor = extractor
        self._clock = clock or _utcnow

    def _plan(
        self,
        operations: Sequence[FactOperation],
        current: Sequence[Fact],
        *,
        user_id: str | None,
        session_id: str | None,
        messages: Sequence[Message],
    ) -> FactChanges:
        times = {m.id: m.created_at for m in messages if m.id is not None and m.created_at is not None}
        return plan_changes(
            operations, current, user_id=user_id, session_id=session_id, now=self._clock(), message_times=times
        )


class Facts(_FactsBase):
    """Facts of every user, over a :class:`FactStore`. An :class:`EvictionSink` when given an extractor."""

    def __init__(
        self, store: FactStore | None = None, *, extractor: FactExtractor | None = None, clock: Clock | None = None
    ) -> None:
        super().__init__(extractor, clock)
        self.store: FactStore = store if store is not None else MemoryFactStore()

    # -- direct writes -----------------------------------------------------------------------
    def add(
        self,
        text: str,
        *,
        user_id: str | None = None,
        subject: str | None = None,
        source_message_ids: Sequence[str] = (),
        valid_from: datetime | None = None,
        session_id: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact:
        """Record a fact; a duplicate of an open fact is merged into it (and returned)."""
        op = FactAdd(text, tuple(source_message_ids), subject, valid_from, confidence, metadata or {})
        return _single(self.apply([op], user_id=user_id, session_id=session_id), op)

    def update(
        self,
        fact_id: str,
        text: str,
        *,
        user_id: str | None = None,
        subject: str | None = None,
        source_message_ids: Sequence[str] = (),
        valid_from: datetime | None = None,
        reason: str = "updated",
        session_id: str | None = None,
    ) -> Fact:
        """End ``fact_id`` and record its new version (returned). Raises ConflictError if it is not open."""
        op = FactUpdate(fact_id, text, tuple(source_message_ids), subject, valid_from, reason)
        return _single(self.apply([op], user_id=user_id, session_id=session_id), op)

    def invalidate(
        self,
        fact_id: str,
        *,
        reason: str,
        user_id: str | None = None,
        replaced_by: str | None = None,
        valid_to: datetime | None = None,
        source_message_ids: Sequence[str] = (),
    ) -> Fact:
        """End ``fact_id`` (returned with its ``valid_to``); nothing is deleted."""
        op = FactInvalidate(fact_id, reason, tuple(source_message_ids), replaced_by, valid_to)
        return _single(self.apply([op], user_id=user_id), op)

    def apply(
        self,
        operations: Sequence[FactOperation],
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        messages: Sequence[Message] = (),
        strict: bool = True,
    ) -> FactChanges:
        """Apply operations in one write. ``strict`` raises ConflictError on any rejected one (nothing written)."""
        current = self.store.list_facts(user_id=user_id, open_only=True)
        changes = self._plan(operations, current, user_id=user_id, session_id=session_id, messages=messages)
        if strict and changes.rejected:
            raise ConflictError(changes.rejected[0].reason)
        if not changes.empty:
            self.store.write_facts(changes.added, changes.changed)
        return changes

    # -- reads -------------------------------------------------------------------------------
    def facts(self, *, user_id: str | None = None, valid_at: datetime | None = None) -> list[Fact]:
        """The user's facts that held at ``valid_at`` (default: now), oldest first."""
        return self.store.list_facts(user_id=user_id, valid_at=valid_at or self._clock())

    def history(self, *, user_id: str | None = None) -> list[Fact]:
        """Every fact the user ever had, ended ones included, oldest first."""
        return self.store.list_facts(user_id=user_id)

    # -- extraction --------------------------------------------------------------------------
    def extract(
        self, messages: Sequence[Message], *, user_id: str | None = None, session_id: str | None = None
    ) -> FactChanges:
        """Ask the extractor about ``messages`` and apply what it proposes; bad operations are skipped."""
        if self.extractor is None:
            raise LLMError("no fact extractor configured")
        if not messages:
            return FactChanges()
        for attempt in range(2):  # one retry: a concurrent writer may have ended a fact we planned against
            current = self.store.list_facts(user_id=user_id, open_only=True)
            try:
                operations = self.extractor.extract(messages, current, user_id=user_id)
            except LLMError:
                raise
            except Exception as exc:
                raise LLMError(f"fact extractor failed: {type(exc).__name__}: {exc}") from exc
            changes = self._plan(operations, current, user_id=user_id, session_id=session_id, messages=messages)
            try:
                if not changes.empty:
                    self.store.write_facts(changes.added, changes.changed)
                return changes
            except ConflictError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def absorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        """EvictionSink: extract facts from evicted units (no-op without an extractor)."""
        if self.extractor is not None:
            self.extract(_messages(units), user_id=user_id, session_id=session_id)

    def close(self) -> None:
        self.store.close()


class AsyncFacts(_FactsBase):
    """The async twin of :class:`Facts`; accepts an async or a sync extractor and store."""

    def __init__(
        self,
        store: AsyncFactStore | FactStore | None = None,
        *,
        extractor: AsyncFactExtractor | FactExtractor | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(extractor, clock)
        if store is None:
            store = AsyncFactStoreWrapper(MemoryFactStore(), offload=False)
        elif isinstance(store, FactStore):
            store = AsyncFactStoreWrapper(store)
        self.store: AsyncFactStore = store

    async def add(
        self,
        text: str,
        *,
        user_id: str | None = None,
        subject: str | None = None,
        source_message_ids: Sequence[str] = (),
        valid_from: datetime | None = None,
        session_id: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact:
        op = FactAdd(text, tuple(source_message_ids), subject, valid_from, confidence, metadata or {})
        return _single(await self.apply([op], user_id=user_id, session_id=session_id), op)

    async def update(
        self,
        fact_id: str,
        text: str,
        *,
        user_id: str | None = None,
        subject: str | None = None,
        source_message_ids: Sequence[str] = (),
        valid_from: datetime | None = None,
        reason: str = "updated",
        session_id: str | None = None,
    ) -> Fact:
        op = FactUpdate(fact_id, text, tuple(source_message_ids), subject, valid_from, reason)
        return _single(await self.apply([op], user_id=user_id, session_id=session_id), op)

    async def invalidate(
        self,
        fact_id: str,
        *,
        reason: str,
        user_id: str | None = None,
        replaced_by: str | None = None,
        valid_to: datetime | None = None,
        source_message_ids: Sequence[str] = (),
    ) -> Fact:
        op = FactInvalidate(fact_id, reason, tuple(source_message_ids), replaced_by, valid_to)
        return _single(await self.apply([op], user_id=user_id), op)

    async def apply(
        self,
        operations: Sequence[FactOperation],
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        messages: Sequence[Message] = (),
        strict: bool = True,
    ) -> FactChanges:
        current = await self.store.list_facts(user_id=user_id, open_only=True)
        changes = self._plan(operations, current, user_id=user_id, session_id=session_id, messages=messages)
        if strict and changes.rejected:
            raise ConflictError(changes.rejected[0].reason)
        if not changes.empty:
            await self.store.write_facts(changes.added, changes.changed)
        return changes

    async def facts(self, *, user_id: str | None = None, valid_at: datetime | None = None) -> list[Fact]:
        return await self.store.list_facts(user_id=user_id, valid_at=valid_at or self._clock())

    async def history(self, *, user_id: str | None = None) -> list[Fact]:
        return await self.store.list_facts(user_id=user_id)

    async def extract(
        self, messages: Sequence[Message], *, user_id: str | None = None, session_id: str | None = None
    ) -> FactChanges:
        if self.extractor is None:
            raise LLMError("no fact extractor configured")
        if not messages:
            return FactChanges()
        for attempt in range(2):
            current = await self.store.list_facts(user_id=user_id, open_only=True)
            try:
                if isinstance(self.extractor, AsyncFactExtractor):
                    operations = await self.extractor.aextract(messages, current, user_id=user_id)
                else:  # a sync extractor may block on the network; keep the loop free
                    operations = await asyncio.to_thread(self.extractor.extract, messages, current, user_id=user_id)
            except LLMError:
                raise
            except Exception as exc:
                raise LLMError(f"fact extractor failed: {type(exc).__name__}: {exc}") from exc
            changes = self._plan(operations, current, user_id=user_id, session_id=session_id, messages=messages)
            try:
                if not changes.empty:
                    await self.store.write_facts(changes.added, changes.changed)
                return changes
            except ConflictError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def aabsorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        if self.extractor is not None:
            await self.extract(_messages(units), user_id=user_id, session_id=session_id)

    async def aclose(self) -> None:
        await self.store.aclose()
