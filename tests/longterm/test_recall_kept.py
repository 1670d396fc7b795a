"""A recall block keeps its render while the turn and the index are unchanged, and never serves a stale one.

The block keeps its last render (the same input, user, window and day against an index whose
partition has not grown): ``context()`` called twice for one input searches once. The property
tests compare every render of a kept block with a fresh block's over random interleavings of archiving,
flushing and turns, so any change a search could see and the key missed shows up as a difference.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.longterm import RecallBlock
from convmem.longterm.blocks.base import Turn
from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.index import RecallIndex
from convmem.longterm.recall.lexical import BM25Index, tokenize
from convmem.longterm.recall.model import RecallDoc

from .._quick import examples

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
WORDS = ["camping", "lake", "guitar", "paris", "dog", "painting", "marathon", "sister", "cake", "job"]


class CountingIndex(RecallIndex):
    """A real index that counts its searches (the thing under test is the block, not the index)."""

    searches = 0

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.searches += 1
        return super().search(*args, **kwargs)


def doc(n: int, words: str, *, user: str = "u", session: str = "old") -> RecallDoc:
    text = f"we talked about {words} ({n})"
    return RecallDoc(f"m{n}", session, user, n, "user", text, T0 + timedelta(days=n), text, "")


def test_context_twice_for_one_input_searches_once() -> None:
    index = CountingIndex()
    index.add([doc(i, WORDS[i % len(WORDS)]) for i in range(40)])
    memory = Memory(model="gpt-4o", user_id="u", blocks=[RecallBlock(index, k=3)])
    memory.add({"role": "user", "content": "tell me about the lake and the guitar"})
    first = memory.context()
    second = memory.context()
    assert index.searches == 1
    assert first.messages == second.messages
    assert first.account == second.account._replace(reused=first.account.reused)
    memory.context("and the marathon?")  # a new input is searched
    assert index.searches == 2


def test_a_new_document_is_seen_by_the_next_render() -> None:
    index = RecallIndex()
    index.add([doc(i, "lake") for i in range(3)])
    block = RecallBlock(index, k=10)
    turn = Turn("guitar", "s", "u", 0, T0)
    assert block.render_turn(turn) == ""
    index.add([doc(99, "guitar")])
    assert "guitar (99)" in block.render_turn(turn)
    assert "m99" in [h.doc.message_id for h in block.last_hits]


def test_kept_render_restores_the_inspection_fields() -> None:
    index = RecallIndex()
    index.add([doc(i, WORDS[i % 3]) for i in range(30)])
    block = RecallBlock(index, k=2)
    turn = Turn("camping lake guitar", "s", "u", 0, T0)
    lines = block.render_items(turn)
    hits, dropped = list(block.last_hits), list(block.last_dropped)
    block.render_items(Turn("paris", "s", "u", 0, T0))  # another input in between
    assert block.render_items(turn) == lines
    assert block.last_hits == hits
    assert block.last_dropped == dropped
    lines.append(("mutated by the caller", 9))
    assert block.render_items(turn) != lines  # the kept lines are the block's own copy


op = st.one_of(
    st.tuples(st.just("archive"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), st.sampled_from("uv")),
    st.tuples(st.just("turn"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), st.sampled_from("uv")),
    st.tuples(st.just("window"), st.integers(0, 30), st.just("u")),
    st.tuples(st.just("day"), st.integers(0, 40), st.just("u")),
)


@settings(max_examples=examples(60), deadline=None)
@given(ops=st.lists(op, min_size=1, max_size=25), dense=st.booleans())
def test_a_kept_render_equals_a_fresh_one(ops: list[tuple[Any, Any, str]], dense: bool) -> None:
    index = RecallIndex(embedder=HashingEmbedder(64), defer=True) if dense else RecallIndex()
    kept = RecallBlock(index, k=3, mode="hybrid" if dense else None)
    n, window, now = 0, 0, T0
    query = "camping"
    for kind, value, user in ops:
        if kind == "archive":
            n += 1
            index.add([doc(n, " ".join(value), user=user, session="s" if n % 2 else "old")])
        elif kind == "window":
            window = value
        elif kind == "day":
            now = T0 + timedelta(days=value)
        else:
            query = " ".join(value) + " last week"
        turn = Turn(query, "s", user, window, now)
        fresh = RecallBlock(index, k=3, mode="hybrid" if dense else None)
        assert kept.render_items(turn) == fresh.render_items(turn)
        assert kept.last_hits == fresh.last_hits
        assert kept.last_dropped == fresh.last_dropped


@settings(max_examples=examples(60), deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=30),
    queries=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=5),
)
def test_bm25_scores_while_growing_equal_a_rebuilt_index(docs: list[list[str]], queries: list[list[str]]) -> None:
    growing = BM25Index()
    for i, words in enumerate(docs):
        growing.add(tokenize(" ".join(words)))
        rebuilt = BM25Index()
        for earlier in docs[: i + 1]:
            rebuilt.add(tokenize(" ".join(earlier)))
        for q in queries:
            a, b = growing.score_vector(q), rebuilt.score_vector(q)
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a, b)
