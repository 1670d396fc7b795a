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
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ._core import MemoryCore, MessageLike, Stats
from ._flow import Absorb, AsyncEvictionSink, Effect, EvictionSink, SaveState, Summarize, _stored, describe, settle
from .errors import ConfigurationError
from .longterm.blocks import Block, Turn
from .messages import Message
from .policy.assembly import BlockText, Overflow
from .policy.context import Context
from .policy.repair import synthetic_results
from .policy.strategies import Plan, Strategy
from .stores.base import AsyncStore, MessageStatus, SessionState, Store, status_of
from .stores.memory import AsyncMemoryStore, MemoryStore
from .tokens import ModelInfo, TokenCounter, cost, lookup_model
from .usage import ModelUsage, Usage, parse_usage

__all__ = ["AsyncMemory", "Memory"]

InputLike = MessageLike | str | Sequence[MessageLike] | None
T = TypeVar("T")


class _Base:
    """Configuration and the pure read-only API shared by both twins."""

    def __init__(
        self,
        model: str | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        max_tokens: int | None = None,
        max_output_tokens: int | None = None,
        counter: TokenCounter | str | None = None,
        strategy: str | Strategy = "token_budget",
        strategy_options: Mapping[str, Any] | None = None,
        summarizer: Any = None,
        on_overflow: Overflow = "truncate",
        summary_max_tokens: int | None = None,
        blocks: Sequence[Block] = (),
        pinned_context: Callable[[], str] | None = None,
        block_template: Callable[[Sequence[BlockText]], str] | None = None,
        sinks: Sequence[Any] = (),
        format: str = "openai",
    ) -> None:
        options = dict(strategy_options or {})
        default_summarizer = None
        if isinstance(strategy, str) and strategy in ("summary_buffer", "compaction"):
            if summarizer is None:
                # Offline and pure (it imports only the model layer): the documented extractive default.
                from .llm.extractive import ExtractiveSummarizer

                summarizer = default_summarizer = ExtractiveSummarizer()
            options["summarizer"] = summarizer
        elif summarizer is not None:
            raise ConfigurationError("a summarizer is only used by the summary_buffer and compaction strategies")
        self._core = MemoryCore(
            model=model,
            max_tokens=max_tokens,
            max_output_tokens=max_output_tokens,
            counter=counter,
            strategy=strategy,
            strategy_options=options,
            on_overflow=on_overflow,
            summary_max_tokens=summary_max_tokens,
            blocks=blocks,
            pinned_context=pinned_context,
            block_template=block_template,
        )
        if default_summarizer is not None:
            default_summarizer.bind(self._core.counter.count_text)
        self.session_id = session_id or uuid.uuid4().hex
        self.user_id = user_id
        self.model = model
        self.format = format
        self._sinks = list(sinks)

    @property
    def budget(self) -> int:
        return self._core.budget

    @property
    def reserved_output(self) -> int:
        return self._core.reserve

    @property
    def counter(self) -> TokenCounter:
        return self._core.counter

    @property
    def strategy(self) -> Strategy:
        return self._core.strategy

    def stats(self) -> Stats:
        """Tokens in context, archived and summarized counts, summaries made, tokens saved, usage, warnings."""
        return self._core.stats()

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of the newest assistant message's calls that still await results, in call order."""
        pending = self._core.window.pending
        if pending is None:
            return []
        return [call.id for call in pending.entries[0].message.tool_calls if call.id in pending.pending]

    def _context(self, input: InputLike, format: str | None) -> Context:
        core = self._core
        inputs = core.inputs(input) if input is not None else []
        if not core.blocks:
            return core.context(inputs, format or self.format, [])
        query = inputs[-1][0].text if inputs else _last_user_text(core)
        turn = Turn(query, self.session_id, self.user_id, core.window_start, datetime.now(timezone.utc))
        return core.context(inputs, format or self.format, core.block_texts(query, turn))

    def _usage(self, usage: Any, model: str | None = None) -> Usage:
        parsed = parse_usage(usage)
        counts = self._core.counts
        counts["input_tokens"] += parsed.input_tokens
        counts["output_tokens"] += parsed.output_tokens
        counts["cached_input_tokens"] += parsed.cached_input_tokens
        info = self._core.info if model is None else _priced(model)
        if info is not None and info.input_price_per_mtok is not None:  # open-weight models have no list price
            counts["cost_usd"] += cost(info, parsed.input_tokens, parsed.output_tokens, parsed.cached_input_tokens)
        return parsed

    def _charge(self, outcome: object) -> object:
        """Add the usage a summarizer reports on its result or its error (``.usage``: ModelUsage items)."""
        for item in getattr(outcome, "usage", None) or ():
            if isinstance(item, ModelUsage):
                self._usage(item.usage, item.model)
        return outcome

    def _clear_plan(self, keep_system: bool) -> Plan:
        core = self._core
        if not keep_system:
            last = core.counts["last_seq"]
            core.window.pinned.clear()
            core.window.pinned_tokens = 0
            core.state = _with(core.state, pinned_start=(last + 1) if last is not None else 0)
        return Plan(evict=len(core.window.units), fold=False, reason="clear")

    def _filter(self, status: MessageStatus | Iterable[MessageStatus] | None) -> Callable[[Any], bool]:
        wanted = None if status is None else ({status} if isinstance(status, str) else set(status))
        state = self._core.state
        return lambda stored: wanted is None or status_of(stored, state) in wanted


class Memory(_Base):
    """A conversation memory with a synchronous API. See the module docstring."""

    def __init__(self, model: str | None = None, *, store: Store | str | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        if isinstance(store, str):
            from .stores import open_store  # "sqlite", "sqlite:///path.db", "files:///dir", "memory"

            store = open_store(store)
        self.store: Store = store if store is not None else MemoryStore()
        summarizer = self._core.strategy.summarizer
        if summarizer is not None and not hasattr(summarizer, "summarize"):
            raise ConfigurationError("this summarizer is async-only; use AsyncMemory or a sync summarizer")

    @classmethod
    def open(cls, session_id: str, *, store: Store, user_id: str | None = None, **options: Any) -> Memory:
        """Reopen a stored session (a unique id prefix is enough) with its exact state."""
        info = store.get_session(session_id, user_id=user_id)
        memory = cls(options.pop("model", info.model), store=store, session_id=info.id, user_id=user_id, **options)
        memory._core.restore(store.load(info.id, user_id=user_id, unfolded_limit=_unfolded_limit(memory)))
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


class AsyncMemory(_Base):
    """The async twin of :class:`Memory`: the same behaviour, awaited. It never calls ``asyncio.run``."""

    def __init__(self, model: str | None = None, *, store: AsyncStore | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self.store: AsyncStore = store if store is not None else AsyncMemoryStore()

    @classmethod
    async def open(
        cls, session_id: str, *, store: AsyncStore, user_id: str | None = None, **options: Any
    ) -> AsyncMemory:
        info = await store.get_session(session_id, user_id=user_id)
        memory = cls(options.pop("model", info.model), store=store, session_id=info.id, user_id=user_id, **options)
        memory._core.restore(await store.load(info.id, user_id=user_id, unfolded_limit=_unfolded_limit(memory)))
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


def _priced(model: str) -> ModelInfo | None:
    try:
        return lookup_model(model)
    except KeyError:  # a local or unlisted summarizer model: its tokens count, its cost is unknown
        return None


def _unfolded_limit(memory: _Base) -> int:
    return 10_000 if memory._core.strategy.summarizer is not None else 0


def _last_user_text(core: MemoryCore) -> str | None:
    for unit in reversed(core.window.units):
        if unit.kind == "user":
            return unit.entries[0].message.text
    return None


def _with(state: SessionState, **changes: Any) -> SessionState:
    from dataclasses import replace

    return replace(state, **changes)
