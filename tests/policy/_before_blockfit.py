"""A frozen copy of policy/blockfit.py before assembly was split into phases (the reference of the guard)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from convmem.messages import Message, TextPart
from convmem.policy.context import LeftOut
from convmem.policy.truncate import truncate_text
from convmem.tokens import TokenCounter

__all__ = [
    "CARRY_RATIO",
    "PER_TURN_LOW_WATERMARK",
    "BlockItem",
    "BlockText",
    "Carrier",
    "Placed",
    "any_per_turn",
    "block_room",
    "block_texts",
    "block_tokens",
    "default_block_template",
    "find_carrier",
    "merge_cuts",
    "place_blocks",
    "shrink_blocks",
    "user_blocks_text",
    "with_prefix",
]


class BlockItem(NamedTuple):
    """One line of an itemized block and its rank (1 = the most relevant; cut last)."""

    text: str
    rank: int


@dataclass(frozen=True, slots=True)
class BlockText:
    """A block's text for this turn: lower ``priority`` numbers are kept longer; 0 is never cut.

    ``position`` ``"system"`` renders it into a system message (after the pinned
    ones, or after the summary if ``per_turn``); ``"user"`` prepends it (as its own
    text part) to the latest user message, else sends it as a user message at the
    end of the request: never in a system message.

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
            out.append(replace(fitted, reserve=reserve, per_turn=per_turn))
            continue
        render_turn = getattr(block, "render_turn", None)
        text = render_turn(turn) if render_turn is not None else block.render(query)
        if cap is not None and text:
            text = truncate_text(count, text, cap) or ""
        out.append(BlockText(block.name, text, block.priority, position, per_turn=per_turn))
    return out


def _share(block: Any, room: int) -> int:
    return int((getattr(block, "share", 0.0) or 0.0) * room)


#: ``token_budget``'s default low watermark when a block changes every turn (recall), chosen by
#: ``bench/cache.py --sweep``: such a block already makes each request's end new, so evicting in larger
#: chunks (rarer rewrites of the whole window) keeps >= 85% of each request cached on LoCoMo at 4k,
#: where the usual 0.8 keeps 78%, for a fill of 82% instead of 89%. Without per-turn blocks it stays 0.8.
PER_TURN_LOW_WATERMARK = 0.6

#: When a newer user message gets the per-turn user blocks, the older one keeps its own if what followed it
#: (its tool loop, the reply) has at least this many times their tokens: resending that tail uncached would
#: cost more than holding the blocks in the window. ``bench/cache.py`` at 0.5 / 1 / 2: LoCoMo the same
#: within a point; the agent session at 4k 51 / 50 / 48% reused and at 16k (k=5) 76 / 78 / 78%.
CARRY_RATIO = 1.0


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


def default_block_template(blocks: Sequence[BlockText]) -> str:
    """Render blocks Letta-style: each one in ``<name>...</name>`` tags, in order."""
    return "\n\n".join(f"<{b.name}>\n{b.text}\n</{b.name}>" for b in blocks)


class Placed(NamedTuple):
    """Where this turn's blocks go, and the exact tokens each placement adds.

    ``stable`` and ``turn`` are the system messages of the rarely changing and of the per-turn
    system blocks; ``user_text`` rides on the ``carrier`` (the user message it is prepended to),
    or, when ``carrier`` is None, is sent as ``trailing``, a user message of its own at the end.
    """

    stable: Message | None
    turn: Message | None
    user_text: str | None
    carrier: Carrier | None
    trailing: Message | None
    stable_tokens: int
    turn_tokens: int
    user_tokens: int

    @property
    def tokens(self) -> int:
        return self.stable_tokens + self.turn_tokens + self.user_tokens


NOTHING_PLACED = Placed(None, None, None, None, None, 0, 0, 0)


class Carrier(NamedTuple):
    """The latest user message: an input (``seq`` None, ``where`` its index) or a window message (in unit ``where``)."""

    seq: int | None
    where: int
    message: Message
    tokens: int
    augmented: Message


def find_carrier(inputs: Sequence[tuple[Message, int]], units: Any, start: int, stop: int) -> tuple[Any, ...] | None:
    """The latest user message: the last user input, else the newest user message among ``units[start:stop]``.

    Walks back only over the units since that message (the current tool loop, if any).
    Returns ``(seq or None, input index or unit index, message, tokens)``.
    """
    for index in range(len(inputs) - 1, -1, -1):
        if inputs[index][0].role == "user":
            return (None, index, inputs[index][0], inputs[index][1])
    for index in range(stop - 1, start - 1, -1):
        unit = units[index]
        if unit.kind == "user":
            entry = unit.entries[-1]
            return (entry.seq, index, entry.message, entry.tokens)
    return None


def user_blocks_text(blocks: Sequence[BlockText], template: Callable[[Sequence[BlockText]], str]) -> str:
    return template([b for b in blocks if b.position == "user"])


def with_prefix(message: Message, text: str) -> Message:
    """A copy of ``message`` whose content starts with ``text`` as a separate text part."""
    content = message.content
    parts = [TextPart(content)] if isinstance(content, str) else list(content or ())
    return message.replace(content=(TextPart(text), *parts))


def place_blocks(
    counter: TokenCounter,
    blocks: Sequence[BlockText],
    template: Callable[[Sequence[BlockText]], str],
    target: tuple[Any, ...] | None,
) -> Placed:
    """Render ``blocks`` where they go (see the module docstring) and count the tokens they add."""
    if not blocks:
        return NOTHING_PLACED
    stable = [b for b in blocks if b.position != "user" and not b.per_turn]
    turn = [b for b in blocks if b.position != "user" and b.per_turn]
    stable_message = Message(role="system", content=template(stable)) if stable else None
    turn_message = Message(role="system", content=template(turn)) if turn else None
    stable_tokens = counter.count_message(stable_message) if stable_message is not None else 0
    turn_tokens = counter.count_message(turn_message) if turn_message is not None else 0
    if len(stable) + len(turn) == len(blocks):
        return Placed(stable_message, turn_message, None, None, None, stable_tokens, turn_tokens, 0)
    text = user_blocks_text(blocks, template)
    if target is None:
        trailing = Message(role="user", content=text)
        user_tokens = counter.count_message(trailing)
        return Placed(stable_message, turn_message, text, None, trailing, stable_tokens, turn_tokens, user_tokens)
    augmented = with_prefix(target[2], text)
    carrier = Carrier(target[0], target[1], target[2], target[3], augmented)
    user_tokens = counter.count_message(augmented) - target[3]
    return Placed(stable_message, turn_message, text, carrier, None, stable_tokens, turn_tokens, user_tokens)


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
