"""``Memory`` and ``AsyncMemory``: one conversation's memory, persisted in a store.

Both twins run the same I/O-free core (:mod:`convmem.memory._core`) and the same
write flows (:mod:`convmem.memory._flows`); they differ only in how they perform
the flows' effects. Every turn::

    add(message)   validate -> count once -> push into the window -> strategy plan -> evict
                   -> store.append: the messages and the state they imply, in one write, under this
                      writer's view of the session (stale: catch up and decide again)
                   -> fold the archived units into the running summary -> save state
    context(input) blocks -> assembly within the exact budget -> render for the provider

Each operation holds the memory's lock (a ``threading.RLock``; an
``asyncio.Lock`` in ``AsyncMemory``), so one memory can serve many threads
or tasks. Several memories (processes) can share one session: each catches
up with what the others appended before it writes (``refresh()`` does it on
demand), so they converge, and the stored order is always a valid
conversation.

Example::

    from convmem import Memory

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory.add({"role": "system", "content": "You are helpful."})
    memory.add({"role": "user", "content": "Hi!"})
    request = memory.context().request()        # {"messages": [...]} within budget
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable
from typing import Any

from ..errors import ConfigurationError, InvalidMessageError, SessionNotFoundError
from ..formats import parse_reply
from ..messages import Message, StoredMessage
from ..policy.context import Context
from ..policy.repair import synthetic_results
from ..session import MessageStatus
from ..stores import open_store
from ..stores._writes import lost
from ..stores.base import Store
from ..stores.memory import MemoryStore
from ..usage import Stats, Usage, parse_usage
from . import _flows as flow
from ._base import InputLike, MemoryBase, open_options
from ._flows import (  # AsyncEvictionSink and EvictionSink are public: users implement them
    Absorb,
    Append,
    AsyncEvictionSink,
    Delete,
    Effect,
    EvictionSink,
    Load,
    Read,
    SaveState,
    Summarize,
)
from ._flows import describe as _describe
from ._intake import MessageLike
from .aio import AsyncMemory

__all__ = ["AsyncEvictionSink", "AsyncMemory", "EvictionSink", "Memory"]

_REPAIR_TRIES = 3


class Memory(MemoryBase):
    """A conversation memory with a synchronous API. See the module docstring."""

    def __init__(self, model: str | None = None, *, store: Store | str | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self._owns_store = store is None or isinstance(store, str)  # what this memory opens, it closes
        if isinstance(store, str):
            store = open_store(store)  # "sqlite", "sqlite:///path.db", "files:///dir", "postgresql://...", ...
        self.store: Store = store if store is not None else MemoryStore()
        self._lock = threading.RLock()
        summarizer = self._core.strategy.summarizer
        if summarizer is not None and not hasattr(summarizer, "summarize"):
            raise ConfigurationError("this summarizer is async-only; use AsyncMemory or a sync summarizer")

    @classmethod
    def open(cls, session_id: str, *, store: Store | str, user_id: str | None = None, **options: Any) -> Memory:
        """Reopen a stored session (a unique id prefix is enough) with its exact state.

        ``store`` is a store or a URL (the memory then owns and closes what it opened). Without options it
        reuses the budget, reserve and strategy the session was created with; options given here win.
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
        """Add a batch in one store write, with the state it implies: all of it is stored, or nothing.

        A batch whose ids are all stored already with the same content (a retry)
        stores nothing and returns the stored messages.
        """
        with self._lock:
            prepared = self._core.prepare(messages, check=False)  # the flow checks it against the window
            if not prepared:
                return []
            added: list[Message] = self._drive(flow.add(self._core, prepared, has_sinks=bool(self._sinks)))
            return added

    def context(self, input: InputLike = None, *, format: str | None = None) -> Context:
        """The messages for the next request, within the budget, with an account of them."""
        with self._lock:
            return self._context(input, format)

    def stats(self) -> Stats:
        """Tokens in context, archived and summarized counts, summaries made, tokens saved, usage, warnings."""
        with self._lock:  # a consistent reading while another thread adds
            return super().stats()

    def refresh(self) -> None:
        """Catch up with what other writers (processes) stored in this session since this memory last read it."""
        with self._lock:
            self._drive(flow.refresh(self._core))

    def messages(self, status: MessageStatus | Iterable[MessageStatus] | None = None) -> list[Message]:
        """Every stored message, oldest first, optionally only those of the given status(es)."""
        with self._lock:
            keep = self._filter(status)
            try:
                return [s.message for s in self.store.messages(self.session_id, user_id=self.user_id) if keep(s)]
            except SessionNotFoundError:
                if self._core.next_seq:
                    raise lost(self.session_id, self._core.next_seq) from None
                return []  # the session is created lazily, on its first message

    def clear(self, *, keep_system: bool = True) -> None:
        """Archive the whole window (nothing is deleted); with ``keep_system=False`` unpin system messages too."""
        with self._lock:
            self._drive(
                flow.save(
                    self._core, lambda: self._clear(keep_system), unpins=not keep_system, has_sinks=bool(self._sinks)
                )
            )

    def rollback_incomplete(self) -> list[Message]:
        """Delete a trailing assistant tool call that has no (or not all) results; returns what was removed."""
        with self._lock:
            removed: list[Message] = self._drive(flow.rollback(self._core))
            return removed

    def repair(self) -> list[Message]:
        """Answer unanswered trailing tool calls with marked synthetic results; returns the added messages.

        Any writer may call it, e.g. when the writer that made the calls crashed before their results.
        """
        with self._lock:
            for _ in range(_REPAIR_TRIES):
                pending = self._core.window.pending
                if pending is None:
                    return []
                prepared = self._core.prepare(synthetic_results(pending))
                try:
                    added: list[Message] = self._drive(flow.add(self._core, prepared, has_sinks=bool(self._sinks)))
                    return added
                except InvalidMessageError:
                    if self._core.window.pending is pending:
                        raise
                    # Another writer answered or removed the calls meanwhile: look again.
            return []

    def record_usage(self, usage: Any) -> Usage:
        """Add a provider's usage (OpenAI, Responses or Anthropic) to the stats and the cost."""
        parsed = parse_usage(usage)
        with self._lock:
            self._learn(parsed)  # once, whatever the save below retries
            self._drive(flow.save(self._core, lambda: self._add_usage(parsed)))
        return parsed

    def add_response(self, response: Any) -> list[Message]:
        """Store a provider's reply as it comes, and record its usage; returns the messages stored.

        ``response`` is an OpenAI ``ChatCompletion``, an Anthropic ``Message`` or a Responses
        ``Response`` (the SDK object or its dict). The assistant output is stored (text, tool calls,
        refusal, reasoning and thinking kept for the round trip; reply-only fields such as ids and
        annotations are kept in ``extra`` and never sent again), then its usage goes to the stats and
        the cost, cached and cache-write tokens at the registry's cached prices.
        """
        messages, usage = parse_reply(response)
        with self._lock:
            added = self.add_many(messages) if messages else []
            if usage is not None:
                self.record_usage(usage)
        return added

    def close(self) -> None:
        """Close the store if this memory opened it (a store passed in belongs to the caller)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drive(self, steps: Generator[Effect, Any, Any]) -> Any:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = self._perform(effect), None
            except BaseException as exc:  # thrown back: the flow undoes what it staged
                value, error = None, exc

    def _perform(self, effect: Effect) -> Any:
        store, session_id, user_id = self.store, self.session_id, self.user_id
        if isinstance(effect, Append):
            return store.append(
                session_id,
                effect.messages,
                user_id=user_id,
                model=self.model,
                expected_seq=effect.expected_seq,
                expected_version=effect.expected_version,
                state=effect.state,
            )
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
        if isinstance(effect, Absorb):
            self._absorb(effect.units)
            return None
        return self._scoped(
            lambda: _stored_effect(store, effect, session_id, user_id, self._core.state.version),
        )

    def _scoped(self, call: Callable[[], Any]) -> Any:
        try:
            return self._exact(call())
        except SessionNotFoundError:
            if self._core.next_seq:
                raise lost(self.session_id, self._core.next_seq) from None
            raise

    def _absorb(self, units: list[list[StoredMessage]]) -> None:
        for sink in self._sinks:
            try:
                sink.absorb(units, session_id=self.session_id, user_id=self.user_id)
            except Exception as exc:  # the units are archived already; a sink failure loses nothing
                self._core.warn(f"eviction sink {type(sink).__name__} failed: {_describe(exc)}")


def _stored_effect(store: Store, effect: Effect, session_id: str, user_id: str | None, version: int) -> Any:
    """Perform a Load, Read, Delete or SaveState on a sync store."""
    if isinstance(effect, SaveState):
        return store.save_state(session_id, effect.state, expected_version=version, user_id=user_id)
    if isinstance(effect, Load):
        return store.load(session_id, user_id=user_id, unfolded_limit=effect.unfolded_limit)
    if isinstance(effect, Read):
        return list(store.messages(session_id, user_id=user_id, from_seq=effect.from_seq, to_seq=effect.to_seq))
    assert isinstance(effect, Delete)
    store.delete_messages(session_id, effect.seqs, user_id=user_id, expected_seq=effect.expected_seq)
    return None
