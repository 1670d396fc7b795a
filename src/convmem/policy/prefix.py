"""The request prefix a context shares with the previous one, and where its stable parts end.

Providers bill the start of a request that repeats an earlier request at a
discount (OpenAI automatically; Anthropic at ``cache_control`` breakpoints).
Assembly lays a context out so that its prefix changes as rarely as possible
(see :mod:`convmem.policy.assembly`); this module measures it.

A :class:`Layout` describes a context by identity, not by content: the system
parts by their keys (pinned messages by their seqs, blocks and summary by their
text), the window by the seqs it spans (stored messages never change, and the
window is append-only between evictions), and where the per-turn user blocks
ride. Comparing two layouts is O(1) plus a walk over the window messages after
the point where they differ (the newest turn, or the current tool loop), so
measuring the reuse adds no work that grows with the history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ..messages import Message
from .placement import CARRY_RATIO, Placed, with_prefix

__all__ = ["Layout", "Stable", "WindowTail", "carry_blocks", "describe", "reused"]


class Layout(NamedTuple):
    """What a context is made of, in order, by identity.

    Attributes:
        system: ``(key, tokens)`` of the pinned messages, the stable blocks, the per-turn system blocks,
            the blocks' note and the summary, in that order (key None and 0 tokens when absent).
        first: the seq of the first window message sent, or None.
        last: the seq of the last window message sent, or None.
        carrier: the seq of the window message the user blocks ride on, or None.
        user_text: the user blocks' text, or None.
        user_tokens: the tokens the user blocks add.
        tail: what follows the window (the inputs, as sent, and a trailing blocks message).
        tail_tokens: their tokens.
    """

    system: tuple[tuple[Any, int], ...]
    first: int | None
    last: int | None
    carrier: int | None
    user_text: str | None
    user_tokens: int
    tail: tuple[Any, ...]
    tail_tokens: int


class Stable(NamedTuple):
    """Where a context's stable parts end: token offsets and the indexes of the messages they end with.

    ``marks`` pairs each breakpoint's offset with its message index in the ordered message list, in
    priority order: the end of what the next turn resends unchanged, the end of the request (inside
    a tool loop), the end of the system part, the end of the pinned messages.
    """

    marks: tuple[tuple[int, int], ...]
    offsets: tuple[int, ...]  # the marks' offsets, ascending

    @property
    def indexes(self) -> tuple[int, ...]:
        return tuple(index for _, index in self.marks)


def reused(previous: Layout | None, current: Layout, window_tokens: int, after: Callable[[int], int]) -> int:
    """Tokens at the start of ``current`` identical to ``previous``.

    ``window_tokens`` is the current window's tokens as sent (without the user blocks), and
    ``after(seq)`` the tokens of its messages from ``seq`` on.
    """
    if previous is None:
        return 0
    total = 0
    if previous.system == current.system:  # the common case, compared in C
        for _, tokens in current.system:
            total += tokens
    else:
        for (key_a, tokens_a), (key_b, tokens_b) in zip(previous.system, current.system, strict=True):
            if key_a != key_b or tokens_a != tokens_b:
                return total
            total += tokens_b
    if current.first is None or previous.first != current.first or previous.last is None or current.last is None:
        return total
    same_carrier = previous.carrier == current.carrier and previous.user_text == current.user_text
    if same_carrier:
        end = min(previous.last, current.last) + 1
    else:
        end = min(
            previous.last + 1 if previous.carrier is None else previous.carrier,
            current.last + 1 if current.carrier is None else current.carrier,
        )
    total += window_tokens - (after(end) if end <= current.last else 0)
    if same_carrier and current.carrier is not None and current.carrier < end:
        total += current.user_tokens
    if same_carrier and previous.last == current.last and previous.tail == current.tail:
        total += current.tail_tokens
    return total


def stable_marks(
    *,
    pinned: tuple[int, int],
    system_end: tuple[int, int],
    per_turn_system: bool,
    carrier: tuple[int, int] | None,
    end: tuple[int, int],
) -> Stable:
    """The breakpoints of one context, each ``(token offset, message index)``; see :class:`Stable`.

    Args:
        pinned: where the pinned messages end.
        system_end: where the stable system part ends (pinned, stable blocks, summary).
        per_turn_system: a system block changes every turn, so nothing after the system part is stable.
        carrier: where the message before the one carrying the user blocks ends, if any.
        end: where the request ends.
    """
    if per_turn_system:
        marks: tuple[tuple[int, int], ...] = (system_end, system_end, pinned)
    elif carrier is not None:
        # A tool loop after the carrier: the next call resends all of it.
        marks = (carrier, end, system_end, pinned) if carrier[1] < end[1] - 1 else (carrier, system_end, pinned)
    else:
        marks = (end, system_end, pinned)
    seen: list[int] = []  # at most four marks: a list beats a set here
    out = []
    for mark in marks:
        if mark[1] >= 0 and mark[0] > 0 and mark[1] not in seen:
            seen.append(mark[1])
            out.append(mark)
    offsets = [offset for offset, _ in out]
    if len(offsets) > 1:
        offsets = sorted(set(offsets))
    return Stable(tuple(out), tuple(offsets))


class WindowTail:
    """The window messages sent, counted from the end back: O(the units since the newest user message)."""

    def __init__(self, units: Any, start: int, stop: int, carrier_unit: int | None) -> None:
        self.units, self.start, self.stop = units, start, stop
        self.entries_after_carrier = 0  # window messages after the carrier
        self.tokens_from_carrier = 0  # tokens of the carrier's unit and the units after it
        if carrier_unit is not None:
            for index in range(stop - 1, carrier_unit, -1):
                self.entries_after_carrier += len(units[index].entries)
                self.tokens_from_carrier += units[index].tokens
            self.entries_after_carrier += len(units[carrier_unit].entries) - 1
            self.tokens_from_carrier += units[carrier_unit].tokens

    def __call__(self, seq: int) -> int:
        """Tokens of the window messages sent with a seq >= ``seq``."""
        tokens = 0
        for index in range(self.stop - 1, self.start - 1, -1):
            unit = self.units[index]
            if unit.last_seq < seq:
                break
            if unit.first_seq >= seq:  # the whole unit (the common case: the newest turn): its kept total
                tokens += unit.tokens
            else:
                tokens += sum([e.tokens for e in unit.entries if e.seq >= seq])
        return tokens


def describe(
    *,
    tools: tuple[Any, int],
    pinned: tuple[Any, int],
    pinned_count: int,
    placed: Placed,
    summary: tuple[Any, int],
    window_range: tuple[int, int] | None,
    window_tokens: int,
    n_window: int,
    after: WindowTail,
    inputs: Sequence[tuple[Message, int]],
    request_end: int,
) -> tuple[Layout, Stable]:
    """The layout and the breakpoints of a context sent in the order tools, pinned, stable blocks, per-turn
    system blocks, blocks' note, summary, window (``n_window`` messages), inputs, trailing user blocks.

    ``tools`` (their key and tokens) heads the layout's system part; the breakpoints' offsets leave them out
    (the caller adds them where it needs them)."""
    carrier = placed.carrier
    input_tokens = sum([t for _, t in inputs]) if inputs else 0
    layout = Layout(
        (
            tools,
            pinned,
            (placed.stable.content if placed.stable else None, placed.stable_tokens),
            (placed.turn.content if placed.turn else None, placed.turn_tokens),
            (placed.note.content if placed.note else None, placed.note_tokens),
            summary,  # a user note after every system message (policy/render.py)
        ),
        window_range[0] if window_range else None,
        window_range[1] if window_range else None,
        carrier.seq if carrier is not None else None,
        placed.user_text,
        placed.user_tokens,
        (*(m for m, _ in inputs), placed.trailing) if (inputs or placed.trailing) else (),
        input_tokens + (placed.user_tokens if placed.trailing is not None else 0),
    )
    heads = pinned_count + (placed.stable is not None) + (placed.note is not None) + (summary[0] is not None)
    system_tokens = pinned[1] + placed.stable_tokens + placed.note_tokens + summary[1]
    before_window = system_tokens + placed.turn_tokens
    first_window = heads + (placed.turn is not None)
    carrier_mark: tuple[int, int] | None = None
    if carrier is not None and carrier.seq is not None:
        index = first_window + n_window - after.entries_after_carrier - 1
        carrier_mark = (before_window + window_tokens - after.tokens_from_carrier, index - 1)
    elif carrier is not None:
        before_inputs = sum(t for _, t in inputs[: carrier.where])
        carrier_mark = (before_window + window_tokens + before_inputs, first_window + n_window + carrier.where - 1)
    elif placed.trailing is not None:
        carrier_mark = (request_end - placed.user_tokens, first_window + n_window + len(inputs) - 1)
    last_index = first_window + n_window + len(inputs) + (placed.trailing is not None) - 1
    system_end = (system_tokens, heads - 1)
    if placed.turn is not None:  # the summary follows the per-turn system blocks: the stable part ends before them
        stable_heads = pinned_count + (placed.stable is not None)
        system_end = (pinned[1] + placed.stable_tokens, stable_heads - 1 if stable_heads > pinned_count else -1)
    stable = stable_marks(
        pinned=(pinned[1], pinned_count - 1 if heads > pinned_count else -1),
        system_end=system_end,
        per_turn_system=placed.turn is not None,
        carrier=carrier_mark,
        end=(request_end, last_index),
    )
    return layout, stable


def carry_blocks(
    window: Any, layout: Layout, count: Callable[[Message], int], render: Callable[[Message], dict[str, Any] | None]
) -> int | None:
    """Let the user message the last request's user blocks rode on keep them, once a newer one has come.

    Moving the blocks to the newer message resends everything after the older one uncached; keeping
    them holds their tokens in the window until it is evicted (earlier evictions, each a cache miss).
    They stay when what followed the older message (its tool loop, the reply) outweighs them by
    ``CARRY_RATIO``. The stored message does not change; a reopened memory sends its window without
    them. ``count`` and ``render`` give the message's tokens and OpenAI dict as sent. Returns the seq of the
    message that keeps them, or None. O(the units since it).
    """
    if layout.carrier is None or layout.user_text is None:
        return None
    tail, newer, entry = 0, False, None
    for unit in reversed(window.units):
        if unit.kind == "user":
            if unit.entries[0].seq == layout.carrier:
                entry = unit.entries[0]
                break
            tail, newer = 0, True  # only what lies between the carrier and the next user message counts
        else:
            tail += unit.tokens
    if entry is None or not newer or entry.carried is not None or tail < CARRY_RATIO * layout.user_tokens:
        return None
    message = with_prefix(entry.message, layout.user_text)
    if not window.carry(entry.seq, message, count(message), render(message)):
        return None
    return int(entry.seq)
