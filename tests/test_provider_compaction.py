"""A provider's compaction becomes the memory's running summary (issue 26, deliver 2), without any SDK.

An Anthropic ``compaction`` block or a Responses ``compaction`` item archives every unit up to the one
holding it and is re-sent as the summary, with its own count; the state says so, a reopened memory sends
the same, a store that refuses the write leaves the memory as it was, and ``strategy="provider"`` lets
the provider compact while the budget still holds. (The replay through the SDK clients is in
``tests/provider/test_compaction.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import StoreError
from convmem.stores import MemoryStore
from convmem.stores.base import AppendRequest

from ._quick import examples

BLOCK = {"type": "compaction", "content": "They talked about fjords.", "encrypted_content": "ENC"}
ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" + "b" * 400}


def _claude_reply(content: list[dict[str, Any]]) -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": 5}
    usage["iterations"] = [{"type": "compaction", "input_tokens": 700, "output_tokens": 40}]  # type: ignore[assignment]
    return {"type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": content, "usage": usage}


def _talk(memory: Memory, turns: int) -> None:
    for i in range(turns):
        memory.add({"role": "user", "content": f"question {i} about fjord {i}"})
        memory.add({"role": "assistant", "content": f"answer {i}"})


def test_an_anthropic_compaction_archives_what_it_stands_for_and_is_resent_first() -> None:
    memory = Memory("claude-sonnet-4-6", format="anthropic", max_tokens=50_000)
    memory.add({"role": "system", "content": "Be brief."})
    _talk(memory, 3)
    memory.add({"role": "user", "content": "go on"})
    memory.add_response(_claude_reply([BLOCK, {"type": "text", "text": "More fjords."}]))
    memory.add({"role": "user", "content": "thanks"})
    ctx = memory.context()
    assert ctx.system == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert ctx.messages[1] == {"role": "assistant", "content": [BLOCK, {"type": "text", "text": "More fjords."}]}
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "user"]
    summarized = [m.text for m in memory.messages(status="summarized")]
    assert summarized[:2] == ["question 0 about fjord 0", "answer 0"]
    assert len(summarized) == 3 * 2 + 1 + 1  # the talk, "go on", and the compaction's own message
    assert ctx.account.summary > 0
    assert ctx.left_out[0].reason == "summarized"
    stats = memory.stats()
    assert (stats.summaries, stats.input_tokens, stats.output_tokens) == (1, 10 + 700, 5 + 40)


def test_a_responses_compaction_item_is_the_only_history_before_what_follows_it() -> None:
    memory = Memory("gpt-5.1", format="responses", max_tokens=50_000)
    memory.add({"role": "developer", "content": "Be brief."})
    _talk(memory, 3)
    memory.add(ITEM)
    memory.add({"role": "user", "content": "next"})
    items = memory.context().messages
    assert items == [{"role": "developer", "content": "Be brief."}, ITEM, {"role": "user", "content": "next"}]
    ctx = memory.context()
    assert not ctx.account.exact, "an opaque compaction is counted by an estimate"
    assert ctx.account.summary >= len(ITEM["encrypted_content"]) // 4
    # Another format cannot carry an opaque compaction: it is left out, and said.
    chat = memory.context(format="openai")
    assert chat.messages == [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "next"}]
    assert [e.detail for e in chat.left_out if e.reason == "not_carried"] == ["responses compaction"]


def test_the_state_keeps_the_compaction_and_a_reopened_memory_sends_it() -> None:
    store = MemoryStore()
    memory = Memory("claude-sonnet-4-6", format="anthropic", max_tokens=50_000, store=store)
    _talk(memory, 2)
    memory.add_many([{"role": "assistant", "content": [BLOCK]}, {"role": "user", "content": "again"}])
    reopened = Memory.open(memory.session_id, store=store)
    assert reopened.context().messages == memory.context().messages
    assert reopened.context().account == memory.context().account
    exported = store.export_jsonl(memory.session_id)
    other = MemoryStore()
    other.import_jsonl(exported)
    assert other.export_jsonl(memory.session_id) == exported
    assert Memory.open(memory.session_id, store=other).context().messages == memory.context().messages


class RefusingStore(MemoryStore):
    """Refuses the next append (a full disk, a lost connection)."""

    refuse = False

    def append(self, request: AppendRequest) -> list[int]:
        if self.refuse:
            self.refuse = False
            raise StoreError("disk full")
        return super().append(request)


def test_a_refused_write_leaves_the_memory_as_it_was() -> None:
    store = RefusingStore()
    memory = Memory("gpt-5.1", format="responses", max_tokens=50_000, store=store)
    _talk(memory, 2)
    before = (memory.context().messages, memory.stats(), memory.messages())
    store.refuse = True
    with pytest.raises(StoreError):
        memory.add(ITEM)
    assert (memory.context().messages, memory.stats(), memory.messages()) == before
    memory.add(ITEM)
    assert memory.context().messages == [ITEM]


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.integers(20, 400), min_size=4, max_size=30), st.sets(st.integers(0, 29), max_size=4))
def test_with_the_provider_strategy_the_budget_holds_and_only_compactions_summarize(
    sizes: list[int], compacting: set[int]
) -> None:
    memory = Memory("gpt-5.1", format="responses", max_tokens=3_000, strategy="provider", max_output_tokens=200)
    for turn, size in enumerate(sizes):
        memory.add({"role": "user", "content": "word " * size})
        if turn in compacting:
            memory.add({**ITEM, "id": f"cmp_{turn}"})
        ctx = memory.context()
        assert ctx.account.total + ctx.account.reserved_output <= ctx.account.budget
        compactions = [i for i, item in enumerate(ctx.messages) if item.get("type") == "compaction"]
        assert len(compactions) <= 1
        if compactions:
            assert compactions[0] == 0, "nothing of the history before the latest compaction"
    assert memory.stats().summaries == len([t for t in compacting if t < len(sizes)])
