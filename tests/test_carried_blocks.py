"""Per-turn user blocks stay on the message they were sent with (issue 14).

A recall block rides on the newest user message. When the next user message comes, the older one keeps
the block it was sent with, so the next request repeats the previous one whole, the tool loop after the
older message included, instead of being resent from where the block was. What is stored, archived and
reopened is the message as it was added.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.stores import SQLiteStore

from ._quick import examples
from .test_prefix_cache import PerTurn, contexts, step


class Sink:
    """Records what eviction hands to the sinks."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def absorb(self, units: Any, *, session_id: str, user_id: str | None) -> None:
        self.texts += [m.message.text for unit in units for m in unit]


def _tool_loop(memory: Memory, n: int, size: int = 1) -> None:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "look", "arguments": "{}"}}
    memory.add_many([{"role": "assistant", "content": None, "tool_calls": [call]}])
    memory.add({"role": "tool", "tool_call_id": f"c{n}", "content": "result " * size})


def test_the_older_user_message_keeps_its_block_and_the_tool_loop_after_it_is_repeated() -> None:
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[PerTurn()])
    memory.add({"role": "user", "content": "first question"})
    memory.context()
    _tool_loop(memory, 1, size=50)
    looped = memory.context()
    memory.add({"role": "assistant", "content": "an answer"})
    memory.add({"role": "user", "content": "second question"})
    ctx = memory.context()
    assert ctx.messages[: len(looped.messages)] == looped.messages
    assert ctx.account.reused == looped.account.total - looped.account.overhead
    text = json.dumps(ctx.messages)
    assert text.count("recalled for 'first question'") == 1
    assert text.count("recalled for 'second question'") == 1
    # What is stored is what was added.
    assert next(m.text for m in memory.messages()) == "first question"


def test_a_short_reply_lets_the_block_move_to_the_newer_message() -> None:
    """Keeping a block costs its tokens in the window; resending a reply shorter than CARRY_RATIO times it
    costs less, so the block moves and the request is repeated up to the message it rode on."""
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[PerTurn(words=40)])
    memory.add({"role": "user", "content": "first question"})
    first = memory.context()
    memory.add({"role": "assistant", "content": "yes"})
    memory.add({"role": "user", "content": "second question"})
    ctx = memory.context()
    text = json.dumps(ctx.messages)
    assert "recalled for 'first question'" not in text
    assert "recalled for 'second question'" in text
    assert ctx.account.reused == 0  # the first request began with the block's message
    assert first.account.reused == 0


def test_a_reopened_memory_sends_the_stored_messages_and_only_the_newest_block(tmp_path: Any) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[PerTurn()], store=store, session_id="s")
    for question in ("one", "two", "three"):
        memory.add({"role": "user", "content": question})
        memory.context()
        memory.add({"role": "assistant", "content": "a reply long enough to keep the block " * 5})
    memory.add({"role": "user", "content": "four"})
    assert json.dumps(memory.context().messages).count("<recall>") == 4
    reopened = Memory.open("s", model="gpt-4o", max_tokens=8000, blocks=[PerTurn()], store=store)
    text = json.dumps(reopened.context().messages)
    assert text.count("<recall>") == 1
    assert "recalled for 'four'" in text
    store.close()


@settings(max_examples=examples(60), deadline=None)
@given(
    script=st.lists(step, min_size=1, max_size=25),
    budget=st.integers(300, 1500),
    words=st.integers(1, 60),
)
def test_with_eviction_the_budget_holds_and_nothing_stored_or_archived_carries_a_block(
    script: list[tuple[str, int]], budget: int, words: int
) -> None:
    sink = Sink()
    memory = Memory(
        model="gpt-4o", max_tokens=budget, max_output_tokens=100, blocks=[PerTurn(words=words)], sinks=[sink]
    )
    for _, _, ctx in contexts(memory, script):
        assert ctx.account.total + ctx.account.reserved_output <= budget
    assert not any("recalled for" in m.text for m in memory.messages())
    assert not any("recalled for" in t for t in sink.texts)
    stats = memory.stats()
    window = memory._core.window
    assert window.tokens == sum(e.tokens for e in window.entries())
    assert stats.messages == len(memory.messages())
