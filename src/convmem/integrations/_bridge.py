"""What every adapter needs from a memory, whichever kind it is: the same calls, awaited when async.

What comes in: a memory of the one memory protocol (:mod:`convmem.memory.protocol`):
``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``. What happens: an adapter's
logic is written once, as a flow that yields the memory calls it needs (:func:`on`);
:func:`run` makes them on a sync memory, :func:`arun` awaits them when the memory's
methods are coroutines and calls them plainly otherwise (a sync memory inside an async
framework: its stores are local and fast). What goes out: the flow's result.
A sync entry point of a framework given an async memory refuses it with what to use.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._effects import adrive, drive
from ..errors import ConfigurationError
from ..memory.protocol import AsyncMemoryLike, MemoryLike

__all__ = ["AnyMemory", "MemoryFlow", "On", "arun", "detached", "is_async", "on", "run"]

AnyMemory = MemoryLike | AsyncMemoryLike
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class On:
    """A call on the memory: ``memory.<method>(*args, **kwargs)``; the value sent back is its result."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


MemoryFlow = Generator[On, Any, R]


def on(method: str, *args: Any, **kwargs: Any) -> On:
    return On(method, args, kwargs)


def is_async(memory: object) -> bool:
    """Whether the memory's calls are coroutines (``AsyncMemory``, ``AsyncClient``)."""
    return inspect.iscoroutinefunction(getattr(type(memory), "add_many", None))


def run(memory: AnyMemory, flow: MemoryFlow[R], *, what: str) -> R:
    """Drive ``flow`` on a sync memory; an async one is refused (``what`` names the async way)."""
    if is_async(memory):
        raise ConfigurationError(f"{type(memory).__name__} is async and this call is not: use {what}")
    return drive(flow, lambda call: getattr(memory, call.method)(*call.args, **call.kwargs))


async def arun(memory: AnyMemory, flow: MemoryFlow[R]) -> R:
    """Drive ``flow`` on any memory, awaiting the calls that are coroutines."""

    async def perform(call: On) -> Any:
        result = getattr(memory, call.method)(*call.args, **call.kwargs)
        return await result if inspect.isawaitable(result) else result

    return await adrive(flow, perform)


def detached(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of rendered dicts: convmem reuses them between turns, and frameworks edit what they get."""
    return copy.deepcopy(list(items))
