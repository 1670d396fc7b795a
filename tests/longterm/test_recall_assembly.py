"""Assembly weighs recalled messages against the oldest window turns: itemized cuts and reserved shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import ConvmemError
from convmem.formats.openai import from_openai
from convmem.longterm import RecallBlock, StaticBlock
from convmem.longterm.blocks.base import Turn
from convmem.longterm.recall.index import RecallIndex
from convmem.tokens import counter_for

COUNTER = counter_for("gpt-4o")


def total(messages: list[dict[str, Any]]) -> int:
    return sum(COUNTER.count_message(from_openai(m)) for m in messages) + COUNTER.reply_priming


def texts(ctx: Any) -> str:
    parts = []
    for m in ctx.messages:
        content = m["content"]
        parts.extend([content] if isinstance(content, str) else [p.get("text", "") for p in content])
    return "\n".join(parts)


class Lines:
    """An itemized block: fixed lines with ranks, a reserved share, as RecallBlock renders them."""

    def __init__(
        self, lines: Sequence[tuple[str, int]], *, share: float = 0.0, priority: int = 3, position: str = "system"
    ) -> None:
        self.lines, self.share, self.priority, self.position = list(lines), share, priority, position
        self.name, self.max_tokens = "recall", None

    def render(self, query: str | None) -> str:
        return "\n".join(text for text, _ in self.lines)

    def render_items(self, turn: Turn) -> list[tuple[str, int]]:
        return self.lines


def filled(budget: int, block: Any, turns: int = 60) -> Memory:
    """A memory whose window is full to within one turn of the budget (evicting one unit at a time)."""
    memory = Memory(model="gpt-4o", max_tokens=budget, blocks=[block], strategy_options={"low_watermark": 1.0})
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        memory.add({"role": role, "content": f"window turn {i:03d} " + "talk " * 20})
    return memory


LINES = [(f"recalled line {r:02d} " + "fact " * 10, r) for r in (3, 1, 4, 2, 5)]  # display order != rank order


def test_itemized_blocks_lose_whole_lines_lowest_rank_first() -> None:
    memory = filled(1200, Lines(LINES), turns=6)
    need = memory.context().tokens
    line_cost = COUNTER.count_text(LINES[0][0]) + 1
    squeezed = filled(need - 2 * line_cost + 5, Lines(LINES), turns=6)
    ctx = squeezed.context()
    rendered = texts(ctx)
    kept = [rank for text, rank in LINES if text in rendered]
    assert sorted(kept) == [1, 2, 3]  # ranks 4 and 5 went, whole; no line was cut in the middle
    assert "truncated by convmem" not in rendered
    assert [r.reason for r in ctx.left_out if r.detail == "recall"] == ["block_truncated"]
    assert ctx.tokens == total(ctx.messages) <= ctx.budget


def test_without_a_reserve_the_block_goes_before_any_window_turn() -> None:
    ctx = filled(1500, Lines(LINES, share=0.0)).context()
    rendered = texts(ctx)
    kept = sorted(rank for text, rank in LINES if text in rendered)
    assert kept == list(range(1, len(kept) + 1))
    assert len(kept) < len(LINES)
    assert not any(r.reason == "budget" for r in ctx.left_out)  # no window turn made room


def test_a_reserve_keeps_the_best_lines_ahead_of_the_oldest_window_turns() -> None:
    memory = filled(1500, Lines(LINES, share=0.1))
    ctx = memory.context()
    rendered = texts(ctx)
    reserve = int(0.1 * 1500)
    kept = sorted(rank for text, rank in LINES if text in rendered)
    assert kept == list(range(1, len(kept) + 1))  # the best ones
    assert ctx.account.blocks["recall"] <= reserve + 12  # up to the reserve (plus the tags)
    assert len(kept) >= 1
    # Eviction kept the reserve free: the oldest turns were archived, not left out turn by turn.
    assert any(r.reason == "archived" for r in ctx.left_out)
    assert not any(r.reason == "budget" for r in ctx.left_out)
    window_texts = [m.text for m in memory.messages(status="active")]
    assert window_texts[-1] in rendered  # the newest turn always stays
    assert ctx.tokens == total(ctx.messages) <= ctx.budget


def test_a_larger_reserve_keeps_more_lines() -> None:
    kept = []
    for share in (0.0, 0.05, 0.1, 0.2):
        rendered = texts(filled(1500, Lines(LINES, share=share)).context())
        kept.append(sum(text in rendered for text, _ in LINES))
    assert kept == sorted(kept)
    assert kept[0] < kept[-1] == len(LINES)


def test_the_reserve_gives_way_when_only_the_newest_turn_is_left() -> None:
    memory = Memory(model="gpt-4o", max_tokens=300, blocks=[Lines(LINES, share=0.9)])
    memory.add({"role": "user", "content": "newest " * 120})
    ctx = memory.context()
    assert "newest" in texts(ctx)
    assert ctx.tokens == total(ctx.messages) <= ctx.budget


def test_recall_block_validates_its_options() -> None:
    recall = RecallIndex()
    for bad in ({"share": 1.0}, {"share": -0.1}, {"k": 0}, {"share": True}):
        with pytest.raises(ConvmemError):
            RecallBlock(recall, **bad)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(120, 2500),
    turns=st.integers(1, 40),
    words=st.integers(1, 60),
    lines=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 30)), min_size=1, max_size=12),
    share=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9]),
    position=st.sampled_from(["system", "user"]),
    static=st.booleans(),
)
def test_assembly_with_reserved_itemized_blocks_keeps_the_budget(
    budget: int,
    turns: int,
    words: int,
    lines: list[tuple[int, int]],
    share: float,
    position: str,
    static: bool,
) -> None:
    items = [(f"<line {i}> " + "word " * size, rank) for i, (size, rank) in enumerate(lines)]
    blocks: list[Any] = [Lines(items, share=share, position=position)]
    if static:
        blocks.append(StaticBlock("notes", "note " * words, priority=1))
    memory = Memory(model="gpt-4o", max_tokens=budget, blocks=blocks)
    for i in range(turns):
        memory.add({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x " * words})
    ctx = memory.context("the question")
    assert ctx.tokens == total(ctx.messages) <= budget
    rendered = texts(ctx)
    assert "the question" in rendered
    kept = {rank for text, rank in items if text in rendered}
    dropped = {rank for text, rank in items if text not in rendered}
    if kept and dropped:  # lines go whole, the highest rank number first (ties may go either way)
        assert max(kept) <= min(dropped)
    for i, (text, _) in enumerate(items):  # never a line cut in half
        assert text in rendered or f"<line {i}>" not in rendered
