"""Eviction sinks: where the units a memory evicts flow on to long-term memory.

A memory hands every unit it evicts (archives, never deletes) to each sink it
was given (``Memory(sinks=[...])``), after the store has the eviction: the
waterfall into facts (``Facts`` with an extractor) and the recall index
(``RecallIndex``). Implement either protocol; both are checked structurally
(``isinstance`` works, no base class is needed)::

    units (each a list of StoredMessage: a user message, a reply, or a call with its results)
      -> Memory:      sink.absorb(units, session_id=..., user_id=...)
      -> AsyncMemory: await sink.aabsorb(...) if the sink has it, else sink.absorb(...) on the event loop

A sink that raises loses nothing (the units are archived already): the
memory reports the failure in ``stats().warnings`` and goes on. A sync sink
given to ``AsyncMemory`` runs on the event loop, so a slow one should offer
``aabsorb`` (``RecallIndex`` embeds in a worker thread there); ``Memory``
refuses a sink that has only ``aabsorb``.

Example::

    class Printer:
        def absorb(self, units, *, session_id, user_id):
            for unit in units:
                print(session_id, [stored.message.text for stored in unit])

    memory = Memory("gpt-4o", sinks=[Printer()])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..messages import StoredMessage

__all__ = ["AsyncEvictionSink", "EvictionSink"]


@runtime_checkable
class EvictionSink(Protocol):
    """Receives the units a memory evicts (the waterfall into long-term memory: facts, recall index)."""

    def absorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        """Take evicted units, oldest first; raising loses nothing (the memory warns and goes on).

        Args:
            units: whole units as stored, each a list of messages with their seqs and token counts.
            session_id: the session they were evicted from.
            user_id: its user (None for a memory without one).
        """
        ...


@runtime_checkable
class AsyncEvictionSink(Protocol):
    """The async twin of :class:`EvictionSink`, awaited by ``AsyncMemory``."""

    async def aabsorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        """Like :meth:`EvictionSink.absorb`, awaited."""
        ...
