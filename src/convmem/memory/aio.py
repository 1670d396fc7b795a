"""``AsyncMemory``: the async twin of :class:`convmem.memory.Memory`.

It drives the same write flows (:mod:`convmem.memory._flows`) as ``Memory``,
awaiting each effect, under an ``asyncio.Lock``; so many tasks may share one
memory (``asyncio.gather`` of adds stores each message once, in the order the
lock admits them). It never calls ``asyncio.run``; a sync summarizer or sink
runs in a worker thread so it cannot block the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable
from typing import Any

from ..errors import InvalidMessageError, SessionNotFoundError
from ..formats import parse_reply
from ..messages import Message
from ..policy.context import Context
from ..policy.repair import synthetic_results
from ..session import MessageStatus
from ..stores import aopen_store, open_async_store_now
from ..stores._writes import lost
from ..stores.base import AppendRequest, AsyncStore
from ..stores.memory import AsyncMemoryStore
from ..usage import Usage, parse_usage
from . import _flows as flow
from ._base import InputLike, MemoryBase, open_options
from ._flows import Absorb, Append, AsyncEvictionSink, Delete, Effect, EvictionSink, Load, Read, SaveState, Summarize
from ._flows import describe as _describe
from ._intake import MessageLike

__all__ = ["AsyncMemory"]

_REPAIR_TRIES = 3


class AsyncMemory(MemoryBase):
    """The async twin of :class:`Memory`: the same behaviour, awaited. It never calls ``asyncio.run``."""

    def __init__(self, model: str | None = None, *, store: AsyncStore | str | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self._owns_store = store is None or isinstance(store, str)
        if isinstance(store, str):
            store = open_async_store_now(store)  # a constructor cannot await; AsyncMemory.open can
        self.store: AsyncStore = store if store is not None else AsyncMemoryStore()
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls, session_id: str, *, store: AsyncStore | str, user_id: str | None = None, **options: Any
    ) -> AsyncMemory:
        """Reopen a stored session; see :meth:`Memory.open`."""
        if isinstance(store, str):
            opened = await aopen_store(store)
            try:
                memory = await cls.open(session_id, store=opened, user_id=user_id, **options)
            except BaseException:
                await opened.aclose()
                raise
            memory._owns_store = True
            return memory
        info = await store.get_session(session_id, user_id=user_id)
        peek = await store.load(info.id, user_id=user_id)
        merged, unfolded = open_options(peek.state, options, info.model)
        loaded = await store.load(info.id, user_id=user_id, unfolded_limit=unfolded) if unfolded else peek
        memory = cls(store=store, session_id=info.id, user_id=user_id, **merged)
        memory._restore(loaded)
        return memory

    async def add(self, message: MessageLike) -> Message:
        return (await self.add_many([message]))[0]

    async def add_many(self, messages: Iterable[MessageLike]) -> list[Message]:
        async with self._lock:
            prepared = self._core.prepare(messages, check=False)  # the flow checks it against the window
            if not prepared:
                return []
            result: list[Message] = await self._drive(flow.add(self._core, prepared, has_sinks=bool(self._sinks)))
            return result

    async def context(self, input: InputLike = None, *, format: str | None = None) -> Context:
        async with self._lock:
            return self._context(input, format)

    async def refresh(self) -> None:
        async with self._lock:
            await self._drive(flow.refresh(self._core))

    async def messages(self, status: MessageStatus | Iterable[MessageStatus] | None = None) -> list[Message]:
        async with self._lock:
            keep = self._filter(status)
            try:
                rows = await self.store.messages(self.session_id, user_id=self.user_id)
            except SessionNotFoundError:
                if self._core.next_seq:
                    raise lost(self.session_id, self._core.next_seq) from None
                return []
            return [s.message for s in rows if keep(s)]

    async def clear(self, *, keep_system: bool = True) -> None:
        async with self._lock:
            await self._drive(
                flow.save(
                    self._core, lambda: self._clear(keep_system), unpins=not keep_system, has_sinks=bool(self._sinks)
                )
            )

    async def rollback_incomplete(self) -> list[Message]:
        async with self._lock:
            removed: list[Message] = await self._drive(flow.rollback(self._core))
            return removed

    async def repair(self) -> list[Message]:
        async with self._lock:
            for _ in range(_REPAIR_TRIES):
                pending = self._core.window.pending
                if pending is None:
                    return []
                prepared = self._core.prepare(synthetic_results(pending))
                try:
                    added: list[Message] = await self._drive(
                        flow.add(self._core, prepared, has_sinks=bool(self._sinks))
                    )
                    return added
                except InvalidMessageError:
                    if self._core.window.pending is pending:
                        raise
            return []

    async def record_usage(self, usage: Any) -> Usage:
        parsed = parse_usage(usage)
        async with self._lock:
            self._learn(parsed)  # once, whatever the save below retries
            await self._drive(flow.save(self._core, lambda: self._add_usage(parsed)))
        return parsed

    async def add_response(self, response: Any) -> list[Message]:
        """Store a provider's reply and record its usage (see ``Memory.add_response``)."""
        messages, usage = parse_reply(response)
        added = await self.add_many(messages) if messages else []
        if usage is not None:
            await self.record_usage(usage)
        return added

    async def aclose(self) -> None:
        """Close the store if this memory created it."""
        if self._owns_store:
            await self.store.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _drive(self, steps: Generator[Effect, Any, Any]) -> Any:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = await self._perform(effect), None
            except BaseException as exc:  # thrown back: the flow undoes what it staged
                value, error = None, exc

    async def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Summarize):
            request = effect.request
            summarizer: Any = self._core.strategy.summarizer
            try:
                if hasattr(summarizer, "asummarize"):
                    text = await summarizer.asummarize(request.previous, request.messages, request.max_tokens)
                else:  # a sync summarizer may block on the network; keep the event loop free
                    text = await asyncio.to_thread(
                        summarizer.summarize, request.previous, request.messages, request.max_tokens
                    )
                return self._charge(text)
            except Exception as exc:  # any summarizer failure must keep the data (invariant 8)
                return self._charge(exc)
        if isinstance(effect, Absorb):
            await self._absorb(effect.units)
            return None
        try:
            return self._exact(await self._store_effect(effect))
        except SessionNotFoundError:
            if self._core.next_seq:
                raise lost(self.session_id, self._core.next_seq) from None
            raise

    async def _store_effect(self, effect: Effect) -> Any:
        store, session_id, user_id = self.store, self.session_id, self.user_id
        if isinstance(effect, Append):
            return await store.append(
                AppendRequest(
                    session_id,
                    effect.messages,
                    user_id=user_id,
                    model=self.model,
                    expected_seq=effect.expected_seq,
                    expected_version=effect.expected_version,
                    state=effect.state,
                )
            )
        if isinstance(effect, SaveState):
            version = self._core.state.version
            return await store.save_state(session_id, effect.state, expected_version=version, user_id=user_id)
        if isinstance(effect, Load):
            return await store.load(session_id, user_id=user_id, unfolded_limit=effect.unfolded_limit)
        if isinstance(effect, Read):
            return await store.messages(session_id, user_id=user_id, from_seq=effect.from_seq, to_seq=effect.to_seq)
        assert isinstance(effect, Delete)
        await store.delete_messages(session_id, effect.seqs, user_id=user_id, expected_seq=effect.expected_seq)
        return None

    async def _absorb(self, units: list[Any]) -> None:
        for sink in self._sinks:
            try:
                if isinstance(sink, AsyncEvictionSink):
                    await sink.aabsorb(units, session_id=self.session_id, user_id=self.user_id)
                elif isinstance(sink, EvictionSink):
                    sink.absorb(units, session_id=self.session_id, user_id=self.user_id)
            except Exception as exc:  # the units are archived already; a sink failure loses nothing
                self._core.warn(f"eviction sink {type(sink).__name__} failed: {_describe(exc)}")
