"""``Facts`` and ``AsyncFacts``: write, extract and query facts with temporal validity.

The twins share every decision: each operation is one generator of effects
(:mod:`convmem.longterm.facts._flows`, over the pure planner of
:mod:`convmem.longterm.facts._plan`) that ``Facts`` performs and ``AsyncFacts``
awaits; they differ only in how they call the store and the extractor. Every write reads
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

from ..._effects import adrive, drive
from ...errors import LLMError
from ...messages import Message, StoredMessage
from ._flows import Effect, Flow, Propose, ReadOpen, apply_flow, extract_flow, extractor_failure, single, sink_messages
from ._plan import FactChanges
from .model import (
    AsyncFactExtractor,
    AsyncFactStore,
    Fact,
    FactAdd,
    FactExtractor,
    FactInvalidate,
    FactOperation,
    FactStore,
    FactUpdate,
    query_time,
)
from .store import AsyncFactStoreWrapper, MemoryFactStore

__all__ = ["AsyncFacts", "Facts"]

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _add(
    text: str,
    subject: str | None,
    source_message_ids: Sequence[str],
    valid_from: datetime | None,
    confidence: float | None,
    metadata: Mapping[str, Any] | None,
) -> FactAdd:
    return FactAdd(text, tuple(source_message_ids), subject, valid_from, confidence, metadata or {})


class _FactsBase:
    """The flows' arguments, built once for both twins."""

    def __init__(self, extractor: Any, clock: Clock | None) -> None:
        self.extractor = extractor
        self._clock = clock or _utcnow

    def _apply(
        self,
        operations: Sequence[FactOperation],
        user_id: str | None,
        session_id: str | None,
        messages: Sequence[Message] = (),
        strict: bool = True,
    ) -> Flow[FactChanges]:
        return apply_flow(
            operations, user_id=user_id, session_id=session_id, messages=messages, strict=strict, now=self._clock()
        )

    def _extract(self, messages: Sequence[Message], user_id: str | None, session_id: str | None) -> Flow[FactChanges]:
        if self.extractor is None:
            raise LLMError("no fact extractor configured")
        return extract_flow(messages, user_id=user_id, session_id=session_id, now=self._clock)


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
        op = _add(text, subject, source_message_ids, valid_from, confidence, metadata)
        return single(self.apply([op], user_id=user_id, session_id=session_id), op)

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
        return single(self.apply([op], user_id=user_id, session_id=session_id), op)

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
        return single(self.apply([op], user_id=user_id), op)

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
        return drive(self._apply(operations, user_id, session_id, messages, strict), self._perform)

    # -- reads -------------------------------------------------------------------------------
    def facts(self, *, user_id: str | None = None, valid_at: datetime | None = None) -> list[Fact]:
        """The user's facts that held at ``valid_at`` (default: now), oldest first."""
        return self.store.list_facts(user_id=user_id, valid_at=query_time(valid_at) or self._clock())

    def history(self, *, user_id: str | None = None) -> list[Fact]:
        """Every fact the user ever had, ended ones included, oldest first."""
        return self.store.list_facts(user_id=user_id)

    # -- extraction --------------------------------------------------------------------------
    def extract(
        self, messages: Sequence[Message], *, user_id: str | None = None, session_id: str | None = None
    ) -> FactChanges:
        """Ask the extractor about ``messages`` and apply what it proposes; bad operations are skipped."""
        return drive(self._extract(messages, user_id, session_id), self._perform)

    def absorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        """EvictionSink: extract facts from evicted units (no-op without an extractor)."""
        if self.extractor is not None:
            self.extract(sink_messages(units), user_id=user_id, session_id=session_id)

    def close(self) -> None:
        self.store.close()

    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, ReadOpen):
            return self.store.list_facts(user_id=effect.user_id, open_only=True)
        if isinstance(effect, Propose):
            try:
                return self.extractor.extract(effect.messages, effect.current, user_id=effect.user_id)
            except LLMError:
                raise
            except Exception as exc:
                raise extractor_failure(exc) from exc
        return self.store.write_facts(effect.added, effect.changed)


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
        op = _add(text, subject, source_message_ids, valid_from, confidence, metadata)
        return single(await self.apply([op], user_id=user_id, session_id=session_id), op)

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
        return single(await self.apply([op], user_id=user_id, session_id=session_id), op)

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
        return single(await self.apply([op], user_id=user_id), op)

    async def apply(
        self,
        operations: Sequence[FactOperation],
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        messages: Sequence[Message] = (),
        strict: bool = True,
    ) -> FactChanges:
        return await adrive(self._apply(operations, user_id, session_id, messages, strict), self._perform)

    async def facts(self, *, user_id: str | None = None, valid_at: datetime | None = None) -> list[Fact]:
        return await self.store.list_facts(user_id=user_id, valid_at=query_time(valid_at) or self._clock())

    async def history(self, *, user_id: str | None = None) -> list[Fact]:
        return await self.store.list_facts(user_id=user_id)

    async def extract(
        self, messages: Sequence[Message], *, user_id: str | None = None, session_id: str | None = None
    ) -> FactChanges:
        return await adrive(self._extract(messages, user_id, session_id), self._perform)

    async def aabsorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        if self.extractor is not None:
            await self.extract(sink_messages(units), user_id=user_id, session_id=session_id)

    async def aclose(self) -> None:
        await self.store.aclose()

    async def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, ReadOpen):
            return await self.store.list_facts(user_id=effect.user_id, open_only=True)
        if isinstance(effect, Propose):
            try:
                if isinstance(self.extractor, AsyncFactExtractor):
                    return await self.extractor.aextract(effect.messages, effect.current, user_id=effect.user_id)
                # A sync extractor may block on the network; keep the loop free.
                return await asyncio.to_thread(
                    self.extractor.extract, effect.messages, effect.current, user_id=effect.user_id
                )
            except LLMError:
                raise
            except Exception as exc:
                raise extractor_failure(exc) from exc
        return await self.store.write_facts(effect.added, effect.changed)
