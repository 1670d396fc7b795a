"""A provider's compaction adopted as the running summary: what comes in with it, what it archives.

What comes in: the entries an add pushed, and the memory's core. What happens: the newest entry holding a
provider's compaction (an Anthropic ``compaction`` block, a Responses ``compaction`` item, or what
``responses.compact`` returned: :func:`convmem.formats._native.compaction_of`) becomes the summary: every
unit up to the one holding it leaves the window, archived (the store keeps them, recall and facts get them),
and the summary is that message, re-sent as it is with its own token count, so nothing before it is sent
again (OpenAI reads and bills whatever precedes a compaction item; Anthropic ignores it). What goes out:
the archived units, for the add to write with the state and hand to the sinks. No I/O, like the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone

from ..formats._native import compaction_of, faithful_text
from ..policy.assembly import SummaryText
from ..policy.strategies import Plan
from ..policy.units import Entry, Unit
from ..session import SummaryRecord
from ._core import MemoryCore

__all__ = ["compact", "compaction_in"]


def compaction_in(entries: Sequence[Entry]) -> Entry | None:
    """The newest of ``entries`` that holds a provider's compaction (its own summary of what came before)."""
    for entry in reversed(entries):
        if entry.message.extra and entry.message.role == "assistant" and compaction_of(entry.message.extra):
            return entry
    return None


def compact(core: MemoryCore, entry: Entry) -> list[Unit]:
    """Adopt the provider's compaction in ``entry`` as the running summary; returns the units it archives."""
    index = next(i for i, unit in enumerate(core.window.units) if unit.first_seq <= entry.seq <= unit.last_seq)
    units = core.evict(Plan(evict=index + 1, fold=False, reason="provider compaction"))
    found = compaction_of(entry.message.extra)
    text = "\n".join(t for obj in (found[1] if found else ()) if (t := faithful_text(obj)))  # what is readable
    first = core.summary.first_seq if core.summary is not None else units[0].first_seq
    core.summary = SummaryText(text, first, entry.seq, entry.tokens, entry.message)
    counts = core.counts
    counts["summarized_messages"] += sum(len(u.entries) for u in units)
    counts["summarized_tokens"] += sum(u.tokens for u in units)
    counts["summaries"] += 1
    core.unfolded = []  # what awaited a fold is covered by the provider's summary
    record = SummaryRecord(text, first, entry.seq, entry.tokens, datetime.now(timezone.utc), entry.message)
    core.state = replace(core.state, folded_to=entry.seq, summary=record)
    return units
