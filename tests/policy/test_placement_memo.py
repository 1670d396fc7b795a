"""The placed blocks' counts kept across contexts (``Assembly.counts``) never change a context.

A memory keeps the counts of the block texts it placed, so a second context for one input does not
tokenize them again. The property test drives two memories through the same random turns, one with the
memo and one without, and requires identical contexts (messages and account) at every step, while the
block texts repeat and change, the carrier moves, inputs come and go, and a calibrated counter learns.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.longterm.blocks.base import Turn

from .._quick import examples

TEXTS = ["remember the lake trip", "the user likes jazz\nand hates mornings", "", "a" * 40]


class Chosen:
    """A block whose text the test picks: the same text for several contexts, then another."""

    def __init__(self, name: str, position: str, per_turn: bool) -> None:
        self.name, self.position, self.per_turn, self.priority, self.max_tokens = name, position, per_turn, 1, None
        self.text = TEXTS[0]

    def render(self, query: str | None) -> str:
        return self.text

    def render_turn(self, turn: Turn) -> str:
        return self.text


def pair(calibrated: bool) -> tuple[list[Memory], list[list[Chosen]]]:
    memories, blocks = [], []
    for _ in range(2):
        own = [Chosen("recall", "user", True), Chosen("notes", "system", False), Chosen("now", "system", True)]
        options: dict[str, Any] = {"model": "my-private-model", "counter": "calibrated"} if calibrated else {}
        memories.append(Memory(max_tokens=400, blocks=own, **options))
        blocks.append(own)
    memories[1]._core.block_counts = None  # type: ignore[assignment]  # the reference: counts every time
    return memories, blocks


op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["user", "assistant"]), st.integers(1, 30)),
    st.tuples(st.just("text"), st.integers(0, 2), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("context"), st.sampled_from([None, "what now?", "tell me more"]), st.sampled_from([0, 1])),
    st.tuples(st.just("usage"), st.integers(50, 400), st.just(0)),
)


@settings(max_examples=examples(60), deadline=None)
@given(ops=st.lists(op, min_size=1, max_size=30), calibrated=st.booleans())
def test_kept_counts_give_the_contexts_counted_afresh(ops: list[tuple[str, Any, Any]], calibrated: bool) -> None:
    memories, blocks = pair(calibrated)
    for kind, a, b in ops:
        if kind == "add":
            for memory in memories:
                memory.add({"role": a, "content": "word " * b})
        elif kind == "text":
            for own in blocks:
                own[a].text = TEXTS[b]
        elif kind == "usage":
            for memory in memories:
                memory.record_usage({"prompt_tokens": a, "completion_tokens": 5})
        else:
            fmt = "openai" if b == 0 else "anthropic"
            kept, fresh = (memory.context(a, format=fmt) for memory in memories)
            assert kept.messages == fresh.messages
            assert kept.system == fresh.system
            assert kept.account == fresh.account


def test_a_second_context_for_one_input_does_not_count_the_block_again() -> None:
    memory = Memory(max_tokens=2000, blocks=[Chosen("recall", "user", True)])
    memory.add({"role": "user", "content": "hello there"})
    counter = memory._core.counter
    seen: list[str] = []
    count_text = counter.count_text

    def counting(text: str) -> int:
        seen.append(text)
        return count_text(text)

    counter.count_text = counting  # type: ignore[method-assign]  # a spy on the real counter
    try:
        first = memory.context()
        block_counts = sum(TEXTS[0] in text for text in seen)
        second = memory.context()
    finally:
        del counter.count_text  # type: ignore[method-assign]
    assert block_counts == 1
    assert sum(TEXTS[0] in text for text in seen) == 1  # the second context counted nothing of it
    assert first.messages == second.messages
    assert first.account.blocks == second.account.blocks
