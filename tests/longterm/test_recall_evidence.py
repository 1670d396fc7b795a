"""Evidence per token (issue 30): the recall block's relevance gate, hits that keep their place, recall as a tool."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import ConvmemError, InvalidMessageError
from convmem.longterm.blocks.base import Turn
from convmem.longterm.recall.block import RecallBlock, relevance
from convmem.longterm.recall.index import RecallDoc, RecallIndex
from convmem.longterm.recall.lexical import tokenize
from convmem.longterm.recall.tool import MAX_QUERY_CHARS, NOTHING_FOUND, RecallTool

from .._quick import examples

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
WORDS = ["puppy", "lisbon", "hiking", "pottery", "nurse", "shoes", "custard", "alps", "violin", "garden"]


def doc(i: int, text: str, *, user: str = "u", session: str = "s1", context: str = "") -> RecallDoc:
    return RecallDoc(f"m{i}", session, user, i, "user", text, T0 + timedelta(minutes=i), text, context)


def index_of(texts: list[str], user: str = "u") -> RecallIndex:
    index = RecallIndex()
    docs, previous = [], ""
    for i, text in enumerate(texts):
        docs.append(doc(i, text, user=user, context=previous))
        previous = text
    index.add(docs)
    return index


CORPUS = [
    "I adopted a puppy named Biscuit last week",
    "My sister lives in Lisbon and works as a nurse",
    "We went hiking in the Alps during the summer",
    "The puppy chewed my favourite running shoes",
    "Where did you buy them?",
    "At the market in Lisbon",
]


# -- the gate ---------------------------------------------------------------------------------------


def test_relevance_is_the_share_of_the_query_word_weight_a_hit_or_its_previous_message_holds() -> None:
    index = index_of(CORPUS)
    hits = index.search("where did my sister buy the shoes in Lisbon?", user_id="u", k=10)
    weights = index.term_weights("u", set(tokenize("where did my sister buy the shoes in Lisbon?")))
    by_text = {h.doc.text: relevance(weights, h) for h in hits}
    total = sum(weights.values())
    # Its own words: sister and lisbon; "shoes" is not in it, nor in the message before it.
    sister = "My sister lives in Lisbon and works as a nurse"
    assert by_text[sister] == pytest.approx((weights["sister"] + weights["lisbon"]) / total)
    # The short answer holds "lisbon"; the question before it "buy": both count.
    assert by_text["At the market in Lisbon"] == pytest.approx((weights["lisbon"] + weights["buy"]) / total)
    # A rarer word weighs more: "sister" (in one message) outweighs "lisbon" (in two).
    assert weights["sister"] > weights["lisbon"]
    assert relevance({}, hits[0]) == 0.0


def test_no_block_when_nothing_relevant_is_found_and_a_block_when_something_is() -> None:
    index = index_of(CORPUS)
    gated = RecallBlock(index, min_relevance=0.5)
    # "puppy" is in two messages, but it is a fifth of the query's words at most: below the gate.
    assert gated.render_turn(Turn("what's the weather forecast for tomorrow's puppy parade?", user_id="u")) == ""
    assert gated.last_hits == []
    assert gated.last_dropped
    assert all("min_relevance=0.5" in d.reason for d in gated.last_dropped)
    # The same query without the gate shows them.
    assert RecallBlock(index).render_turn(Turn("what's the weather forecast for tomorrow's puppy parade?", user_id="u"))
    text = gated.render_turn(Turn("what did the puppy chew?", user_id="u"))
    assert "running shoes" in text


def test_the_block_gate_shows_every_hit_or_none() -> None:
    index = index_of(CORPUS)
    gated = RecallBlock(index, gate=0.5)
    assert gated.render_turn(Turn("what's the weather forecast for tomorrow's puppy parade?", user_id="u")) == ""
    assert gated.last_dropped
    assert any("gate=0.5" in d.reason for d in gated.last_dropped)
    # A query the archive answers: the gate passes the whole block, hits sharing no word with it included.
    asked = Turn("did the puppy chew the running shoes?", user_id="u")
    assert gated.render_turn(asked) == RecallBlock(index).render_turn(asked)


@settings(max_examples=examples(40), deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join), min_size=1, max_size=12),
    query=st.lists(st.sampled_from([*WORDS, "unknown", "words"]), min_size=1, max_size=4).map(" ".join),
    gate=st.sampled_from([0.1, 0.3, 0.5, 0.9]),
)
def test_the_gate_shows_the_open_block_exactly_when_a_hit_reaches_it(texts: list[str], query: str, gate: float) -> None:
    index = index_of(texts)
    open_block, gated = RecallBlock(index, k=3), RecallBlock(index, k=3, gate=gate)
    shown, text = open_block.render_turn(Turn(query, user_id="u")), gated.render_turn(Turn(query, user_id="u"))
    weights = index.term_weights("u", set(tokenize(query)))
    reached = any(relevance(weights, h) >= gate for h in open_block.last_hits)
    assert text == (shown if reached else "")


def test_the_gate_is_checked() -> None:
    for bad in (-0.1, 1.5, True, "0.3"):
        with pytest.raises(ConvmemError, match="min_relevance"):
            RecallBlock(RecallIndex(), min_relevance=bad)  # type: ignore[arg-type]
        with pytest.raises(ConvmemError, match="gate"):
            RecallBlock(RecallIndex(), gate=bad)  # type: ignore[arg-type]
    with pytest.raises(ConvmemError, match="order"):
        RecallBlock(RecallIndex(), order="random")


@settings(max_examples=examples(40), deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    gate=st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0]),
)
def test_every_hit_the_gate_shows_reaches_it_and_none_it_passes_is_lost(
    texts: list[str], query: str, gate: float
) -> None:
    index = index_of(texts)
    open_block, gated = RecallBlock(index, k=50), RecallBlock(index, k=50, min_relevance=gate)
    open_block.render_turn(Turn(query, user_id="u"))
    gated.render_turn(Turn(query, user_id="u"))
    weights = index.term_weights("u", set(tokenize(query)))
    assert all(relevance(weights, h) >= gate for h in gated.last_hits)
    expected = [h.doc.ref for h in open_block.last_hits if relevance(weights, h) >= gate]
    assert [h.doc.ref for h in gated.last_hits] == expected


# -- hits that keep their place ---------------------------------------------------------------------


@settings(max_examples=examples(40), deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join), min_size=2, max_size=15),
    queries=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join), min_size=2, max_size=6),
    k=st.integers(1, 6),
)
def test_a_stable_block_shows_what_a_time_ordered_one_does_and_unchanged_hits_keep_their_line(
    texts: list[str], queries: list[str], k: int
) -> None:
    index = index_of(texts)
    stable, timed = RecallBlock(index, k=k, order="stable"), RecallBlock(index, k=k)
    before: list[tuple[str, str]] = []
    for query in queries:
        turn = Turn(query, user_id="u", session_id="s9")
        stable_lines = stable.render_items(turn)
        timed.render_items(turn)
        now = [h.doc.ref for h in stable.last_hits]
        assert sorted(now) == sorted(h.doc.ref for h in timed.last_hits)  # the same hits
        assert sorted(r for _, r in stable_lines) == list(range(1, len(now) + 1))  # ranks for the cut kept
        kept = [ref for ref in before if ref in now]
        assert [ref for ref in now if ref in kept] == kept  # the hits that stay keep their order
        if len(now) >= len(before):  # and, with as many lines, their very line
            assert all(now.index(ref) == before.index(ref) for ref in kept)
        before = now


def test_a_new_hit_takes_the_line_of_one_that_left() -> None:
    index = index_of(["alpha one", "beta two", "gamma three", "delta four"])
    block = RecallBlock(index, k=3, order="stable")
    first = block.render_turn(Turn("alpha beta gamma", user_id="u", session_id="s9")).splitlines()
    second = block.render_turn(Turn("alpha delta gamma", user_id="u", session_id="s9")).splitlines()
    assert [line.split("user: ")[1] for line in first] == ["alpha one", "beta two", "gamma three"]
    assert [line.split("user: ")[1] for line in second] == ["alpha one", "delta four", "gamma three"]
    # Another session starts from the time order.
    other = block.render_turn(Turn("alpha delta gamma", user_id="u", session_id="s8")).splitlines()
    assert [line.split("user: ")[1] for line in other] == ["alpha one", "gamma three", "delta four"]


# -- recall as a tool -------------------------------------------------------------------------------


def test_the_tool_answers_a_call_with_the_users_hits_in_the_order_said() -> None:
    index = index_of(CORPUS)
    index.add([doc(100, "My sister is a Lisbon pilot", user="someone-else")])
    tool = RecallTool(index, k=2)
    output = tool.handle(json.dumps({"query": "sister in Lisbon"}), user_id="u")
    lines = output.splitlines()
    assert len(lines) == 2
    assert "My sister lives in Lisbon" in output
    assert "pilot" not in output
    assert lines == sorted(lines)  # timestamps first: the order said
    assert tool.handle({"query": "sister in Lisbon"}, user_id="u") == output  # Anthropic's input object
    assert tool.handle({"query": "quantum chromodynamics"}, user_id="u") == NOTHING_FOUND
    # The window's messages are left out: the model sees them already.
    windowed = tool.handle({"query": "sister in Lisbon"}, user_id="u", session_id="s1", window_start=0)
    assert windowed == NOTHING_FOUND


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "an object"),
        ({"q": "x"}, "'query' must be a non-empty string"),
        ({"query": "  "}, "'query' must be a non-empty string"),
        ({"query": 3}, "'query' must be a non-empty string"),
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, f"at most {MAX_QUERY_CHARS}"),
    ],
)
def test_a_malformed_call_is_refused_naming_what_is_wrong(arguments: object, message: str) -> None:
    with pytest.raises(InvalidMessageError, match=message) as raised:
        RecallTool(index_of(CORPUS)).handle(arguments, user_id="u")  # type: ignore[arg-type]
    assert raised.value.field is not None
    assert raised.value.field.startswith("arguments")


def test_the_tools_definition_is_counted_in_the_budget_in_every_format() -> None:
    tool = RecallTool(RecallIndex())
    for format in ("openai", "responses", "anthropic"):
        plain = Memory("gpt-4o", max_tokens=4000, format=format)
        offered = Memory("gpt-4o", max_tokens=4000, format=format, tools=[tool.definition])
        for memory in (plain, offered):
            memory.add({"role": "user", "content": "where did I park?"})
        with_tool, without = offered.context(), plain.context()
        assert with_tool.account.tools > 0
        assert with_tool.tokens == without.tokens + with_tool.account.tools
        request = with_tool.request()
        names = json.dumps(request["tools"])
        assert '"recall"' in names
        assert "query" in names


def test_the_tool_is_checked() -> None:
    for bad in ("", "has space", "x" * 65):
        with pytest.raises(ConvmemError, match="tool name"):
            RecallTool(RecallIndex(), name=bad)
    with pytest.raises(ConvmemError, match="k must be"):
        RecallTool(RecallIndex(), k=0)
