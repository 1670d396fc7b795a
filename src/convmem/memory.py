"""``Memory`` and ``AsyncMemory``: one conversation's memory, persisted in a store.

Both twins run the same I/O-free core (:mod:`convmem._core`) and the same
eviction flow (:mod:`convmem._flow`); they differ only in how they perform
the flow's effects. Every turn::

    add(message)   validate -> count once -> store.append (one write) -> push into the window
                   -> strategy plan -> archive / fold into the running summary -> save state
    context(input) blocks -> assembly within the exact budget -> render for the provider

Example::

    from convmem import Memory

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory.add({"role": "system", "content": "You are helpful."})
    memory.add({"role": "user", "content": "Hi!"})
    request = memory.context().request()        # {"messages": [...]} within budget
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from ._facade import InputLike, MemoryBase, open_options
from ._flow import Absorb, AsyncEvictionSink, Effect, EvictionSink, SaveState, Summarize, _stored, describe, settle
from ._intake import MessageLike
from .errors import ConfigurationError
from .messages import Message
from .policy.context import Context
from .policy.repair import synthetic_results
from .stores import aopen_store, open_async_store_now, open_store
from .stores.base import AsyncStore, MessageStatus, Store
from .stores.memory import AsyncMemoryStore, MemoryStore
from .usage import Usage

__all__ = ["AsyncMemory", "Memory"]


class Memory(MemoryBase):
    """A conversation memory with a synchronous API. See the module docstring."""

    def __init__(self, model: str | None = None, *, store: Store | str | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self._owns_store = store is None or isinstance(store, str)  # what this memory opens, it closes
        if isinstance(store, str):
            store = open_store(store)  # "sqlite", "sqlite:///path.db", "files:///dir", "postgresql://...", ...
        self.store: Store = store if store is not None else MemoryStore()
        summarizer = self._core.strategy.summarizer
        if summarizer is not None and not hasattr(summarizer, "summarize"):
            raise ConfigurationError("this summarizer is async-only; use AsyncMemory or a sync summarizer")

    @classmethod
    def open(cls, session_id: str, *, store: Store | str, user_id: str | None = None, **options: Any) -> Memory:
        """Reopen a stored session (a unique id prefix is enough) with its exact state.

        ``store`` is a store or a URL (the memory then owns and closes what it opened). Without options it
        reuses the budget and strategy the session was saved with; options given here win.
        """
        if isinstance(store, str):
            opened = open_store(store)
            try:
                memory = cls.open(session_id, store=opened, user_id=user_id, **options)
            except BaseException:
                opened.close()
                raise
            memory._owns_store = True
            return memory
        info = store.get_session(session_id, user_id=user_id)
        peek = store.load(info.id, user_id=user_id)
        merged, unfolded = open_options(peek.state, options, info.model)
        loaded = store.load(info.id, user_id=user_id, unfolded_limit=unfolded) if unfolded else peek
        memory = cls(store=store, session_id=info.id, user_id=user_id, **merged)
        memory._restore(loaded)
        return memory

    def add(self, message: MessageLike) -> Message:
        """Add one message (a Message, or an OpenAI, Anthropic or Responses dict); returns it as stored."""
        return self.add_many([message])[0]

    def add_many(self, messages: Iterable[MessageLike]) -> list[Message]:
        """Add a batch in one store write; nothing is stored if any message is invalid."""
        core = self._core
        prepared = core.prepare(messages)
        if not prepared:
            return []
        seqs = self.store.append(self.session_id, prepared, user_id=self.user_id, model=self.model)
        core.push(seqs, prepared)
        core.note_seqs(seqs)
        if core.plan().evict:
            self._drive(settle(core, has_sinks=bool(self._sinks)))
        return [message for message, _ in prepared]

    def context(self, input: InputLike = None, *, format: str | None = None) -> Context:
        """The messages for the next request, within the budget, with an account of them."""
        return self._context(input, format)

    def messages(self, status: MessageStatus | Iterable[MessageStatus] | None = None) -> list[Message]:
        """Every stored message, oldest first, optionally only those of the given status(es)."""
        if self._core.counts["last_seq"] is None:
            return []  # the session is created lazily, on its first message
        keep = self._filter(status)
        return [s.message for s in self.store.messages(self.session_id, user_id=self.user_id) if keep(s)]

    def clear(self, *, keep_system: bool = True) -> None:
        """Archive the whole window (nothing is deleted); with ``keep_system=False`` unpin system messages too."""
        core = self._core
        units = core.evict(self._clear_plan(keep_system))
        if core.counts["last_seq"] is None:
            return
        if units and self._sinks:  # cleared units are archived like evicted ones: long-term memory gets them too
            self._perform(Absorb(_stored(units)))
        core.state = self.store.save_state(
            self.session_id, core.state_to_save(), expected_version=core.state.version, user_id=self.user_id
        )

    def rollback_incomplete(self) -> list[Message]:
        """Delete a trailing assistant tool call that has no (or not all) results; returns what was removed."""
        pending = self._core.window.pending
        if pending is None:
            return []
        self._core.window.pop_newest()
        self.store.delete_messages(self.session_id, [e.seq for e in pending.entries], user_id=self.user_id)
        return pending.messages

    def repair(self) -> list[Message]:
        """Answer unanswered trailing tool calls with marked synthetic results; returns the added messages."""
        pending = self._core.window.pending
        return self.add_many(synthetic_results(pending)) if pending is not None else []

    def record_usage(self, usage: Any) -> Usage:
        """Add a provider's usage (OpenAI, Responses or Anthropic) to the stats and the cost."""
        parsed = self._usage(usage)
        self._save()
        return parsed

    def close(self) -> None:
        """Close the store if this memory opened it (a store passed in belongs to the caller)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _save(self) -> None:
        core = self._core
        if core.counts["last_seq"] is None:
            return  # the session does not exist until its first message
        core.state = self.store.save_state(
            self.session_id, core.state_to_save(), expected_version=core.state.version, user_id=self.user_id
        )

    def _drive(self, flow: Any) -> None:
        try:
            effect = next(flow)
            while True:
                effect = flow.send(self._perform(effect))
        except StopIteration:
            pass

    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Summarize):
            request = effect.request
            try:
                return self._charge(
                    self._core.strategy.summarizer.summarize(  # type: ignore[union-attr]
                        request.previous, request.messages, request.max_tokens
                    )
                )
            except Exception as exc:  # any summarizer failure must keep the data (invariant 8)
                return self._charge(exc)
        if isinstance(effect, SaveState):
            return self.store.save_state(
                self.session_id, effect.state, expected_version=self._core.state.version, user_id=self.user_id
            )
        for sink in self._sinks:
            try:
                sink.absorb(effect.units, session_id=self.session_id, user_id=self.user_id)
            except Exception as exc:  # the units are archived already; a sink failure loses nothing
                self._core.warn(f"eviction sink {type(sink).__name__} failed: {describe(exc)}")
        return None


class AsyncMemory(MemoryBase):
    """The async twin of :class:`Memory`: the same behaviour, awaited. It never calls ``asyncio.run``."""

    def __init__(self, model: str | None = None, *, store: AsyncStore | str | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self._owns_store = store is None or isinstance(store, str)
        if isinstance(store, str):
            store = open_async_store_now(store)  # a constructor cannot await; AsyncMemory.open can
        self.store: AsyncStore = store if store is not None else AsyncMemoryStore()

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
        core = self._core
        prepared = core.prepare(messages)
        if not prepared:
            return []
        seqs = await self.store.append(self.session_id, prepared, user_id=self.user_id, model=self.model)
        core.push(seqs, prepared)
        core.note_seqs(seqs)
        if core.plan().evict:
            await self._drive(settle(core, has_sinks=bool(self._sinks)))
        return [message for message, _ in prepared]

    async def context(self, input: InputLike = None, *, format: str | None = None) -> Context:
        return self._context(input, format)

    async def messages(self, status: MessageStatus | Iterable[MessageStatus] | None = None) -> list[Message]:
        if self._core.counts["last_seq"] is None:
            return []
        keep = self._filter(status)
        return [s.message for s in await self.store.messages(self.session_id, user_id=self.user_id) if keep(s)]

    async def clear(self, *, keep_system: bool = True) -> None:
        core = self._core
        units = core.evict(self._clear_plan(keep_system))
        if core.counts["last_seq"] is None:
            return
        if units and self._sinks:
            await self._perform(Absorb(_stored(units)))
        core.state = await self.store.save_state(
            self.session_id, core.state_to_save(), expected_version=core.state.version, user_id=self.user_id
        )

    async def rollback_incomplete(self) -> list[Message]:
        pending = self._core.window.pending
        if pending is None:
            return []
        self._core.window.pop_newest()
        await self.store.delete_messages(self.session_id, [e.seq for e in pending.entries], user_id=self.user_id)
        return pending.messages

    async def repair(self) -> list[Message]:
        pending = self._core.window.pending
        return await self.add_many(synthetic_results(pending)) if pending is not None else []

    async def record_usage(self, usage: Any) -> Usage:
        parsed = self._usage(usage)
        core = self._core
        if core.counts["last_seq"] is not None:
            core.state = await self.store.save_state(
                self.session_id, core.state_to_save(), expected_version=core.state.version, user_id=self.user_id
            )
        return parsed

    async def aclose(self) -> None:
        """Close the store if this memory created it."""
        if self._owns_store:
            await self.store.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _drive(self, flow: Any) -> None:
        try:
            effect = next(flow)
            while True:
                effect = flow.send(await self._perform(effect))
        except StopIteration:
            pass

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
        if isinstance(effect, SaveState):
            return await self.store.save_state(
                self.session_id, effect.state, expected_version=self._core.state.version, user_id=self.user_id
            )
        assert isinstance(effect, Absorb)
        for sink in self._sinks:
            try:
                if isinstance(sink, AsyncEvictionSink):
                    await sink.aabsorb(effect.units, session_id=self.session_id, user_id=self.user_id)
                elif isinstance(sink, EvictionSink):
                    sink.absorb(effect.units, session_id=self.session_id, user_id=self.user_id)
            except Exception as exc:  # the units are archived already; a sink failure loses nothing
                self._core.warn(f"eviction sink {type(sink).__name__} failed: {describe(exc)}")
        return None
