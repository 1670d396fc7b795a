"""Blocks in the context: their texts for a turn, their claim on the budget, their exact share, how they shrink.

What comes in: the memory's blocks (static, callable, working, facts, recall) and the turn.
What happens: :func:`block_texts` renders each one for this turn, cut to its own ``max_tokens``
(a block of ranked items, such as recalled messages, loses whole items, the lowest-ranked first);
:func:`block_room` is what they claim ahead of the window at eviction. When a context does not fit,
:func:`shrink_blocks` cuts the lowest priority first and never touches priority 0; a block with a
``reserve`` is not cut below it before the oldest window units have gone (see
:func:`~convmem.policy.cut.cut`). What goes out: :class:`BlockText`, a block's text for this turn;
where it goes is :mod:`convmem.policy.placement`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..tokens import TokenCounter
from .context import LeftOut
from .truncate import truncate_text

__all__ = [
    "PER_TURN_LOW_WATERMARK",
    "BlockItem",
    "BlockText",
    "any_per_turn",
    "block_room",
    "block_texts",
    "block_tokens",
    "merge_cuts",
    "shrink_blocks",
]


class BlockItem(NamedTuple):
    """One line of an itemized block and its rank (1 = the most relevant; cut last)."""

    text: str
    rank: int


@dataclass(frozen=True, slots=True)
class BlockText:
    """A block's text for this turn: lower ``priority`` numbers are kept longer; 0 is never cut.

    ``position`` ``"system"`` renders it into a system message (after the pinned
    ones, or after those if ``per_turn``, before the summary's note); ``"user"`` prepends it (as its own
    text part) to the latest user message, else sends it as a user message at the
    end of the request: never in a system message.

    ``trusted`` says the text is the application's own (its system role is earned); a block whose text users,
    tools or models wrote is never sent in a system message (:func:`~convmem.policy.placement.role_of`).

    ``per_turn`` says the text changes every turn (it depends on the input): it is
    placed after everything that stays the same, so the prefix before it is reused.

    ``items``, when given, are the block's lines in display order (``text`` is them
    joined by newlines); shrinking drops whole items, the highest rank number first.
    ``reserve`` is the block's reserved share of the budget, in tokens: up to that
    size, the oldest window units are left out before the block is cut.
    """

    name: str
    text: str
    priority: int = 1
    position: str = "system"
    items: tuple[BlockItem, ...] = ()
    reserve: int = 0
    per_turn: bool = False
    trusted: bool = True


def itemized(block: BlockText, items: Sequence[BlockItem]) -> BlockText:
    """``block`` with only ``items`` (kept in display order)."""
    return replace(block, text="\n".join(i.text for i in items), items=tuple(items))


def fit_items(count: Callable[[str], int], block: BlockText, limit: int) -> BlockText:
    """Drop ``block``'s lowest-ranked items until its text counts at most ``limit`` tokens."""
    items = list(block.items)
    tokens = count(block.text)
    by_rank = sorted(items, key=lambda i: -i.rank)
    while tokens > limit and by_rank:
        worst = by_rank.pop(0)
        items.remove(worst)
        # Each line costs about its own count plus one for the newline; recount exactly near the limit.
        tokens -= count(worst.text) + 1
        if tokens <= limit + 4:
            tokens = count("\n".join(i.text for i in items))
    return itemized(block, items)


def block_texts(
    blocks: Sequence[Any], query: str | None, turn: Any, count: Callable[[str], int], room: int
) -> list[BlockText]:
    """Render every block for this turn, each cut to its own ``max_tokens`` if it has one.

    A block with ``render_items(turn)`` gives ranked lines ``(text, rank)``: they are cut whole,
    and its ``share`` of ``room`` (the budget less the reserved output) becomes its ``reserve``.
    Otherwise ``render_turn(turn)`` or ``render(query)`` gives its text, cut head + tail.
    """
    out = []
    for block in blocks:
        cap = getattr(block, "max_tokens", None)
        position = getattr(block, "position", "system")
        per_turn = bool(getattr(block, "per_turn", False))
        # A block of the application's own class is its text; the built-in kinds that hold what users, tools
        # or models wrote (facts, recall, working blocks) say trusted = False.
        trusted = getattr(block, "trusted", True) is not False
        render_items = getattr(block, "render_items", None)
        if render_items is not None:
            items = tuple(BlockItem(text, rank) for text, rank in render_items(turn))
            fitted = BlockText(block.name, "\n".join(i.text for i in items), block.priority, position, items)
            reserve = _share(block, room)
            if reserve and not per_turn:
                # A stable block is cut to its claim here, not by what the window leaves this turn: its
                # text (and so the request's prefix) then changes only when its items do.
                cap = reserve if cap is None else min(cap, reserve)
            if cap is not None and items:
                fitted = fit_items(count, fitted, cap)
            out.append(replace(fitted, reserve=reserve, per_turn=per_turn, trusted=trusted))
            continue
        render_turn = getattr(block, "render_turn", None)
        text = render_turn(turn) if render_turn is not None else block.render(query)
        if cap is not None and text:
            text = truncate_text(count, text, cap) or ""
        out.append(BlockText(block.name, text, block.priority, position, per_turn=per_turn, trusted=trusted))
    return out


def _share(block: Any, room: int) -> int:
    return int((getattr(block, "share", 0.0) or 0.0) * room)


#: ``token_budget``'s default low watermark when a block changes every turn (recall), chosen by
#: ``bench/cache.py --sweep``: such a block already makes each request's end new, so evicting in larger
#: chunks (rarer rewrites of the whole window) keeps >= 85% of each request cached on LoCoMo at 4k,
#: where the usual 0.8 keeps 78%, for a fill of 82% instead of 89%. Without per-turn blocks it stays 0.8.
PER_TURN_LOW_WATERMARK = 0.6


def any_per_turn(blocks: Sequence[Any]) -> bool:
    return any(getattr(block, "per_turn", False) for block in blocks)


def block_room(blocks: Sequence[Any], room: int) -> int:
    """The tokens ``blocks`` claim ahead of the window: each one's reserved share, else its ``max_tokens``.

    Eviction keeps the window within the budget less this claim, so that the blocks fit next to a full
    window without leaving its oldest units out: a window that starts at a different message every turn
    would rewrite the request's prefix every turn (and lose the provider's prompt cache).
    """
    total = 0
    for block in blocks:
        share = _share(block, room)
        total += share if share else getattr(block, "max_tokens", None) or 0
    return total


def block_tokens(counter: TokenCounter, blocks: Sequence[BlockText], total: int) -> dict[str, int]:
    """Per-block shares of the blocks message; the shares add up to its exact count."""
    if not blocks:
        return {}
    if len(blocks) == 1:
        return {blocks[0].name: total}
    shares = {b.name: counter.count_text(b.text) for b in blocks}
    shares[blocks[0].name] += total - sum(shares.values())
    return shares


def shrink_blocks(
    counter: TokenCounter,
    blocks: Sequence[BlockText],
    over: int,
    left_out: list[LeftOut],
    *,
    keep_reserve: bool = False,
) -> tuple[list[BlockText], int]:
    """Cut the lowest-priority blocks first (priority 0 is never cut) until ``over`` tokens are saved.

    With ``keep_reserve``, no block is cut below its ``reserve``.
    """
    result = list(blocks)
    for block in sorted((b for b in blocks if b.priority > 0), key=lambda b: -b.priority):
        if over <= 0:
            break
        tokens = counter.count_text(block.text)
        floor = block.reserve if keep_reserve else 0
        if tokens <= floor:
            continue
        index = result.index(block)
        goal = max(floor, tokens - over)
        if block.items:
            cut_block = fit_items(counter.count_text, block, goal)
            cut: str | None = cut_block.text if cut_block.items else None
        else:
            cut_block = block
            cut = truncate_text(counter.count_text, block.text, goal) if goal > 0 else None
        if cut is None or not cut.strip() or (cut == block.text and not floor):
            result.pop(index)
            left_out.append(LeftOut("block_dropped", 0, tokens, detail=block.name))
            over -= tokens
        elif cut != block.text:
            result[index] = cut_block if block.items else replace(block, text=cut)
            saved = tokens - counter.count_text(cut)
            left_out.append(LeftOut("block_truncated", 0, saved, detail=block.name))
            over -= saved
    return result, over


def merge_cuts(cuts: list[LeftOut]) -> list[LeftOut]:
    """One entry per block: dropped if it was dropped in any round, with the tokens of every round."""
    merged: dict[str, LeftOut] = {}
    for cut in cuts:
        seen = merged.get(cut.detail)
        if seen is None:
            merged[cut.detail] = cut
        else:
            reason = "block_dropped" if "block_dropped" in (seen.reason, cut.reason) else seen.reason
            merged[cut.detail] = seen._replace(reason=reason, tokens=seen.tokens + cut.tokens)
    return list(merged.values())
