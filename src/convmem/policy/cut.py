"""Cut a context to its budget: what gives up its place, in which order, and what is never cut.

What comes in: a :class:`~convmem.policy.draft.Draft` that does not fit in ``available`` tokens (the
budget less the reserved output and the request's overhead). What happens, in the order of
sacrifice: the blocks shrink, the lowest priority first, but not below a block's ``reserve``
(:func:`fit_blocks`); the oldest window units are left out for this turn, never the newest
(:func:`leave_out_oldest`), and the user blocks move if the message they rode on went; the blocks
shrink below their reserves; the running summary goes (:func:`cut`). If the *irreducible* part
alone (the pinned messages, the newest unit, the input and the priority-0 blocks) is still too big,
``on_overflow`` decides (:func:`cut_irreducible`): ``"raise"`` raises ContextOverflowError,
``"truncate"`` cuts its largest messages with a visible marker. What goes out: a draft that fits,
with everything it left out in ``left_out``, in the order it was decided.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, NamedTuple

from ..errors import ContextOverflowError
from ..messages import Message
from ..tokens import TokenCounter
from .blockfit import BlockText, merge_cuts, shrink_blocks
from .context import LeftOut, Truncation
from .draft import Assembly, Draft, Truncated
from .placement import Placed, place_blocks, place_carrier
from .truncate import cut_to_fit
from .units import Unit

__all__ = ["BlockFit", "Oldest", "cut", "cut_irreducible", "fit_blocks", "leave_out_oldest"]


class BlockFit(NamedTuple):
    """The blocks after :func:`fit_blocks`: those kept (as cut), where they go, and what was cut, in order."""

    blocks: list[BlockText]
    placed: Placed
    cuts: list[LeftOut]


def fit_blocks(
    counter: TokenCounter,
    blocks: Sequence[BlockText],
    template: Callable[[Sequence[BlockText]], str],
    placed: Placed,
    over: int,
    *,
    keep_reserve: bool,
) -> BlockFit:
    """Shrink ``blocks`` (placed as ``placed``) until the placed blocks have saved ``over`` tokens.

    A block's tokens inside the rendered message can differ by a few from its own count (merges at
    its edges), so the blocks shrink again, up to four rounds, until the placement has saved
    ``over``, a round saved nothing, or only priority-0 blocks are left. They stay on the same
    carrier. With ``keep_reserve``, no block is cut below its ``reserve``.
    """
    kept: Sequence[BlockText] = blocks
    cuts: list[LeftOut] = []
    for _ in range(4):
        kept, _ = shrink_blocks(counter, kept, over, cuts, keep_reserve=keep_reserve)
        new = place_blocks(counter, kept, template, placed.carrier)
        over += new.tokens - placed.tokens
        unchanged, placed = new.tokens == placed.tokens, new
        if over <= 0 or unchanged or not any(b.priority > 0 for b in kept):
            break
    return BlockFit(list(kept), placed, cuts)


class Oldest(NamedTuple):
    """What :func:`leave_out_oldest` left out: ``units[:start]``, their tokens, and the entry saying so."""

    start: int
    tokens: int
    left_out: LeftOut | None


def leave_out_oldest(units: Any, stop: int, over: int) -> Oldest:
    """Leave out the oldest complete units of ``units[:stop]`` (never the newest) until ``over`` tokens are saved.

    Once enough is saved, it goes on to the next user message, so that what is sent starts with a
    user turn (unless no user message is left).
    """
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
    if not start:
        return Oldest(0, 0, None)
    detail = "active, but left out to fit blocks and input this turn"
    return Oldest(
        start, dropped, LeftOut("budget", messages, dropped, units[0].first_seq, units[start - 1].last_seq, detail)
    )


def cut(request: Assembly, draft: Draft, available: int) -> Draft:
    """Give up what does not fit in ``available`` tokens, in the order of the module docstring, short of the
    irreducible part (see :func:`cut_irreducible`)."""
    counter, template, units = request.counter, request.template, request.window.units
    blocks, placed, start, total, window_tokens = (
        draft.blocks,
        draft.placed,
        draft.start,
        draft.total,
        draft.window_tokens,
    )
    left_out = list(draft.left_out)
    cuts: list[LeftOut] = []
    # Blocks give up what lies beyond their reserves, then the oldest window units go, then the reserves.
    for keep_reserve in (True, False) if any(b.reserve for b in blocks) else (False,):
        fitted = fit_blocks(counter, blocks, template, placed, total - available, keep_reserve=keep_reserve)
        total += fitted.placed.tokens - placed.tokens
        blocks, placed = fitted.blocks, fitted.placed
        cuts += fitted.cuts
        if total > available and start == 0:
            oldest = leave_out_oldest(units, draft.stop, total - available)
            start, window_tokens, total = oldest.start, window_tokens - oldest.tokens, total - oldest.tokens
            if oldest.left_out is not None:
                left_out.append(oldest.left_out)
            carrier = placed.carrier
            if carrier is not None and carrier.seq is not None and carrier.where < start:
                # The user message the blocks rode on was left out: they go to a newer one, or at the end.
                new = place_carrier(counter, blocks, template, request.inputs, units, start, draft.stop)
                total += new.tokens - placed.tokens
                placed = new
        if total <= available:
            break
    left_out += merge_cuts(cuts)
    summary = draft.summary
    if total > available and summary is not None:
        detail = "the running summary did not fit"
        left_out.append(LeftOut("budget", 0, summary.tokens, summary.first_seq, summary.last_seq, detail))
        total -= summary.tokens
        summary = None
    return draft._replace(
        blocks=blocks,
        placed=placed,
        summary=summary,
        start=start,
        window_tokens=window_tokens,
        total=total,
        left_out=tuple(left_out),
    )


class _Sized(NamedTuple):
    message: Message
    tokens: int
    seq: int | None


def cut_irreducible(request: Assembly, draft: Draft, available: int) -> Draft:
    """Fit the irreducible part (pinned messages, the newest unit, the inputs) as ``on_overflow`` says.

    Only the newest unit is irreducible, so user blocks riding on an older message of the window move
    to the newest unit's user message, or to the end. Then ``"raise"`` raises; ``"truncate"`` cuts the
    largest irreducible messages until the draft fits, and warns of each cut.

    Raises:
        ContextOverflowError: ``on_overflow`` is ``"raise"``, or even truncated the part does not fit;
            ``needed`` is what the request would take with the reserved output and the overhead.
    """
    counter, window, units = request.counter, request.window, request.window.units
    start, stop = draft.start, draft.stop
    placed, total = draft.placed, draft.total
    carrier = placed.carrier
    if carrier is not None and carrier.seq is not None and carrier.where < stop - 1:
        new = place_carrier(counter, draft.blocks, request.template, request.inputs, units, stop - 1, stop)
        total += new.tokens - placed.tokens
        placed = new
    pinned = [_Sized(e.message, e.tokens, e.seq) for e in window.pinned]
    newest = [_Sized(e.sent, e.tokens, e.seq) for e in units[stop - 1].entries] if stop > start else []
    inputs = [_Sized(m, t, None) for m, t in request.inputs]
    irreducible = pinned + newest + inputs
    needed = total + request.budget - available  # with the reserved output and the overhead
    if request.on_overflow == "raise":
        raise ContextOverflowError(
            "the pinned messages, the newest unit and the input do not fit", needed=needed, budget=request.budget
        )
    before = list(irreducible)
    truncations: list[Truncation] = []
    saved = _truncate_largest(counter, irreducible, total - available, truncations)
    if saved < total - available:
        raise ContextOverflowError(
            "even truncated, the irreducible context does not fit", needed=needed, budget=request.budget
        )
    cuts = ", ".join(
        f"{new.message.role} message {'(input)' if new.seq is None else f'seq {new.seq}'} "
        f"{old.tokens} -> {new.tokens} tokens"
        for old, new in zip(before, irreducible, strict=True)
        if new is not old
    )
    warning = f"truncated {len(truncations)} oversized message(s) to fit the budget of {request.budget}: {cuts}"
    pinned = irreducible[: len(pinned)]
    newest = irreducible[len(pinned) : len(pinned) + len(newest)]
    inputs = irreducible[len(pinned) + len(newest) :]
    older = sum(u.tokens for u in islice(units, start, max(start, stop - 1)))
    truncated = Truncated(
        [s.message for s in pinned], [s.message for s in newest], [s.message for s in inputs], tuple(truncations)
    )
    return draft._replace(
        placed=placed,
        total=total - saved,
        pinned_tokens=sum(s.tokens for s in pinned),
        window_tokens=older + sum(s.tokens for s in newest),
        input_tokens=sum(s.tokens for s in inputs),
        truncated=truncated,
        warnings=(*draft.warnings, warning),
    )


def _truncate_largest(counter: TokenCounter, items: list[_Sized], over: int, truncations: list[Truncation]) -> int:
    """Cut the largest irreducible messages until ``over`` tokens are saved; returns tokens saved."""
    saved = 0
    for position in sorted(range(len(items)), key=lambda i: -items[i].tokens):
        if saved >= over:
            break
        item = items[position]
        target = max(0, item.tokens - (over - saved))
        cut_message, tokens = cut_to_fit(counter, item.message, target)
        if cut_message is None:
            continue
        if tokens >= item.tokens:
            continue
        saved += item.tokens - tokens
        truncations.append(Truncation(item.seq, item.tokens, tokens))
        items[position] = _Sized(cut_message, tokens, item.seq)
    return saved
