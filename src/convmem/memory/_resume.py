"""Resuming: a memory's core rebuilt from what a store read when the session is opened or caught up.

What comes in: a :class:`~convmem.session.LoadedSession` (the state, the pinned messages, the window and the
archived units still to fold; never the archive). What happens: the window is pushed again at the stored
seqs with the stored counts, the running summary is rebuilt, and the counts the state did not save (the
last seq, the message count, the next seq) are taken from the store. Nothing is read or written here: the
flows do that (:mod:`convmem.memory._flows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DamagedSessionError, InvalidMessageError
from ..messages import Message, StoredMessage
from ..policy.draft import SummaryText, summary_message
from ..policy.units import Entry, Unit, Window
from ..session import LoadedSession, SessionState
from ..usage import fresh_counts

__all__ = ["Resumed", "resume"]


@dataclass(slots=True)
class Resumed:
    """A core's state as a store read it."""

    window: Window
    state: SessionState
    counts: dict[str, Any]
    summary: SummaryText | None
    unfolded: list[Unit]
    next_seq: int


def resume(loaded: LoadedSession, rendered_alone: Callable[[Message], Any]) -> Resumed:
    """The window, summary and stats of what the store read (``rendered_alone``: a message's cached Chat dict).

    Raises:
        DamagedSessionError: the stored window is no conversation ``add`` could have made (it starts at a tool result,
            a result answers no call, a call is unanswered before the next message), naming the session.
    """
    window = Window()
    counts = fresh_counts() | dict(loaded.state.stats)
    counts["warnings"] = list(counts["warnings"])
    for stored in sorted([*loaded.pinned, *loaded.window], key=lambda s: s.seq):
        try:
            window.check(stored.message)  # O(1): what was stored is believed only as far as add's rules hold
        except InvalidMessageError as exc:
            reason = f"its stored window cannot be sent (seq {stored.seq}: {exc.reason})"
            raise DamagedSessionError(loaded.info.id, reason) from None
        entry = Entry(stored.seq, stored.message, stored.tokens)
        entry.rendered = rendered_alone(stored.message)
        window.push(entry)
    record = loaded.state.summary
    summary = None
    if record is not None:
        message = record.message or summary_message(record.text, record.first_seq, record.last_seq)
        summary = SummaryText(record.text, record.first_seq, record.last_seq, record.tokens, message)
    # The stats are saved with the state, which is written on evictions only; the store knows the rest.
    seqs = [s.seq for s in (*loaded.pinned[-1:], *loaded.window[-1:])]
    last = max([*seqs, loaded.state.window_start - 1, counts["last_seq"] or -1])
    counts["last_seq"] = last if last >= 0 else None
    counts["messages"] = loaded.info.message_count
    next_seq = loaded.next_seq if loaded.next_seq is not None else last + 1
    return Resumed(window, loaded.state, counts, summary, _as_units(loaded.unfolded), next_seq)


def _as_units(stored: Sequence[StoredMessage]) -> list[Unit]:
    window = Window()
    for s in stored:
        if s.message.role == "tool" and window.last is None:
            continue  # the read began inside a unit; its head is older than the retry queue
        window.push(Entry(s.seq, s.message, s.tokens))
    return list(window.units)
