"""What every adapter needs from a memory, whichever twin it is: the same calls, awaited when async.

An adapter for an async framework accepts a :class:`~convmem.Memory` or an
:class:`~convmem.AsyncMemory`; these helpers call the sync twin directly (its
stores are local and fast) and await the async one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ..memory import AsyncMemory, InputLike, Memory
from ..messages import Message
from ..policy.context import Context

__all__ = ["AnyMemory", "aadd_many", "aclear", "acontext", "detached"]

AnyMemory = Memory | AsyncMemory


async def aadd_many(memory: AnyMemory, messages: Sequence[Message]) -> list[Message]:
    if isinstance(memory, AsyncMemory):
        return await memory.add_many(messages)
    return memory.add_many(messages)


async def acontext(memory: AnyMemory, input: InputLike = None, *, format: str) -> Context:
    if isinstance(memory, AsyncMemory):
        return await memory.context(input, format=format)
    return memory.context(input, format=format)


async def aclear(memory: AnyMemory) -> None:
    if isinstance(memory, AsyncMemory):
        await memory.clear(keep_system=False)
    else:
        memory.clear(keep_system=False)


def detached(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of rendered dicts: convmem reuses them between turns, and frameworks edit what they get."""
    return copy.deepcopy(list(items))
