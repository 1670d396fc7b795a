"""Every write of a memory as a generator of effects, driven by both facades.

Like httpx's ``Auth.auth_flow``, one generator holds the logic and yields
the I/O it needs; ``Memory`` performs each effect synchronously and
``AsyncMemory`` awaits it, and a failed effect is thrown back into the flow.
So the twins cannot drift apart: they share every decision. The flows::

    add       stage the batch -> Append (messages + the state they imply, under the writer's view)
                stale view: catch up (Load) and stage again; a retried batch: Read what was stored
              -> settle: Summarize the archived units, Absorb them, evict further, SaveState
    save      a state-only change (clear, usage) -> SaveState; stale: catch up and redo it
    rollback  Delete a trailing unanswered tool call (only if nobody appended since)
    refresh   Load and become what the store holds

The summary is the slow part, so it happens after the append: if its state
save fails, the archived units stay queued for the next fold, exactly as a
reopened memory would find them (see :mod:`convmem.memory._staging`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..errors import InvalidMessageError, SessionNotFoundError, StaleSessionError
from ..messages import Message, StoredMessage
from ..policy.units import Unit
from ..session import LoadedSession, SessionState
from ..stores._writes import same_message
from . import _staging as staging
from ._base import UNFOLDED_LIMIT
from ._core import FoldRequest, MemoryCore

__all__ = [
    "Absorb",
    "Append",
    "AsyncEvictionSink",
    "Delete",
    "Effect",
    "EvictionSink",
    "Load",
    "Read",
    "SaveState",
    "Summarize",
    "add",
    "refresh",
    "rollback",
    "save",
    "settle",
]

T = TypeVar("T")
MAX_CATCH_UPS = 64  # a writer that loses this many races in a row gives up with StaleSessionError


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
class Append:
    """``store.append`` under the writer's view; the value sent back is the seqs."""

    messages: Sequence[tuple[Message, int]]
    expected_seq: int
    expected_version: int
    state: SessionState | None


@dataclass(frozen=True, slots=True)
class Load:
    """``store.load``; the value sent back is the :class:`LoadedSession`."""

    unfolded_limit: int


@dataclass(frozen=True, slots=True)
class Read:
    """``store.messages`` from ``from_seq`` to ``to_seq``; the value sent back is a list."""

    from_seq: int
    to_seq: int


@dataclass(frozen=True, slots=True)
class Delete:
    seqs: list[int]
    expected_seq: int


@dataclass(frozen=True, slots=True)
class Summarize:
    """The value sent back is the summary text, or the exception the summarizer raised."""

    request: FoldRequest


@dataclass(frozen=True, slots=True)
class SaveState:
    """The value sent back is the saved state."""

    state: SessionState


@dataclass(frozen=True, slots=True)
class Absorb:
    units: list[list[StoredMessage]]


Effect = Append | Load | Read | Delete | Summarize | SaveState | Absorb
Flow = Generator[Effect, Any, T]


def _stored(units: list[Unit]) -> list[list[StoredMessage]]:
    return [[StoredMessage(e.seq, e.message, e.tokens - e.extra) for e in unit.entries] for unit in units]


def describe(error: BaseException) -> str:
    """A one-line description of a failure for the stats (never stored as memory content)."""
    text = str(error).splitlines()[0][:200] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def refresh(core: MemoryCore) -> Flow[None]:
    """Catch up with the store: read the session and become what it holds (see :func:`_staging.catch_up`)."""
    try:
        loaded: LoadedSession = yield Load(UNFOLDED_LIMIT if core.strategy.summarizer is not None else 0)
    except SessionNotFoundError:
        # Nothing stored yet, by anyone (a memory that holds seqs gets SessionLostError from its driver).
        return
    staging.catch_up(core, loaded)


def add(core: MemoryCore, prepared: Sequence[tuple[Message, int]], *, has_sinks: bool) -> Flow[list[Message]]:
    """Store a prepared batch, once; returns the messages as stored.

    The batch is checked against the window first. If it does not fit, the
    window may be out of date (another writer answered the tool calls it
    still shows open), so the memory catches up once before it says so.
    """
    try:
        core.window.check_batch([message for message, _ in prepared])
        recheck = False
    except InvalidMessageError:
        yield from refresh(core)
        recheck = True
    for _ in range(MAX_CATCH_UPS):
        try:
            staged = staging.stage(core, prepared, recheck=recheck)
        except InvalidMessageError:
            # After a catch-up a retried batch no longer fits (its tool result answers a call that is answered
            # already: by this very batch, stored by the attempt whose reply was lost). Then it is a retry.
            held = _held(core, prepared)
            if held is None:
                raise
            return held
        try:
            seqs = yield Append(prepared, staged.expected_seq, staged.expected_version, staged.state)
        except StaleSessionError:
            staging.unstage(core, staged)
            yield from refresh(core)
            recheck = True
            continue
        except BaseException:
            staging.unstage(core, staged)
            raise
        if seqs != staged.seqs:
            # The store held the whole batch already (a retry after a lost reply): nothing was written.
            staging.unstage(core, staged)
            rows: list[StoredMessage] = yield Read(min(seqs), max(seqs))
            found = {row.seq: row.message for row in rows}
            return [found.get(seq, message) for seq, (message, _) in zip(seqs, prepared, strict=True)]
        staging.commit(core, staged)
        if staged.evicted:
            yield from settle(core, staged.evicted, fold=staged.fold, has_sinks=has_sinks)
        return [message for message, _ in prepared]
    raise StaleSessionError(f"gave up after {MAX_CATCH_UPS} catch-ups: other writers kept changing the session")


def _held(core: MemoryCore, prepared: Sequence[tuple[Message, int]]) -> list[Message] | None:
    """The batch as the window holds it, if it holds every message of it (same id, same content)."""
    window = core.window
    by_id = {e.message.id: e.message for e in (*window.pinned, *window.entries())}
    found = [by_id.get(message.id) for message, _ in prepared]
    if all(f is not None and same_message(f, m) for f, (m, _) in zip(found, prepared, strict=True)):
        return [f for f in found if f is not None]
    return None


def settle(core: MemoryCore, archived: list[Unit], *, fold: bool, has_sinks: bool) -> Flow[None]:
    """After a committed append: fold what it archived, evict further if the summary grew, save the state.

    If that state cannot be saved, the memory returns to what the append
    stored (the units stay archived and queued for the next fold); usage
    already paid for is kept and saved with the next write.
    """
    if not archived:
        return  # staging evicted until the plan was met, and nothing changed since
    at = staging.mark(core)
    later: list[Unit] = []
    summarizer = core.strategy.summarizer
    changed = False
    if fold and summarizer is not None and core.unfolded:
        changed = True
        yield from _fold(core, core.fold_request([]))
    if has_sinks:
        yield Absorb(_stored(archived))
    for _ in range(staging.MAX_ROUNDS):
        plan = core.plan()
        if not plan.evict:
            break
        changed = True
        units = core.evict(plan)
        later += units
        if plan.fold and summarizer is not None:
            yield from _fold(core, core.fold_request(units))
        elif summarizer is not None:
            core.unfolded = core.unfolded + units
        if has_sinks:
            yield Absorb(_stored(units))
    if not changed:
        return
    try:
        staging.saved(core, (yield SaveState(core.state_to_save())))
    except StaleSessionError:
        staging.rewind(core, at, evicted=later, keep_usage=True)
        try:  # another writer saved first; its state wins (the add itself is done: it must not fail now)
            yield from refresh(core)
        except Exception as exc:
            core.warn(f"catching up after a concurrent state save failed, the next write catches up: {describe(exc)}")
    except Exception as exc:
        staging.rewind(core, at, evicted=later, keep_usage=True)
        core.warn(f"saving the state after an eviction failed, the archived messages stay queued: {describe(exc)}")
    except BaseException:
        staging.rewind(core, at, evicted=later, keep_usage=True)
        raise


def _fold(core: MemoryCore, request: FoldRequest) -> Flow[None]:
    outcome = yield Summarize(request)
    if isinstance(outcome, BaseException):
        core.fold_failed(request, describe(outcome))
    else:
        core.fold_done(request, outcome)


def save(
    core: MemoryCore, change: Callable[[], list[Unit]], *, unpins: bool = False, has_sinks: bool = False
) -> Flow[None]:
    """A state-only change (``clear``, ``record_usage``): apply it and save, or leave nothing changed.

    ``change`` returns the units it evicted (archived like evicted ones, so
    long-term memory gets them once the state is saved). On a stale view the
    change is undone, the memory catches up, and it is applied again to what
    the store holds.
    """
    for _ in range(MAX_CATCH_UPS):
        at = staging.mark(core, pinned=unpins)
        evicted = change()
        if not core.next_seq:
            return  # nothing is stored yet: the first append saves the state
        try:
            staging.saved(core, (yield SaveState(core.state_to_save())))
        except StaleSessionError:
            staging.rewind(core, at, evicted=evicted)
            yield from refresh(core)
            continue
        except BaseException:
            staging.rewind(core, at, evicted=evicted)
            raise
        if evicted and has_sinks:
            yield Absorb(_stored(evicted))
        return
    raise StaleSessionError(f"gave up after {MAX_CATCH_UPS} catch-ups: other writers kept changing the session")


def rollback(core: MemoryCore) -> Flow[list[Message]]:
    """Delete a trailing unanswered tool call, unless another writer appended since this one read."""
    for _ in range(MAX_CATCH_UPS):
        pending = core.window.pending
        if pending is None:
            return []
        try:
            yield Delete([e.seq for e in pending.entries], core.next_seq)
        except StaleSessionError:
            yield from refresh(core)
            continue
        core.window.pop_newest()
        core.counts["messages"] -= len(pending.entries)
        return pending.messages
    raise StaleSessionError(f"gave up after {MAX_CATCH_UPS} catch-ups: other writers kept changing the session")
