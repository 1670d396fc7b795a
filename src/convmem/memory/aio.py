"""``AsyncMemory``: the async twin of :class:`convmem.memory.Memory`.

It drives the same flows (:mod:`convmem.memory._flows`) as ``Memory``, awaiting
each effect (:func:`convmem._effects.adrive`), and every awaited operation holds
an ``asyncio.Lock``; so many tasks may share one memory (``asyncio.gather`` of
adds stores each message once, in the order the lock admits them). It never
calls ``asyncio.run``. A sync summarizer runs in a worker thread so it cannot
block the event loop; a sync eviction sink is called on the loop (give a slow
one ``aabsorb``, as ``RecallIndex`` does).

The reads that are not coroutines (``stats()``, ``pending_tool_calls`` and the
fixed ``budget``, ``reserved_output``, ``counter``, ``strategy``) cannot wait for
the lock. They never await, so no other task runs while they read; but while
another task's write waits on the store or the summarizer they see that write
as staged (it is undone if the store refuses it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from .._effects import adrive
from ..errors import SessionNotFoundError
from ..messages import Message
from ..policy.context import Context
from ..session import MessageStatus
from ..stores import aopen_store, open_async_store_now
from ..stores.base import AsyncStore
from ..stores.memory import AsyncMemoryStore
from ..telemetry import _memory as observed  # no OpenTelemetry: that is imported only when a Telemetry is made
from ..usage import Usage
from . import _flows as flow
from ._base import MemoryBase, store_call
from ._effects import Absorb, Effect, Summarize
from ._flows import Flow
from ._intake import InputLike, MessageLike
from .sinks import AsyncEvictionSink

if TYPE_CHECKING:
    from ..longterm.facts import AsyncFacts
    from ..longterm.recall import RecallIndex

__all__ = ["AsyncMemory"]

T = TypeVar("T")


class AsyncMemory(MemoryBase[AsyncStore]):
    """The async twin of :class:`Memory`: the same behaviour, awaited. It never calls ``asyncio.run``."""

    _lock: asyncio.Lock
    _awaited = True  # its blocks read the sync twin of a thread-run store (see memory._longterm)
    facts: AsyncFacts | None  # AsyncMemory(facts=True): the store's facts, awaited
    recall: RecallIndex | None  # AsyncMemory(recall=True): the store's recall index

    def _attach(self, store: AsyncStore | str | None) -> None:
        self._owns_store = store is None or isinstance(store, str)
        if isinstance(store, str):
            store = open_async_store_now(store)  # a constructor cannot await; AsyncMemory.open can
        self.store = store if store is not None else AsyncMemoryStore()
        self._lock = asyncio.Lock()

    def _reading(self) -> nullcontext[None]:
        return nullcontext()  # an asyncio.Lock cannot be taken without awaiting: see the module docstring

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
        perform = partial(store_call, store, session_id=session_id, user_id=user_id, model=None)
        merged, loaded = await adrive(flow.reopen(session_id, options), perform)
        memory = cls(store=store, session_id=loaded.info.id, user_id=user_id, **merged)
        memory._restore(loaded)
        return memory

    async def add(self, message: MessageLike) -> Message:
        """See :meth:`Memory.add`."""
        return (await self.add_many([message]))[0]

    async def add_many(self, messages: Iterable[MessageLike]) -> list[Message]:
        """See :meth:`Memory.add_many`."""
        async with self._lock:
            return await self._drive(flow.add_many(self._core, messages), traced=True)

    async def context(
        self, input: InputLike = None, *, format: str | None = None, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> Context:
        """See :meth:`Memory.context`."""
        async with self._lock:
            if self._telemetry is None:
                return self._context(input, format, tools)
            return observed.context(self._telemetry, self, partial(self._context, input, format, tools))

    async def refresh(self) -> None:
        """See :meth:`Memory.refresh`."""
        async with self._lock:
            await self._drive(flow.refresh(self._core))

    async def messages(self, status: MessageStatus | Iterable[MessageStatus] | None = None) -> list[Message]:
        """See :meth:`Memory.messages`."""
        async with self._lock:
            return await self._drive(flow.messages(self._core, status))

    async def clear(self, *, keep_system: bool = True) -> None:
        """See :meth:`Memory.clear`."""
        async with self._lock:
            await self._drive(flow.clear(self._core, keep_system=keep_system))

    async def rollback_incomplete(self) -> list[Message]:
        """See :meth:`Memory.rollback_incomplete`."""
        async with self._lock:
            return await self._drive(flow.rollback(self._core))

    async def repair(self) -> list[Message]:
        """See :meth:`Memory.repair`."""
        async with self._lock:
            return await self._drive(flow.repair(self._core))

    async def record_usage(self, usage: Any) -> Usage:
        """See :meth:`Memory.record_usage`."""
        async with self._lock:
            return await self._drive(flow.record(self._core, usage))

    async def add_response(self, response: Any) -> list[Message]:
        """Store a provider's reply and record its usage (see :meth:`Memory.add_response`)."""
        async with self._lock:
            return await self._drive(flow.respond(self._core, response), traced=True)

    async def aclose(self) -> None:
        """Close the store if this memory created it (after the operation in progress)."""
        async with self._lock:
            if self._owns_store:
                await self.store.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _drive(self, steps: Flow[T], *, traced: bool = False) -> T:
        if traced and self._telemetry is not None:  # an add, with telemetry: its spans and metrics
            return await observed.aadd(self._telemetry, self, steps, self._perform)
        return await adrive(steps, self._perform)

    async def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Summarize):
            request = effect.request
            summarizer: Any = self._core.strategy.summarizer
            if hasattr(summarizer, "asummarize"):
                return await summarizer.asummarize(request.previous, request.messages, request.max_tokens)
            # A sync summarizer may block on the network; keep the event loop free.
            return await asyncio.to_thread(summarizer.summarize, request.previous, request.messages, request.max_tokens)
        if isinstance(effect, Absorb):
            sink = effect.sink
            if isinstance(sink, AsyncEvictionSink):
                await sink.aabsorb(effect.units, session_id=self.session_id, user_id=self.user_id)
            else:
                sink.absorb(effect.units, session_id=self.session_id, user_id=self.user_id)
            return None
        try:
            session, user, model = self.session_id, self.user_id, self.model
            return self._exact(await store_call(self.store, effect, session_id=session, user_id=user, model=model))
        except SessionNotFoundError as exc:
            raise self._lost(exc) from None
