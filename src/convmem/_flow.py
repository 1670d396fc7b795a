"""The eviction flow as a generator of effects, driven by both facades.

Like httpx's ``Auth.auth_flow``, one generator holds the logic and yields
the I/O it needs (:class:`Summarize`, :class:`SaveState`, :class:`Absorb`);
``Memory`` performs each effect synchronously and ``AsyncMemory`` awaits it.
So the sync and async twins cannot drift apart: they share every decision.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ._core import FoldRequest, MemoryCore
from .policy.units import Unit
from .stores.base import SessionState, StoredMessage

__all__ = ["Absorb", "AsyncEvictionSink", "Effect", "EvictionSink", "SaveState", "Summarize", "settle"]

MAX_ROUNDS = 16


@runtime_checkable
class EvictionSink(Protocol):
    """Receives evicted units (the waterfall into long-term memory: facts, recall index)."""

    def absorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None: ...


@runtime_checkable
class AsyncEvictionSink(Protocol):
    async def aabsorb(
        self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Summarize:
    request: FoldRequest


@dataclass(frozen=True, slots=True)
class SaveState:
    state: SessionState


@dataclass(frozen=True, slots=True)
class Absorb:
    units: list[list[StoredMessage]]


Effect = Summarize | SaveState | Absorb


def _stored(units: list[Unit]) -> list[list[StoredMessage]]:
    return [[StoredMessage(e.seq, e.message, e.tokens) for e in unit.entries] for unit in units]


def describe(error: BaseException) -> str:
    """A one-line description of a failure for the stats (never stored as memory content)."""
    text = str(error).splitlines()[0][:200] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def settle(core: MemoryCore, *, has_sinks: bool, force: bool = False) -> Generator[Effect, Any, None]:
    """Evict until the strategy is satisfied; yields the effects to perform.

    The value sent back for :class:`Summarize` is the summary text or the
    exception the summarizer raised; for :class:`SaveState`, the saved state.
    """
    changed = force
    for _ in range(MAX_ROUNDS):
        plan = core.plan()
        if not plan.evict:
            break
        changed = True
        units = core.evict(plan)
        if plan.fold and core.strategy.summarizer is not None:
            request = core.fold_request(units)
            outcome = yield Summarize(request)
            if isinstance(outcome, BaseException):
                core.fold_failed(request, describe(outcome))
            else:
                core.fold_done(request, outcome)
        if has_sinks:
            yield Absorb(_stored(units))
    if changed:
        core.state = yield SaveState(core.state_to_save())
