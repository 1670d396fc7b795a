"""Pure policy: units, strategies, context assembly and repair. No I/O anywhere in this package."""

from __future__ import annotations

from .assembly import Assembly, BlockText, assemble
from .context import Account, Context, LeftOut, Truncation
from .repair import RepairReport, repair_messages
from .strategies import (
    STRATEGIES,
    AsyncSummarizer,
    Compaction,
    Plan,
    SlidingWindow,
    Strategy,
    Summarizer,
    SummaryBuffer,
    TokenBudget,
    make_strategy,
)
from .units import Entry, Unit, Window, group_units

__all__ = [
    "STRATEGIES",
    "Account",
    "Assembly",
    "AsyncSummarizer",
    "BlockText",
    "Compaction",
    "Context",
    "Entry",
    "LeftOut",
    "Plan",
    "RepairReport",
    "SlidingWindow",
    "Strategy",
    "Summarizer",
    "SummaryBuffer",
    "TokenBudget",
    "Truncation",
    "Unit",
    "Window",
    "assemble",
    "group_units",
    "make_strategy",
    "repair_messages",
]
