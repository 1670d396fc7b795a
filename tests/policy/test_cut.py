"""The phase that cuts a context to its budget: the order of sacrifice, and what each step decides alone."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import ContextOverflowError
from convmem.messages import Message
from convmem.policy.blockfit import BlockText
from convmem.policy.context import LeftOut, Truncation
from convmem.policy.cut import Oldest, cut, cut_irreducible, fit_blocks, leave_out_oldest
from convmem.policy.draft import Assembly, Draft, SummaryText, first_draft, summary_message
from convmem.policy.placement import Carrier, default_block_template, place_blocks
from convmem.policy.truncate import MARKER
from convmem.policy.units import Window

from .._quick import examples
from ._build import WORDS, assistant, block, inputs, items, request, tools, user, window


def _placed(blocks: Sequence[BlockText], carrier: Carrier | None = None) -> tuple[list[BlockText], object]:
    return list(blocks), place_blocks(WORDS, blocks, default_block_template, carrier)


# --- fit_blocks ------------------------------------------------------------------------------------------


def test_the_lowest_priority_block_is_cut_first_and_priority_0_never() -> None:
    blocks, placed = _placed([block("keep", 30, priority=0), block("low", 40, priority=3), block("mid", 40)])
    fitted = fit_blocks(WORDS, blocks, default_block_template, placed, 10, keep_reserve=False)  # type: ignore[arg-type]
    kept = {b.name: b.text for b in fitted.blocks}
    assert kept["keep"] == blocks[0].text
    assert kept["mid"] == blocks[2].text
    assert MARKER.strip() in kept["low"]
    assert WORDS.count_text(kept["low"]) <= 30
    saved = 40 - WORDS.count_text(kept["low"])
    assert fitted.cuts == [LeftOut("block_truncated", 0, saved, detail="low")]
    assert fitted.placed == place_blocks(WORDS, fitted.blocks, default_block_template, None)
    assert placed.tokens - fitted.placed.tokens >= 10  # type: ignore[attr-defined]


def test_a_block_smaller_than_what_must_go_is_dropped_and_the_next_one_cut() -> None:
    blocks, placed = _placed([block("keep", 5, priority=0), block("low", 20, priority=3), block("mid", 40)])
    fitted = fit_blocks(WORDS, blocks, default_block_template, placed, 30, keep_reserve=False)  # type: ignore[arg-type]
    assert [b.name for b in fitted.blocks] == ["keep", "mid"]
    assert fitted.cuts[0] == LeftOut("block_dropped", 0, 20, detail="low")
    assert fitted.cuts[1].reason == "block_truncated"
    assert fitted.cuts[1].detail == "mid"


def test_nothing_is_cut_when_nothing_is_over() -> None:
    blocks, placed = _placed([block("low", 40, priority=3)])
    fitted = fit_blocks(WORDS, blocks, default_block_template, placed, 0, keep_reserve=False)  # type: ignore[arg-type]
    assert (fitted.blocks, fitted.placed, fitted.cuts) == (blocks, placed, [])


def test_a_reserve_is_kept_until_it_may_go() -> None:
    recall = items("recall", [3, 1, 4, 2, 5], reserve=6)  # five two-word lines, 10 tokens
    blocks, placed = _placed([recall])
    kept = fit_blocks(WORDS, blocks, default_block_template, placed, 50, keep_reserve=True)  # type: ignore[arg-type]
    assert [i.rank for i in kept.blocks[0].items] == [3, 1, 2]  # the worst ranks went; display order kept
    assert kept.cuts == [LeftOut("block_truncated", 0, 4, detail="recall")]
    spent = fit_blocks(WORDS, blocks, default_block_template, placed, 50, keep_reserve=False)  # type: ignore[arg-type]
    assert spent.blocks == []
    assert spent.cuts == [LeftOut("block_dropped", 0, 10, detail="recall")]
    assert spent.placed.tokens == 0


def test_the_blocks_stay_on_their_carrier() -> None:
    carrier = Carrier(4, 1, Message(role="user", content="question"), 3)
    blocks, placed = _placed([block("recall", 40, position="user")], carrier)
    fitted = fit_blocks(WORDS, blocks, default_block_template, placed, 10, keep_reserve=False)  # type: ignore[arg-type]
    assert fitted.placed.carrier == carrier
    assert fitted.placed.trailing is None


def test_blocks_shrink_again_while_their_message_saves_less_than_their_own_count_four_rounds_at_most() -> None:
    """A template that shows only half of each block: every cut saves about half of it in the message."""

    def halves(blocks: Sequence[BlockText]) -> str:
        return "\n".join(" ".join(b.text.split()[: (WORDS.count_text(b.text) + 1) // 2]) for b in blocks)

    blocks = [block("low", 200, priority=2)]
    placed = place_blocks(WORDS, blocks, halves, None)
    once = fit_blocks(WORDS, blocks, halves, placed, 4, keep_reserve=False)
    assert 1 < len(once.cuts) < 4  # the first round saved half of the 4 in the message, the next ones the rest
    assert placed.tokens - once.placed.tokens >= 4
    capped = fit_blocks(WORDS, blocks, halves, placed, 40, keep_reserve=False)
    assert len(capped.cuts) == 4  # one entry per round, and no fifth round
    assert placed.tokens - capped.placed.tokens < 40
    assert capped.placed == place_blocks(WORDS, capped.blocks, halves, None)


# --- leave_out_oldest ------------------------------------------------------------------------------------


def test_the_oldest_units_go_up_to_the_next_user_message() -> None:
    built = window(user(5), assistant(5), user(5), assistant(5), user(1))  # 7 tokens each, then 3
    detail = "active, but left out to fit blocks and input this turn"
    assert leave_out_oldest(built.units, 5, 3) == Oldest(2, 14, LeftOut("budget", 2, 14, 0, 1, detail))


def test_the_newest_unit_is_never_left_out() -> None:
    built = window(user(5), assistant(5), user(5), assistant(5), user(1))
    assert leave_out_oldest(built.units, 5, 1000).start == 4
    assert leave_out_oldest(built.units, 1, 1000) == Oldest(0, 0, None)
    assert leave_out_oldest(built.units, 0, 1000) == Oldest(0, 0, None)


def test_without_a_user_message_left_the_oldest_go_until_enough_is_saved() -> None:
    built = window(user(5), assistant(5), assistant(5), assistant(1))
    assert leave_out_oldest(built.units, 4, 8).start == 2


# --- cut: the order of sacrifice ---------------------------------------------------------------------------


def _recall(over: int, *, summary: bool = False) -> tuple[Assembly, Draft, int]:
    """Three 22-token units and a ten-line recall block reserving 12 of its 20 tokens, ``over`` tokens too many."""
    built = window(user(20), assistant(20), user(20))
    text = None
    if summary:
        message = summary_message("earlier", 0, 0)
        text = SummaryText("earlier", 0, 0, WORDS.count_message(message), message)
    assembly = request(built, blocks=[items("recall", range(1, 11), reserve=12)], summary=text)
    draft = first_draft(assembly)
    return assembly, draft, draft.total - over


def test_blocks_give_up_what_lies_beyond_their_reserve_before_the_window_does() -> None:
    out = cut(*_recall(4))
    assert out.start == 0
    assert out.total <= _recall(4)[2]
    assert [e.reason for e in out.left_out] == ["block_truncated"]


def test_then_the_oldest_window_units_then_the_reserve_then_the_summary() -> None:
    out = cut(*_recall(30))  # more than the 8 tokens beyond the reserve
    assert out.start == 2  # the oldest units went, up to the next user message
    assert [e.reason for e in out.left_out] == ["budget", "block_truncated"]
    assert WORDS.count_text(out.blocks[0].text) >= 12  # the reserve held

    out = cut(*_recall(200, summary=True))
    assert out.start == 2
    assert out.blocks == []  # beyond the reserve in the first round, the rest in the second: one entry
    assert [(e.reason, e.detail) for e in out.left_out] == [
        ("budget", "active, but left out to fit blocks and input this turn"),
        ("block_dropped", "recall"),
        ("budget", "the running summary did not fit"),
    ]
    assert out.left_out[1].tokens == 20
    assert out.summary is None


def test_blocks_whose_carrier_was_left_out_go_to_the_end() -> None:
    built = window(user(2, "q"), tools(1, 30), assistant(30))
    draft = first_draft(request(built, blocks=[block("recall", 5, position="user", priority=0)]))
    assert draft.placed.carrier is not None
    assert draft.placed.carrier.where == 0
    out = cut(request(built), draft, draft.total - 10)
    assert out.start >= 1
    assert out.placed.carrier is None
    assert out.placed.trailing == Message(
        role="user", content="<recall>\nrecall recall recall recall recall\n</recall>"
    )
    assert out.total == _recount(built, out)


def _recount(built: Window, draft: Draft) -> int:
    units = built.units
    window_tokens = sum(u.tokens for u in islice(units, draft.start, draft.stop))
    assert window_tokens == draft.window_tokens
    return draft.pinned_tokens + draft.summary_tokens + draft.placed.tokens + window_tokens + draft.input_tokens


unit = st.one_of(
    st.integers(1, 30).map(user), st.integers(1, 30).map(assistant), st.integers(1, 30).map(lambda n: tools(2, n))
)


@settings(max_examples=examples(200), deadline=None)
@given(
    units=st.lists(unit, min_size=1, max_size=8),
    sizes=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3), st.booleans()), max_size=3),
    reserve=st.integers(0, 20),
    summary=st.booleans(),
    over=st.integers(1, 400),
)
def test_what_is_cut_is_accounted_for_and_the_total_stays_exact(
    units: list[list[Message]], sizes: list[tuple[int, int, bool]], reserve: int, summary: bool, over: int
) -> None:
    built = window(*units, pinned=["rules"])
    blocks = [
        block(f"b{i}", n, priority=p, position="user" if user_side else "system")
        for i, (n, p, user_side) in enumerate(sizes)
    ]
    if reserve:
        blocks.append(items("recall", range(1, 9), reserve=reserve))
    text = None
    if summary:
        message = summary_message("earlier talk", 0, 0)
        text = SummaryText("earlier talk", 0, 0, WORDS.count_message(message), message)
    assembly = request(built, blocks=blocks, summary=text)
    draft = first_draft(assembly)
    available = draft.total - over
    out = cut(assembly, draft, available)
    assert out.total == _recount(built, out)
    left = [e for e in out.left_out if e.detail == "active, but left out to fit blocks and input this turn"]
    assert sum(e.tokens for e in left) == sum(u.tokens for u in islice(built.units, 0, out.start))
    assert out.start <= max(0, out.stop - 1)  # the newest unit stays
    assert all(
        b.priority == 0 or b.name in {c.detail for c in out.left_out} for b in draft.blocks if b not in out.blocks
    )
    assert {b.name for b in out.blocks if b.priority == 0} == {b.name for b in draft.blocks if b.priority == 0}
    if out.total > available:
        assert out.summary is None


# --- cut_irreducible ---------------------------------------------------------------------------------------


def test_raise_names_what_the_request_would_need() -> None:
    built = window(user(50))
    assembly = request(built, on_overflow="raise", budget=40, reserve=5)
    draft = first_draft(assembly)
    available = 40 - 5 - 3
    with pytest.raises(ContextOverflowError) as raised:
        cut_irreducible(assembly, draft, available)
    assert (raised.value.needed, raised.value.budget) == (52 + 5 + 3, 40)


def test_truncate_cuts_the_largest_irreducible_message_and_says_so() -> None:
    built = window(user(100, "big"), pinned=["be brief"])
    asked = Message(role="user", content="short question")
    assembly = request(built, inputs=inputs(asked))
    draft = first_draft(assembly)
    out = cut_irreducible(assembly, draft, 60)
    assert out.total <= 60
    assert out.total == out.pinned_tokens + out.window_tokens + out.input_tokens
    assert out.truncated is not None
    assert out.truncated.pinned == [built.pinned[0].message]  # untouched: the same objects
    assert out.truncated.inputs == [asked]
    assert out.truncations == (Truncation(1, 102, out.window_tokens),)
    cut_text = f"user message seq 1 102 -> {out.window_tokens} tokens"
    assert out.warnings == (f"truncated 1 oversized message(s) to fit the budget of 1000: {cut_text}",)
    assert MARKER.strip() in str(out.truncated.newest[0].content)


def test_even_truncated_too_big_raises() -> None:
    assembly = request(window(user(100)), budget=10)
    with pytest.raises(ContextOverflowError, match="even truncated"):
        cut_irreducible(assembly, first_draft(assembly), 5)


def test_blocks_on_an_older_window_message_move_to_the_newest_unit_first() -> None:
    """Only the newest unit is irreducible: a carrier before it cannot stay (the pipeline's cut never hands
    such a draft over, as it leaves the older units out first; the phase still keeps its own contract)."""
    built = window(user(2, "q"), tools(1, 80))
    assembly = request(built, blocks=[block("recall", 3, position="user", priority=0)])
    draft = first_draft(assembly)
    assert draft.placed.carrier is not None
    assert draft.placed.carrier.where == 0
    out = cut_irreducible(assembly, draft, draft.total - 20)
    assert out.placed.carrier is None  # the newest unit (a tool call) has no user message: at the end
    assert out.placed.trailing is not None
    assert out.total <= draft.total - 20
