"""``Memory`` and ``AsyncMemory``: one conversation's memory, persisted in a store.

The package is the composition root over an I/O-free core. The twins
(``Memory`` here, ``AsyncMemory`` in :mod:`~convmem.memory.aio`) share their
constructor and reads (:mod:`~convmem.memory._base`) and every decision: each
operation is a flow (:mod:`~convmem.memory._flows`) over the core
(:mod:`~convmem.memory._core`), and a twin only performs its effects, sync or
awaited. Every turn::

    add(message)   validate -> count once -> push into the window -> strategy plan -> evict
                   -> store.append: the messages and the state they imply, in one write, under this
                      writer's view of the session (stale: catch up and decide again)
                   -> fold the archived units into the running summary -> save state -> sinks
    context(input) blocks -> assembly within the exact budget -> render for the provider

Each operation holds the memory's lock (a ``threading.RLock``; an
``asyncio.Lock`` in ``AsyncMemory``), so one memory can serve many threads
or tasks. Several memories (processes) can share one session: each catches
up with what the others appended before it writes (``refresh()`` does it on
demand), so they converge, and the stored order is always a valid
conversation. The options are :class:`Options`; evicted units flow on to the
sinks (:class:`EvictionSink`, :class:`AsyncEvictionSink`).

Example::

    from convmem import Memory

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory.add({"role": "system", "content": "You are helpful."})
    memory.add({"role": "user", "content": "Hi!"})
    request = memory.context().request()        # {"messages": [...]} within budget
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._effects import drive
from ..errors import ConfigurationError, SessionNotFoundError
from ..messages import Message
from ..policy.context import Context
from ..policy.strategies import Summarizer
from ..session import MessageStatus
from ..stores import open_store
from ..stores.base import Store
from ..stores.memory import MemoryStore
from ..telemetry import _memory as observed  # no OpenTelemetry: that is imported only when a Telemetry is made
from ..usage import Usage
from . import _flows as flow
from ._base import MemoryBase, store_call
from ._core import MemoryCore
from ._effects import Absorb, Effect, Load, Read, Summarize
from ._flows import Flow
from ._intake import InputLike, MessageLike
from .aio import AsyncMemory
from .options import Options
from .sinks import AsyncEvictionSink, EvictionSink

if TYPE_CHECKING:
    from ..longterm.facts import Facts
    from ..longterm.recall import RecallIndex

__all__ = ["AsyncEvictionSink", "AsyncMemory", "EvictionSink", "InputLike", "Memory", "MessageLike", "Options"]

T = TypeVar("T")


class Memory(MemoryBase[Store]):
    """A conversation memory with a synchronous API. See the module docstring; options: ``MemoryBase.__init__``."""

    _lock: threading.RLock
    facts: Facts | None  # Memory(facts=True): the store's facts (see MemoryBase.__init__)
    recall: RecallIndex | None  # Memory(recall=True): the store's recall index

    def _attach(self, store: Store | str | None) -> None:
        _refuse_async_only(self._core)  # before a URL is opened: a refused memory leaves nothing open
        self._owns_store = store is None or isinstance(store, str)  # what this memory opens, it closes
        if isinstance(store, str):
            store = open_store(store)  # "sqlite", "sqlite:///path.db", "files:///dir", "postgresql://...", ...
        self.store = store if store is not None else MemoryStore()
        self._lock = threading.RLock()

    def _reading(self) -> threading.RLock:
        return self._lock

    @classmethod
    def open(cls, session_id: str, *, store: Store | str, user_id: str | None = None, **options: Any) -> Memory:
        """Reopen a stored session (a unique id prefix is enough) with its exact state.

        Args:
            session_id: the session's id, or a prefix of it that names one session.
            store: the store, or its URL (the memory then owns and closes what it opened).
            user_id: the session's user.
            **options: any option of the constructor; without them the memory reuses the budget,
                reserve and strategy the session was created with, and options given here win.

        Raises:
            SessionNotFoundError: no such session (``AmbiguousSessionError``: the prefix names several).
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
        perform = partial(store_call, store, session_id=session_id, user_id=user_id, model=None)
        merged, loaded = drive(flow.reopen(session_id, options), perform)
        memory = cls(store=store, session_id=loaded.info.id, user_id=user_id, **merged)
        memory._restore(loaded)
        return memory

    def add(self, message: MessageLike) -> Message:
        """Add one message (a Message, or an OpenAI, Anthropic or Responses dict); returns it as stored.

        The message's id is its idempotency key: a ``Message``'s ``id``, or a dict's ``id`` key in
        any of the three formats. Adding again a message whose id the session holds, with the same
        content, stores nothing and returns the stored message, so a retry never duplicates.
        """
        return self.add_many([message])[0]

    def add_many(self, messages: Iterable[MessageLike]) -> list[Message]:
        """Add a batch in one store write, with the state it implies: all of it is stored, or nothing.

        A batch whose ids (each message's idempotency key, see :meth:`add`) are all stored already
        with the same content (a retry) stores nothing and returns the stored messages.
        """
        with self._lock:
            return self._drive(flow.add_many(self._core, messages), traced=True)

    def context(
        self, input: InputLike = None, *, format: str | None = None, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> Context:
        """The next request, within the budget, with an account of it.

        ``tools`` replaces the memory's tools (``Memory(tools=...)``) for this request (``[]``: none); a
        change of tools moves the start of every cached prefix, and the account says so
        (``account.tools_changed``).
        """
        with self._lock:
            if self._telemetry is None:
                return self._context(input, format, tools)
            return observed.context(self._telemetry, self, partial(self._context, input, format, tools))

    def refresh(self) -> None:
        """Catch up with what other writers (processes) stored in this session since this memory last read it."""
        with self._lock:
            self._drive(flow.refresh(self._core))

    def messages(self, status: MessageStatus | Iterable[MessageStatus] | None = None) -> list[Message]:
        """Every stored message, oldest first, optionally only those of the given status(es)."""
        with self._lock:
            return self._drive(flow.messages(self._core, status))

    def clear(self, *, keep_system: bool = True) -> None:
        """Archive the whole window (nothing is deleted); with ``keep_system=False`` unpin system messages too."""
        with self._lock:
            self._drive(flow.clear(self._core, keep_system=keep_system))

    def rollback_incomplete(self) -> list[Message]:
        """Delete a trailing assistant tool call that has no (or not all) results; returns what was removed."""
        with self._lock:
            return self._drive(flow.rollback(self._core))

    def repair(self) -> list[Message]:
        """Answer unanswered trailing tool calls with marked synthetic results; returns the added messages.

        Any writer may call it, e.g. when the writer that made the calls crashed before their results.
        """
        with self._lock:
            return self._drive(flow.repair(self._core))

    def record_usage(self, usage: Any) -> Usage:
        """Add a provider's usage (OpenAI, Responses or Anthropic) to the stats and the cost."""
        with self._lock:
            return self._drive(flow.record(self._core, usage))

    def add_response(self, response: Any) -> list[Message]:
        """Store a provider's reply as it comes, and record its usage; returns the messages stored.

        ``response`` is an OpenAI ``ChatCompletion``, an Anthropic ``Message`` or a Responses
        ``Response`` (the SDK object or its dict). The assistant output is stored (text, tool calls,
        refusal, reasoning and thinking kept for the round trip; reply-only fields such as ids and
        annotations are kept in ``extra`` and never sent again), then its usage goes to the stats and
        the cost, cached and cache-write tokens at the registry's cached prices.
        """
        with self._lock:
            return self._drive(flow.respond(self._core, response), traced=True)

    def close(self) -> None:
        """Close the store if this memory opened it (a store passed in belongs to the caller)."""
        with self._lock:  # after the operation in progress, not under it
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drive(self, steps: Flow[T], *, traced: bool = False) -> T:
        if traced and self._telemetry is not None:  # an add, with telemetry: its spans and metrics
            return observed.add(self._telemetry, self, steps, self._perform)
        return drive(steps, self._perform)

    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, (Summarize, Absorb)):  # one check on the common path (an Append)
            return self._perform_model(effect)
        try:
            result = store_call(self.store, effect, session_id=self.session_id, user_id=self.user_id, model=self.model)
            # A sync store's messages are an iterator that may fail as it is read: read it here, where a
            # session gone missing is recognized as lost.
            if isinstance(effect, (Read, Load)):
                return self._exact(list(result) if isinstance(effect, Read) else result)
            return result
        except SessionNotFoundError as exc:
            raise self._lost(exc) from None

    def _perform_model(self, effect: Summarize | Absorb) -> Any:
        if isinstance(effect, Summarize):
            request = effect.request  # a sync memory refused an async-only summarizer or sink when it was made
            summarizer = cast(Summarizer, self._core.strategy.summarizer)
            return summarizer.summarize(request.previous, request.messages, request.max_tokens)
        cast(EvictionSink, effect.sink).absorb(effect.units, session_id=self.session_id, user_id=self.user_id)
        return None


def _refuse_async_only(core: MemoryCore) -> None:
    """A sync memory cannot await: a summarizer or a sink it could only await is refused when it is made."""
    summarizer = core.strategy.summarizer
    if summarizer is not None and not hasattr(summarizer, "summarize"):
        raise ConfigurationError("this summarizer is async-only; use AsyncMemory or a sync summarizer")
    for index, sink in enumerate(core.sinks):
        if not isinstance(sink, EvictionSink):
            raise ConfigurationError(
                f"sinks[{index}] ({type(sink).__name__}) is async-only (aabsorb); "
                "use AsyncMemory or a sink with absorb()"
            )
