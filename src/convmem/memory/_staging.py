"""Staging a write on the core, so that a write the store refuses leaves the memory exactly as it was.

One add, one outcome: before the store sees a batch, the core pushes it into
the window at the seqs the store will give it (the writer's ``next_seq``),
asks the strategy what to evict, and computes the state that follows. The
store then writes the messages and that state together, under the writer's
expectations (:mod:`convmem.stores.base`). If it refuses, or fails, the core
is rewound to its :class:`Mark`; if it accepts, the staging is committed. So
the live memory and a memory reopened from the store never differ::

    mark -> push -> adopt a provider's compaction -> evict (plan rounds, no summary yet) -> state
         -> store.append(batch, expected seq and version, state)
            ok:      commit (archived units queue for the fold)
            refused: rewind to the mark (and catch up if the view was stale)

A writer whose view is stale catches up by reading the session again
(:func:`catch_up`): its window, summary and stats become the stored ones,
keeping any usage it has not saved yet (it still plans with its own options,
but saves the session's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..messages import Message
from ..policy.assembly import SummaryText
from ..policy.units import Entry, Unit
from ..session import COUNTED_KEY, LoadedSession, SessionState
from ..usage import USAGE_KEYS
from ._compaction import compact, compaction_in
from ._core import MemoryCore
from ._usage import CALIBRATION_KEY
from .options import CONFIG_KEY

__all__ = [
    "MAX_ROUNDS",
    "Mark",
    "Staged",
    "catch_up",
    "commit",
    "keep_config",
    "mark",
    "rewind",
    "saved",
    "stage",
    "unstage",
]

MAX_ROUNDS = 16


@dataclass(slots=True)
class Mark:
    """Everything a failed write restores (the window is restored from the staged entries and units)."""

    next_seq: int
    window_start: int
    state: SessionState
    summary: SummaryText | None
    unfolded: list[Unit]
    counts: dict[str, Any]
    pinned: list[Entry] | None = None  # only when a write may unpin (clear)
    pinned_tokens: int = 0


def mark(core: MemoryCore, *, pinned: bool = False) -> Mark:
    counts = dict(core.counts)
    counts["warnings"] = list(counts["warnings"])
    window = core.window
    return Mark(
        core.next_seq,
        core.window_start,
        core.state,
        core.summary,
        core.unfolded,
        counts,
        list(window.pinned) if pinned else None,
        window.pinned_tokens,
    )


def rewind(
    core: MemoryCore,
    at: Mark,
    *,
    pushed: Sequence[Entry] = (),
    evicted: Sequence[Unit] = (),
    keep_usage: bool = False,
) -> None:
    """Put the core back to ``at``: evicted units return to the front, pushed entries leave the back.

    ``keep_usage`` keeps the usage counted since the mark (a summary that was
    paid for even though its state could not be saved); it is saved with the
    next state write.
    """
    window = core.window
    for unit in reversed(evicted):
        window.unpop_oldest(unit)
    for entry in reversed(pushed):
        window.unpush(entry)
    if at.pinned is not None:
        window.pinned[:] = at.pinned
        window.pinned_tokens = at.pinned_tokens
    usage = {key: core.counts[key] for key in USAGE_KEYS}
    core.next_seq, core.window_start, core.state = at.next_seq, at.window_start, at.state
    core.summary, core.unfolded, core.counts = at.summary, at.unfolded, at.counts
    if keep_usage:
        core.counts.update(usage)


def saved(core: MemoryCore, state: SessionState) -> None:
    """Record a state the store accepted."""
    core.state = state
    core.saved_usage = {key: core.counts[key] for key in USAGE_KEYS}


@dataclass(slots=True)
class Staged:
    """A batch pushed into the window, what it evicted, and the write that makes it durable.

    ``mark`` is taken after the push and only if something was evicted (the
    hot path evicts rarely); undoing the push itself needs only the seq and
    the two counters it moved (``before``).
    """

    seqs: list[int]
    entries: list[Entry]
    evicted: list[Unit]
    fold: bool
    state: SessionState | None  # None: the append leaves the stored state as it is
    expected_seq: int
    expected_version: int
    before: tuple[int, Any]  # the message count and last seq before the push
    mark: Mark | None
    compacted: int = 0  # the first units of ``evicted``: covered by a provider's compaction, never folded


def unstage(core: MemoryCore, staged: Staged) -> None:
    """Undo :func:`stage` (the store refused or failed the write)."""
    if staged.mark is not None:
        rewind(core, staged.mark, evicted=staged.evicted)
    window = core.window
    for entry in reversed(staged.entries):
        window.unpush(entry)
    core.next_seq = staged.expected_seq
    core.counts["messages"], core.counts["last_seq"] = staged.before


def stage(core: MemoryCore, prepared: Sequence[tuple[Message, int]], *, recheck: bool) -> Staged:
    """Push ``prepared`` at the next seqs and evict what the strategy says (no summary yet).

    ``recheck`` validates the batch against the window again (after a catch-up
    the window may end differently); InvalidMessageError then changes nothing.
    """
    if recheck:
        core.window.check_batch([message for message, _ in prepared])
    before = (core.counts["messages"], core.counts["last_seq"])
    start = core.next_seq
    seqs = list(range(start, start + len(prepared)))
    entries = core.push(seqs, prepared)
    evicted: list[Unit] = []
    fold = False
    at: Mark | None = None
    compaction = compaction_in(entries)
    if compaction is not None:  # the provider summarized what came before: it becomes the summary
        at = mark(core)
        evicted += compact(core, compaction)
    compacted = len(evicted)
    for _ in range(MAX_ROUNDS):
        plan = core.plan()
        if not plan.evict:
            break
        at = at or mark(core)
        evicted += core.evict(plan)
        fold = fold or plan.fold
    # The state goes with the append when it changes: on the first message (so the options are saved
    # with the session), on an eviction, and when usage counted since the last save is still unsaved.
    # And when the rows it writes are counted by another counter than the one the stored state names.
    write = (
        bool(evicted) or start == 0 or unsaved(core) or core.counts[COUNTED_KEY] != core.state.stats.get(COUNTED_KEY)
    )
    state = core.state_to_save() if write else None
    return Staged(seqs, entries, evicted, fold, state, start, core.state.version, before, at, compacted)


def commit(core: MemoryCore, staged: Staged) -> None:
    """The store accepted the staged batch (and state)."""
    if staged.state is not None:
        saved(core, replace(staged.state, version=staged.expected_version + 1))
    if staged.evicted[staged.compacted :] and core.strategy.summarizer is not None:
        # Archived but not yet folded, exactly as a reopened memory reads them (the unfolded tail).
        core.unfolded = core.unfolded + staged.evicted[staged.compacted :]


def unsaved(core: MemoryCore) -> bool:
    """Usage counted since the store last took the state (on the hot path: four lookups, no generator)."""
    counts, last = core.counts, core.saved_usage
    return bool(
        counts["input_tokens"] != last["input_tokens"]
        or counts["output_tokens"] != last["output_tokens"]
        or counts["cached_input_tokens"] != last["cached_input_tokens"]
        or counts["cost_usd"] != last["cost_usd"]
    )


def catch_up(core: MemoryCore, loaded: LoadedSession) -> None:
    """Become what the store holds (the session's own options included), keeping this memory's unsaved usage."""
    pending = {key: core.counts[key] - core.saved_usage[key] for key in USAGE_KEYS}
    keep_config(core, loaded)
    for key, delta in pending.items():
        core.counts[key] += delta


def keep_config(core: MemoryCore, loaded: LoadedSession) -> None:
    """``core.restore(loaded)``, keeping the options the session was created with as the ones it saves.

    A memory opened with other options uses them, but never replaces the session's own: a later
    ``Memory.open`` without options gets what the session was created with. A session saved before
    options were kept takes this memory's.
    """
    own, learned = core.counts[CONFIG_KEY], core.counts.get(CALIBRATION_KEY)
    core.restore(loaded)
    if not isinstance(core.counts.get(CONFIG_KEY), Mapping):
        core.counts[CONFIG_KEY] = own
    if learned is not None:  # what this process's counter learned is newer than what a catch-up read
        core.counts[CALIBRATION_KEY] = learned
