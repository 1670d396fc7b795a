"""Making a message history valid for the providers, visibly.

``Memory.add`` refuses input that would break a tool call from its results,
so a memory's own history is always valid except for a trailing call still
awaiting results. Transcripts from elsewhere can be broken in every way;
:func:`repair_messages` fixes them and says exactly what it did:

* a tool result whose call is unknown, already answered or no longer open is
  dropped (reported as an orphan);
* a call left unanswered when the conversation moves on gets a synthetic
  result, marked in its metadata, placed right after the call's other results.

Example::

    fixed, report = repair_messages(messages)
    report.orphans, report.synthesized
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..messages import PINNED_ROLES, Message
from .units import Unit

__all__ = ["SYNTHETIC_RESULT", "RepairReport", "repair_messages", "synthetic_results"]

SYNTHETIC_RESULT = "[convmem: no result was recorded for this tool call]"


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What :func:`repair_messages` changed: indexes refer to the input list."""

    orphans: tuple[int, ...] = field(default=())
    synthesized: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.orphans or self.synthesized)


def _synthetic(call_id: str) -> Message:
    return Message(
        role="tool", tool_call_id=call_id, content=SYNTHETIC_RESULT, metadata={"convmem": {"synthetic": True}}
    )


def synthetic_results(unit: Unit) -> list[Message]:
    """Marked placeholder results for the unanswered calls of ``unit``, in call order."""
    calls = unit.entries[0].message.tool_calls
    return [_synthetic(call.id) for call in calls if call.id in unit.pending]


def repair_messages(messages: Sequence[Message]) -> tuple[list[Message], RepairReport]:
    """Return a valid copy of ``messages`` and a report of every change."""
    fixed: list[Message] = []
    orphans: list[int] = []
    synthesized: list[str] = []
    open_calls: list[str] = []  # unanswered call ids of the newest assistant tool-call message

    def close_open() -> None:
        for call_id in open_calls:
            fixed.append(_synthetic(call_id))
            synthesized.append(call_id)
        open_calls.clear()

    for index, message in enumerate(messages):
        if message.role in PINNED_ROLES:
            fixed.append(message)
            continue
        if message.role == "tool":
            if message.tool_call_id in open_calls:
                open_calls.remove(message.tool_call_id)
                fixed.append(message)
            else:
                orphans.append(index)
            continue
        close_open()
        fixed.append(message)
        open_calls.extend(call.id for call in message.tool_calls)
    close_open()
    return fixed, RepairReport(tuple(orphans), tuple(synthesized))
