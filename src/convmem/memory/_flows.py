"""Every operation of a memory as a generator of effects, driven by both twins.

Like httpx's ``Auth.auth_flow``, one generator holds the logic and yields
the I/O it needs (:mod:`convmem.memory._effects`); ``Memory`` performs each
effect synchronously and ``AsyncMemory`` awaits it (:mod:`convmem._effects`),
and a failed effect is thrown back into the flow. So the twins cannot drift
apart: they share every decision, and each of their methods is "take the
lock, drive a flow". The flows::

    add_many  prepare (parse, check, count) -> add
    add       stage the batch -> Append (messages + the state they imply, under the writer's view)
                stale view: catch up (Load) and stage again; a retried batch: Read what was stored
              -> settle: Summarize the archived units, Absorb them (each sink), evict further, SaveState
    repair    add marked synthetic results for the trailing unanswered calls (look again if another writer did)
    respond   a provider's reply: add its messages, then record its usage
    save      a state-only change (clear, record) -> SaveState; stale: catch up and redo it
    rollback  Delete a trailing unanswered tool call (only if nobody appended since)
    refresh   Load and become what the store holds
    messages  Read the whole history, filtered by status
    reopen    Find a session by id prefix, Load it, merge its saved options with the given ones

The summary is the slow part, so it happens after the append: if its state
save fails, the archived units stay queued for the next fold, exactly as a
reopened memory would find them (see :mod:`convmem.memory._staging`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..errors import InvalidMessageError, SessionNotFoundError, StaleSessionError
from ..formats import parse_reply
from ..messages import Message, StoredMessage, same_message
from ..policy.repair import synthetic_results
from ..policy.strategies import Plan
from ..policy.units import Unit
from ..session import LoadedSession, MessageStatus, SessionInfo, status_of
from ..usage import Usage, parse_usage
from . import _staging as staging
from ._core import FoldRequest, MemoryCore
from ._effects import Absorb, Append, Delete, Effect, Find, Load, Read, SaveState, Summarize
from ._intake import MessageLike
from ._usage import add_usage, charge, learn
from .options import UNFOLDED_LIMIT, open_options

__all__ = [
    "Flow",
    "add",
    "add_many",
    "clear",
    "describe",
    "messages",
    "record",
    "refresh",
    "reopen",
    "repair",
    "respond",
    "rollback",
    "save",
    "settle",
]

T = TypeVar("T")
Flow = Generator[Effect, Any, T]
MAX_CATCH_UPS = 64  # a writer that loses this many races in a row gives up with StaleSessionError
REPAIR_TRIES = 3  # another writer answering the calls meanwhile makes repair look again, this many times


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


def add_many(core: MemoryCore, items: Iterable[MessageLike]) -> Flow[list[Message]]:
    """Parse, check and count a batch (before any I/O), then :func:`add` it; an empty batch stores nothing."""
    prepared = core.prepare(items, check=False)  # add checks it against the window, after a catch-up if need be
    if not prepared:
        return []
    return (yield from add(core, prepared))


def add(core: MemoryCore, prepared: Sequence[tuple[Message, int]]) -> Flow[list[Message]]:
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
            yield from settle(core, staged.evicted, fold=staged.fold)
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


def settle(core: MemoryCore, archived: list[Unit], *, fold: bool) -> Flow[None]:
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
    yield from _absorb(core, archived)
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
        yield from _absorb(core, units)
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
    """Summarize; the usage the summarizer reports is charged whether it succeeded or failed."""
    try:
        outcome = yield Summarize(request)
    except Exception as exc:  # any summarizer failure must keep the data (invariant 8)
        charge(core, exc)
        core.fold_failed(request, describe(exc))
        return
    charge(core, outcome)
    core.fold_done(request, outcome)


def _absorb(core: MemoryCore, units: list[Unit]) -> Flow[None]:
    """Hand evicted units to every sink; a sink's failure loses nothing (the units are archived already)."""
    if not core.sinks or not units:
        return
    stored = _stored(units)
    for sink in core.sinks:
        try:
            yield Absorb(sink, stored)
        except Exception as exc:
            core.warn(f"eviction sink {type(sink).__name__} failed: {describe(exc)}")


def save(core: MemoryCore, change: Callable[[], list[Unit]], *, unpins: bool = False) -> Flow[None]:
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
        yield from _absorb(core, evicted)
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


def clear(core: MemoryCore, *, keep_system: bool) -> Flow[None]:
    """Archive the whole window (nothing is deleted); without ``keep_system`` unpin system messages too."""

    def archive_all() -> list[Unit]:
        if not keep_system:
            last = core.counts["last_seq"]
            core.window.pinned.clear()
            core.window.pinned_tokens = 0
            core.state = replace(core.state, pinned_start=(last + 1) if last is not None else 0)
        return core.evict(Plan(evict=len(core.window.units), fold=False, reason="clear"))

    yield from save(core, archive_all, unpins=not keep_system)


def record(core: MemoryCore, usage: Any) -> Flow[Usage]:
    """Add a provider's usage to the stats and the cost, and save it; returns it parsed."""
    parsed = parse_usage(usage)
    learn(core, parsed)  # once, whatever the save below retries
    yield from save(core, lambda: add_usage(core, parsed))
    return parsed


def respond(core: MemoryCore, response: Any) -> Flow[list[Message]]:
    """Store a provider's reply (its assistant output), then record its usage; returns the messages stored."""
    replies, usage = parse_reply(response)
    parsed = parse_usage(usage) if usage is not None else None  # refused before anything is stored
    added = (yield from add_many(core, replies)) if replies else []
    if parsed is not None:
        yield from record(core, parsed)
    return added


def repair(core: MemoryCore) -> Flow[list[Message]]:
    """Answer the trailing unanswered tool calls with marked synthetic results; returns the added messages."""
    for _ in range(REPAIR_TRIES):
        pending = core.window.pending
        if pending is None:
            return []
        prepared = core.prepare(synthetic_results(pending))
        try:
            return (yield from add(core, prepared))
        except InvalidMessageError:
            if core.window.pending is pending:
                raise
            # Another writer answered or removed the calls meanwhile: look again.
    return []


def messages(core: MemoryCore, status: MessageStatus | Iterable[MessageStatus] | None) -> Flow[list[Message]]:
    """Every stored message, oldest first, only those of the given status(es) if any are given."""
    wanted = None if status is None else ({status} if isinstance(status, str) else set(status))
    state = core.state
    try:
        rows: list[StoredMessage] = yield Read()
    except SessionNotFoundError:
        return []  # nothing stored yet: the session is created on its first message
    return [s.message for s in rows if wanted is None or status_of(s, state) in wanted]


def reopen(session_id: str, given: Mapping[str, Any]) -> Flow[tuple[dict[str, Any], LoadedSession]]:
    """Find a stored session (a unique id prefix is enough); returns the options to open it with, and it read.

    The options are the session's saved ones, ``given`` ones winning (:func:`~convmem.memory.options.open_options`);
    a folding memory also reads the archived units a failed summary left queued.
    """
    info: SessionInfo = yield Find(session_id)
    peek: LoadedSession = yield Load(0, info.id)
    merged, unfolded = open_options(peek.state, given, info.model)
    loaded: LoadedSession = (yield Load(unfolded, info.id)) if unfolded else peek
    return merged, loaded
