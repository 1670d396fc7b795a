"""Blocks in the context: their texts for a turn, where they go, their exact share, and how they shrink.

Pure helpers of :mod:`convmem.policy.assembly`. A block with position
``"system"`` goes into one system message after the pinned ones; one with
position ``"user"`` is prepended, as its own text part, to the latest user
message. Shrinking cuts the lowest priority first and never touches
priority 0. A block made of ranked items (recalled messages) loses whole
items, the lowest-ranked first, instead of being cut in the middle of one;
a block with a ``reserve`` is not cut below it before the oldest window
units have gone (see :func:`~convmem.policy.assembly.assemble`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..messages import Message, TextPart
from ..tokens import TokenCounter
from .context import LeftOut
from .truncate import truncate_text

__all__ = [
    "BlockItem",
    "BlockText",
    "block_texts",
    "block_tokens",
    "default_block_template",
    "merge_cuts",
    "render_blocks",
    "shrink_blocks",
    "user_blocks_text",
    "user_target",
    "with_prefix",
]


class BlockItem(NamedTuple):
    """One line of an itemized block and its rank (1 = the most relevant; cut last)."""

    text: str
    rank: int


@dataclass(frozen=True, slots=True)
class BlockText:
    """A block's text for this turn: lower ``priority`` numbers are kept longer; 0 is never cut.

    ``position`` ``"system"`` renders it into one system message after the pinned
    ones; ``"user"`` prepends it (as its own text part) to the latest user message:
    the input's, else the newest window unit's if that is a user message, else it
    falls back to the system message.

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
        render_items = getattr(block, "render_items", None)
        if render_items is not None:
            items = tuple(BlockItem(text, rank) for text, rank in render_items(turn))
            fitted = BlockText(block.name, "\n".join(i.text for i in items), block.priority, position, items)
            if cap is not None and items:
                fitted = fit_items(count, fitted, cap)
            out.append(replace(fitted, reserve=int((getattr(block, "share", 0.0) or 0.0) * room)))
            continue
        render_turn = getattr(block, "render_turn", None)
        text = render_turn(turn) if render_turn is not None else block.render(query)
        if cap is not None and text:
            text = truncate_text(count, text, cap) or ""
        out.append(BlockText(block.name, text, block.priority, position))
    return out


def default_block_template(blocks: Sequence[BlockText]) -> str:
    """Render blocks Letta-style: each one in ``<name>...</name>`` tags, in order."""
    return "\n\n".join(f"<{b.name}>\n{b.text}\n</{b.name}>" for b in blocks)


def user_target(
    inputs: Sequence[tuple[Message, int]], units: Any, stop: int, blocks: Sequence[BlockText]
) -> tuple[str, int, Message, int] | None:
    """Where user-position blocks go: the last user input, else the newest unit if it is a user message."""
    if not any(b.position == "user" for b in blocks):
        return None
    for index in range(len(inputs) - 1, -1, -1):
        if inputs[index][0].role == "user":
            return ("input", index, inputs[index][0], inputs[index][1])
    if stop > 0 and units[stop - 1].kind == "user":
        entry = units[stop - 1].entries[-1]
        return ("window", -1, entry.message, entry.tokens)
    return None


def user_blocks_text(blocks: Sequence[BlockText], template: Callable[[Sequence[BlockText]], str]) -> str:
    return template([b for b in blocks if b.position == "user"])


def with_prefix(message: Message, text: str) -> Message:
    """A copy of ``message`` whose content starts with ``text`` as a separate text part."""
    content = message.content
    parts = [TextPart(content)] if isinstance(content, str) else list(content or ())
    return message.replace(content=(TextPart(text), *parts))


def render_blocks(
    counter: TokenCounter,
    blocks: Sequence[BlockText],
    template: Callable[[Sequence[BlockText]], str],
    target: tuple[str, int, Message, int] | None = None,
) -> tuple[Message | None, Message | None, int]:
    """The system blocks message, the augmented user target, and the tokens both add."""
    if not blocks:
        return None, None, 0
    in_system = [b for b in blocks if b.position != "user" or target is None]
    message = Message(role="system", content=template(in_system)) if in_system else None
    tokens = counter.count_message(message) if message is not None else 0
    augmented = None
    if target is not None and len(in_system) < len(blocks):
        augmented = with_prefix(target[2], user_blocks_text(blocks, template))
        tokens += counter.count_message(augmented) - target[3]
    return message, augmented, tokens


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
    counter: TokenCounter, blocks: list[BlockText], over: int, left_out: list[LeftOut], *, keep_reserve: bool = False
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
