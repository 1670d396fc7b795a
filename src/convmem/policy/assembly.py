"""Context assembly: fit pinned + summary + blocks + window + input into the budget, exactly.

Pure: it reads the window and already-rendered block texts and returns a
:class:`Context`; it never changes the window and never does I/O.

The budget is spent in this order. The *irreducible* part goes in first:
pinned system messages, the newest complete unit, the input and priority-0
blocks. The rest fits around it; when it does not, convmem gives up, in turn:
the lowest-priority blocks (truncated, then dropped), the oldest window units
(left out for this turn only, still active), and the summary. A block with a
``reserve`` (a recall block's reserved share of the budget) gives up only what
lies beyond it before the oldest window units go: a recalled message that
matches the input outranks the oldest turns of the window, up to the reserve.
Itemized blocks lose whole items, the lowest-ranked first. If the
irreducible part alone is too big, ``on_overflow`` decides: ``"raise"``
raises :class:`ContextOverflowError`, ``"truncate"`` cuts the largest
irreducible texts with a visible marker. The total, counted by the model's own
counter with its per-message overhead, plus the reserved output, never
exceeds the budget.

The order is chosen for providers' prompt caches, which bill a repeated
request prefix at a discount: pinned messages, then what changes rarely (the
stable system blocks, the running summary: they change at eviction), then the
window (append-only between evictions), and last what changes every turn: the
per-turn blocks, next to the newest user message (see
:mod:`convmem.policy.blockfit`). The account reports the prefix shared with
the previous context and where the stable parts end (:mod:`convmem.policy.prefix`).

In the common case (everything fits) assembly is O(1) in Python plus a C-level
copy of the window's cached OpenAI dicts, and O(the current tool loop) for the
user blocks and the prefix measure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from ..errors import ConfigurationError, ContextOverflowError
from ..messages import Message
from ..tokens import TokenCounter
from .blockfit import (
    BlockText,
    Placed,
    block_tokens,
    default_block_template,
    find_carrier,
    merge_cuts,
    place_blocks,
    shrink_blocks,
    with_prefix,
)
from .context import Account, Context, LeftOut, Truncation
from .prefix import Layout, WindowTail, describe, reused
from .truncate import cut_to_fit
from .units import Unit, Window

__all__ = ["BlockText", "Overflow", "SummaryText", "assemble", "default_block_template", "summary_message"]

Overflow = Literal["truncate", "raise"]
SUMMARY_HEADER = "Summary of the earlier conversation (messages {first}-{last}):\n"


@dataclass(frozen=True, slots=True)
class SummaryText:
    """The running summary and the seq range it covers; ``tokens`` is its message's count."""

    text: str
    first_seq: int
    last_seq: int
    tokens: int
    message: Message


def summary_message(text: str, first_seq: int, last_seq: int) -> Message:
    """The system message that carries the running summary into the context."""
    return Message(role="system", content=SUMMARY_HEADER.format(first=first_seq, last=last_seq) + text)


@dataclass(frozen=True, slots=True)
class _Sized:
    message: Message
    tokens: int
    seq: int | None


def assemble(
    *,
    window: Window,
    counter: TokenCounter,
    budget: int,
    reserve: int,
    format: str = "openai",
    summary: SummaryText | None = None,
    blocks: Sequence[BlockText] = (),
    inputs: Sequence[tuple[Message, int]] = (),
    on_overflow: Overflow = "truncate",
    evicted: Sequence[LeftOut] = (),
    template: Callable[[Sequence[BlockText]], str] = default_block_template,
    render_openai: Callable[[Message], dict[str, Any]] | None = None,
    previous: dict[str, Layout] | None = None,
    cache_breakpoints: bool = True,
) -> Context:
    """Build the context for the next request. See the module docstring for the order of sacrifice.

    ``previous`` holds the layout of the last context built in each format: the account's ``reused``
    is measured against it, and this context's layout replaces it. ``cache_breakpoints`` places
    Anthropic ``cache_control`` marks where the stable parts end.
    """
    overhead = counter.reply_priming
    if format == "anthropic":
        overhead += _placeholder_tokens(counter)
    available = budget - reserve - overhead
    left_out: list[LeftOut] = list(evicted)
    warnings: list[str] = []

    units = window.units
    pending = window.pending
    stop = len(units) - (pending is not None)
    if pending is not None:
        left_out.append(
            LeftOut(
                "pending_tool_results",
                len(pending),
                pending.tokens,
                pending.first_seq,
                pending.last_seq,
                f"awaiting results for calls {sorted(pending.pending)}",
            )
        )
    window_tokens = window.tokens - (pending.tokens if pending is not None else 0)
    input_tokens = sum(tokens for _, tokens in inputs) if inputs else 0
    summary_tokens = summary.tokens if summary is not None else 0
    kept_blocks = [b for b in blocks if b.text]
    target = find_carrier(inputs, units, 0, stop) if any(b.position == "user" for b in kept_blocks) else None
    placed = place_blocks(counter, kept_blocks, template, target)

    start = 0
    total = window.pinned_tokens + summary_tokens + placed.tokens + window_tokens + input_tokens
    if total > available:
        cuts: list[LeftOut] = []
        # Blocks give up what lies beyond their reserves, then the oldest window units go, then the reserves.
        for keep_reserve in (True, False) if any(b.reserve for b in kept_blocks) else (False,):
            # A block's tokens inside the rendered message can differ by a few from its own count (merges at
            # its edges), so shrink again until the rendered total fits or only priority-0 blocks are left.
            for _ in range(4):
                kept_blocks, _ = shrink_blocks(counter, kept_blocks, total - available, cuts, keep_reserve=keep_reserve)
                new = place_blocks(counter, kept_blocks, template, target)
                total += new.tokens - placed.tokens
                unchanged, placed = new.tokens == placed.tokens, new
                if total <= available or unchanged or not any(b.priority > 0 for b in kept_blocks):
                    break
            if total > available and start == 0:
                start, dropped_tokens = _drop_oldest(units, stop, total - available, left_out)
                window_tokens -= dropped_tokens
                total -= dropped_tokens
                if target is not None and target[0] is not None and target[1] < start:
                    # The user message the blocks rode on was left out: they go at the end, as their own message.
                    target = find_carrier(inputs, units, start, stop)
                    new = place_blocks(counter, kept_blocks, template, target)
                    total += new.tokens - placed.tokens
                    placed = new
            if total <= available:
                break
        left_out.extend(merge_cuts(cuts))
        if total > available and summary is not None:
            left_out.append(
                LeftOut(
                    "budget", 0, summary_tokens, summary.first_seq, summary.last_seq, "the running summary did not fit"
                )
            )
            total -= summary_tokens
            summary, summary_tokens = None, 0

    truncations: list[Truncation] = []
    pinned_tokens = window.pinned_tokens
    if total > available:
        if target is not None and target[0] is not None and target[1] < stop - 1:
            # Only the newest unit is irreducible: blocks riding on an older user message go at the end.
            target = find_carrier(inputs, units, stop - 1, stop)
            new = place_blocks(counter, kept_blocks, template, target)
            total += new.tokens - placed.tokens
            placed = new
        pinned = [_Sized(e.message, e.tokens, e.seq) for e in window.pinned]
        newest = [_Sized(e.sent, e.tokens, e.seq) for e in units[stop - 1].entries] if stop > start else []
        sized_inputs = [_Sized(m, t, None) for m, t in inputs]
        irreducible = pinned + newest + sized_inputs
        if on_overflow == "raise":
            raise ContextOverflowError(
                "the pinned messages, the newest unit and the input do not fit",
                needed=total + overhead + reserve,
                budget=budget,
            )
        before = list(irreducible)
        saved = _truncate_largest(counter, irreducible, total - available, truncations)
        if saved < total - available:
            raise ContextOverflowError(
                "even truncated, the irreducible context does not fit",
                needed=total + overhead + reserve,
                budget=budget,
            )
        total -= saved
        cut = ", ".join(
            f"{new.message.role} message {'(input)' if new.seq is None else f'seq {new.seq}'} "
            f"{old.tokens} -> {new.tokens} tokens"
            for old, new in zip(before, irreducible, strict=True)
            if new is not old
        )
        warnings.append(f"truncated {len(truncations)} oversized message(s) to fit the budget of {budget}: {cut}")
        pinned = irreducible[: len(pinned)]
        newest = irreducible[len(pinned) : len(pinned) + len(newest)]
        sized_inputs = irreducible[len(pinned) + len(newest) :]
        window_tokens = sum(u.tokens for u in islice(units, start, max(start, stop - 1))) + sum(
            s.tokens for s in newest
        )
        pinned_tokens = sum(s.tokens for s in pinned)
        input_tokens = sum(s.tokens for s in sized_inputs)
        pinned_messages = [s.message for s in pinned]
        newest_messages = [s.message for s in newest]
        input_messages = [s.message for s in sized_inputs]
    else:
        pinned_messages = [e.message for e in window.pinned]
        newest_messages = [e.sent for e in units[stop - 1].entries] if stop > start else []
        input_messages = [m for m, _ in inputs]

    window_range = (units[start].first_seq, units[stop - 1].last_seq) if stop > start else None
    head = [*pinned_messages, *(m for m in (placed.stable, summary and summary.message, placed.turn) if m)]
    carrier = placed.carrier
    in_window = carrier is not None and carrier.seq is not None
    after = WindowTail(units, start, stop, carrier.where if carrier is not None and in_window else None)
    n_window = len(window.rendered) - (len(pending.entries) if pending is not None else 0) - _flat_offset(units, start)
    layout, stable = describe(
        pinned=((len(pinned_messages), window.pinned[-1].seq if window.pinned else None), pinned_tokens)
        if not truncations
        else (object(), pinned_tokens),
        pinned_count=len(pinned_messages),
        placed=placed,
        summary=((summary.first_seq, summary.last_seq, summary.text) if summary else None, summary_tokens),
        window_range=window_range if not truncations else None,
        window_tokens=window_tokens,
        n_window=n_window,
        after=after,
        inputs=[(m, t) for m, (_, t) in zip(input_messages, inputs, strict=True)],
        request_end=pinned_tokens + summary_tokens + placed.tokens + window_tokens + input_tokens,
    )
    shared = reused(previous.get(format) if previous is not None else None, layout, window_tokens, after)
    if previous is not None:
        previous[format] = layout
    account = Account(
        budget,
        reserve,
        pinned_tokens,
        summary_tokens,
        block_tokens(counter, kept_blocks, placed.tokens),
        window_tokens,
        input_tokens,
        overhead,
        counter.exact,
        counter.name,
        shared,
        stable.offsets,
    )

    if format == "openai" and render_openai is not None and not truncations:
        messages = [_cached(e, render_openai) for e in window.pinned] if window.pinned else []
        messages += [render_openai(m) for m in head[len(pinned_messages) :]]
        offset = len(messages)
        end = len(window.rendered) - (len(pending.entries) if pending is not None else 0)
        if n_window == end == len(window.rendered):  # the whole window: extending from the deque skips islice
            messages += window.rendered  # type: ignore[arg-type]
        else:
            messages += islice(window.rendered, end - n_window, end)  # type: ignore[arg-type]
        if carrier is not None and in_window:
            messages[offset + n_window - after.entries_after_carrier - 1] = render_openai(carrier.augmented)
        if input_messages:
            messages += [render_openai(m) for m in _with_carrier(input_messages, placed)]
        if placed.trailing is not None:
            messages.append(render_openai(placed.trailing))
        return Context("openai", messages, None, account, tuple(left_out), (), window_range, tuple(warnings))

    body = [m for u in islice(units, start, max(start, stop - 1)) for m in u.sent] + newest_messages
    if in_window:
        position = len(body) - after.entries_after_carrier - 1
        body[position] = with_prefix(body[position], placed.user_text or "")
    ordered = head + body + _with_carrier(input_messages, placed)
    if placed.trailing is not None:
        ordered.append(placed.trailing)
    marks = stable.indexes if format == "anthropic" and cache_breakpoints else ()
    rendered, system = _render(format, ordered, marks)
    return Context(
        format, rendered, system, account, tuple(left_out), tuple(truncations), window_range, tuple(warnings)
    )


def _with_carrier(inputs: list[Message], placed: Placed) -> list[Message]:
    carrier = placed.carrier
    if carrier is None or carrier.seq is not None:
        return inputs
    out = list(inputs)
    out[carrier.where] = with_prefix(out[carrier.where], placed.user_text or "")
    return out


def _cached(entry: Any, render: Callable[[Message], dict[str, Any]]) -> dict[str, Any]:
    if entry.rendered is None:
        entry.rendered = render(entry.message)
    rendered: dict[str, Any] = entry.rendered
    return rendered


def _flat_offset(units: Any, index: int) -> int:
    """Number of messages in the first ``index`` units (O(index), only off the common path)."""
    if index == 0:
        return 0
    return sum(len(u.entries) for u in islice(units, 0, index))


def _render(
    format: str, messages: list[Message], marks: Sequence[int] = ()
) -> tuple[list[dict[str, Any]], str | list[dict[str, Any]] | None]:
    from ..formats import openai, responses

    if format == "openai":
        return openai.to_openai_messages(messages), None  # a tool result's images move to a user message
    if format == "anthropic":
        from ..formats.anthropic import _marks as _breakpoints

        # A name is counted, never refused; system blocks keep their cache_control.
        request = _breakpoints.render(messages, marks, drop_names=True)
        return list(request.messages), request.system
    if format == "responses":
        return responses.to_responses(messages, drop_names=True), None
    raise ConfigurationError(f"format must be 'openai', 'anthropic' or 'responses', got {format!r}")


def _placeholder_tokens(counter: TokenCounter) -> int:
    from ..formats.anthropic._render import CONTINUATION_PLACEHOLDER

    return counter.count_message(Message(role="user", content=CONTINUATION_PLACEHOLDER))


def _drop_oldest(units: Any, stop: int, over: int, left_out: list[LeftOut]) -> tuple[int, int]:
    """Leave out the oldest complete units (never the newest) until ``over`` tokens are saved."""
    start, dropped, messages = 0, 0, 0
    users = sum(1 for u in islice(units, 0, stop) if u.kind == "user")
    unit: Unit
    for unit in islice(units, 0, max(0, stop - 1)):
        if dropped >= over and (unit.kind == "user" or users == 0):
            break
        dropped += unit.tokens
        messages += len(unit.entries)
        users -= unit.kind == "user"
        start += 1
    if start:
        left_out.append(
            LeftOut(
                "budget",
                messages,
                dropped,
                units[0].first_seq,
                units[start - 1].last_seq,
                "active, but left out to fit blocks and input this turn",
            )
        )
    return start, dropped


def _truncate_largest(counter: TokenCounter, items: list[_Sized], over: int, truncations: list[Truncation]) -> int:
    """Cut the largest irreducible messages until ``over`` tokens are saved; returns tokens saved."""
    saved = 0
    for position in sorted(range(len(items)), key=lambda i: -items[i].tokens):
        if saved >= over:
            break
        item = items[position]
        target = max(0, item.tokens - (over - saved))
        cut, tokens = cut_to_fit(counter, item.message, target)
        if cut is None:
            continue
        if tokens >= item.tokens:
            continue
        saved += item.tokens - tokens
        truncations.append(Truncation(item.seq, item.tokens, tokens))
        items[position] = _Sized(cut, tokens, item.seq)
    return saved
