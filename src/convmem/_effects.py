"""The one driver of convmem's effect generators.

Every operation that needs I/O is written once, as a generator that makes the
decisions and yields the I/O it needs (an *effect*: an append, a summary, a
SQL query, a Lua call); a driver performs each effect and sends the result
back, or throws the failure back in, so the generator can undo what it
staged (httpx's ``Auth.auth_flow`` is the model). The sync and async twins
differ only in the ``perform`` they pass::

    flow = add(core, batch)            # a generator: yields Append(...), Summarize(...), ...
    drive(flow, perform)               # Memory: perform(effect) -> result
    await adrive(flow, aperform)       # AsyncMemory: await aperform(effect) -> result

Drivers with their own retry rules (the PostgreSQL and Redis stores) advance
a flow one effect at a time with :func:`step`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Done", "Flow", "adrive", "drive", "step"]

E = TypeVar("E")
R = TypeVar("R")
Flow = Generator[E, Any, R]


@dataclass(frozen=True, slots=True)
class Done(Generic[R]):
    """A finished flow's return value (what :func:`step` gives instead of a next effect)."""

    value: R


def step(
    flow: Flow[E, R], reply: Any = None, error: BaseException | None = None, *, first: bool = False
) -> E | Done[R]:
    """Advance ``flow`` by one effect: start it (``first``), throw ``error`` into it, or send it ``reply``."""
    try:
        if first:
            return next(flow)
        if error is not None:
            return flow.throw(error)
        return flow.send(reply)
    except StopIteration as stop:
        return Done(stop.value)


def drive(flow: Flow[E, R], perform: Callable[[E], Any]) -> R:
    """Run ``flow`` to the end, performing each effect; a failed effect is thrown back into the flow.

    ``BaseException`` is thrown back too (an interrupt while the store is written), so the flow can
    undo what it staged before the interrupt propagates.
    """
    # Written out rather than through ``step``: every add of every turn runs here, and a call and a
    # ``Done`` per effect were a measurable part of a plain turn (bench/README.md, the speed gate).
    send = flow.send
    try:
        effect = next(flow)
        while True:
            failure: BaseException | None = None
            try:
                result = perform(effect)
            except BaseException as exc:
                failure = exc
            # Outside the except block: what the flow raises in answer does not chain the effect's failure
            # as its __context__ (an SDK exception may echo an API key; the flow decides what to keep).
            if failure is None:
                effect = send(result)
            else:
                effect = flow.throw(failure)
                del failure  # no cycle through the traceback's frame
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(flow: Flow[E, R], perform: Callable[[E], Awaitable[Any]]) -> R:
    """The async twin of :func:`drive`: each effect is awaited."""
    outcome = step(flow, first=True)
    while not isinstance(outcome, Done):
        failure: BaseException | None = None
        try:
            result = await perform(outcome)
        except BaseException as exc:
            failure = exc
        outcome = step(flow, error=failure) if failure is not None else step(flow, result)
    return outcome.value
