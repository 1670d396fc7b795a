"""Blocks: working-block edits and versions, truncation order, positions, templates, facts and recall blocks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import BlockEditError, ConfigurationError, ConflictError
from convmem.formats.openai import from_openai
from convmem.longterm import FactsBlock, RecallBlock, StaticBlock, WorkingBlock
from convmem.longterm.blocks.store import MemoryBlockStore
from convmem.longterm.facts.book import Facts
from convmem.longterm.recall.index import RecallIndex
from convmem.policy.assembly import BlockText
from convmem.tokens import counter_for

from .._quick import examples
from ..validators import validate_anthropic, validate_openai

COUNTER = counter_for("gpt-4o")


def total(messages: list[dict[str, Any]]) -> int:
    return sum(COUNTER.count_message(from_openai(m)) for m in messages) + COUNTER.reply_priming


def texts(ctx: Any) -> str:
    return "\n".join(str(m["content"]) for m in ctx.messages)


# -- WorkingBlock ---------------------------------------------------------------------------


def test_working_block_edits_and_versions() -> None:
    block = WorkingBlock("human", "Name: Alice", max_tokens=30)
    assert block.version == 0
    assert block.append("Likes: tea") == 1
    assert block.replace("tea", "green tea") == 2
    assert block.value == "Name: Alice\nLikes: green tea"
    assert block.update("Name: Alice", expected_version=2) == 3
    with pytest.raises(ConflictError, match="version 3, not 2"):
        block.append("stale", expected_version=2)
    with pytest.raises(BlockEditError, match="not found"):
        block.replace("Bob", "Carol")
    block.append("Alice again")
    with pytest.raises(BlockEditError, match="2 times"):
        block.replace("Alice", "Al")
    with pytest.raises(BlockEditError, match="at most 30 tokens"):
        block.append("word " * 40)
    assert block.value == "Name: Alice\nAlice again"  # a refused edit changes nothing
    assert block.version == 4
    with pytest.raises(BlockEditError):
        WorkingBlock("x", "word " * 40, max_tokens=5)
    with pytest.raises(ConfigurationError):
        WorkingBlock("bad name!")
    with pytest.raises(ConfigurationError):
        WorkingBlock("x", position="middle")  # type: ignore[arg-type]


def test_working_block_persists_per_scope_with_optimistic_versions() -> None:
    store = MemoryBlockStore()
    alice = WorkingBlock("persona", "v0", store=store, scope="alice")
    again = WorkingBlock("persona", "ignored: the stored value wins", store=store, scope="alice")
    bob = WorkingBlock("persona", "bob's", store=store, scope="bob")
    assert again.value == "v0"
    alice.update("v1")
    with pytest.raises(ConflictError):
        again.update("lost update")  # another instance moved the stored block on
    again.reload()
    assert again.value == "v1"
    assert again.update("v2") == 3
    assert store.load_block("alice", "persona").value == "v2"  # type: ignore[union-attr]
    assert bob.value == "bob's"
    assert [r.name for r in store.list_blocks("bob")] == ["persona"]
    assert store.list_blocks("carol") == []


# -- assembly: truncation order, caps, templates, positions ----------------------------------


def test_lowest_priority_is_cut_first_and_zero_never() -> None:
    blocks = [
        StaticBlock("core", "core " * 40, priority=0),
        StaticBlock("facts", "fact " * 40, priority=1),
        StaticBlock("recall", "recall " * 40, priority=2),
        StaticBlock("scratch", "scratch " * 40, priority=3),
    ]
    full = Memory(max_tokens=2000, blocks=blocks)
    full.add({"role": "user", "content": "hello"})
    need = full.context().tokens
    scratch, recall = COUNTER.count_text("scratch " * 40), COUNTER.count_text("recall " * 40)
    for squeeze, dropped, truncated in [
        (scratch // 2, [], ["scratch"]),
        (scratch + recall // 2, ["scratch"], ["recall"]),
        (scratch + recall + 10, ["scratch", "recall"], ["facts"]),
    ]:
        memory = Memory(max_tokens=need - squeeze, blocks=blocks)
        memory.add({"role": "user", "content": "hello"})
        ctx = memory.context()
        cut = {r.reason: [] for r in ctx.left_out}
        for r in ctx.left_out:
            cut.setdefault(r.reason, []).append(r.detail)
        assert cut.get("block_dropped", []) == dropped
        assert cut.get("block_truncated", []) == truncated
        assert "core " * 40 in texts(ctx)
        assert ctx.tokens == total(ctx.messages) <= ctx.budget
    tiny = Memory(max_tokens=need - scratch - recall - COUNTER.count_text("fact " * 40) + 5, blocks=blocks)
    tiny.add({"role": "user", "content": "hello"})
    ctx = tiny.context()
    assert "core " * 40 in texts(ctx)  # priority 0 survives everything
    assert set(ctx.account.blocks) == {"core"}


def test_block_max_tokens_caps_its_text() -> None:
    memory = Memory(max_tokens=2000, blocks=[StaticBlock("log", "line " * 500, max_tokens=40)])
    memory.add({"role": "user", "content": "hi"})
    ctx = memory.context()
    assert "truncated by convmem" in texts(ctx)
    assert ctx.account.blocks["log"] <= 40 + 12  # the cap plus the tags and message overhead


def test_template_is_replaceable() -> None:
    def template(blocks: Sequence[BlockText]) -> str:
        return "\n".join(f"## {b.name}\n{b.text}" for b in blocks)

    memory = Memory(max_tokens=500, blocks=[StaticBlock("persona", "terse")], block_template=template)
    memory.add({"role": "user", "content": "hi"})
    ctx = memory.context()
    assert ctx.messages[0] == {"role": "system", "content": "## persona\nterse"}
    assert ctx.tokens == total(ctx.messages)


def test_user_position_goes_into_the_latest_user_message() -> None:
    blocks = [StaticBlock("persona", "terse", position="system"), StaticBlock("notes", "remember X", position="user")]
    memory = Memory(max_tokens=500, blocks=blocks)
    memory.add({"role": "user", "content": "first"})
    memory.add({"role": "assistant", "content": "ok"})
    ctx = memory.context("second")
    last = ctx.messages[-1]
    assert last["role"] == "user"
    assert last["content"][0]["text"] == "<notes>\nremember X\n</notes>"
    assert last["content"][1]["text"] == "second"
    assert "remember X" not in str(ctx.messages[:-1])
    assert ctx.tokens == total(ctx.messages)
    validate_openai(ctx.messages)
    memory.add({"role": "user", "content": "third"})  # no input: the newest window message carries them
    ctx = memory.context()
    assert ctx.messages[-1]["content"][0]["text"].startswith("<notes>")
    assert ctx.tokens == total(ctx.messages)
    assert memory.messages()[-1].content == "third"  # the stored message is untouched
    anthropic = memory.context(format="anthropic")
    validate_anthropic(anthropic.system, anthropic.messages)
    memory.add({"role": "assistant", "content": "done"})  # the latest user message keeps them
    ctx = memory.context()
    assert [m["role"] for m in ctx.messages[-2:]] == ["user", "assistant"]
    assert ctx.messages[-2]["content"][0]["text"].startswith("<notes>")
    assert "remember X" not in str([m for m in ctx.messages if m["role"] == "system"])
    assert ctx.tokens == total(ctx.messages)


def test_user_position_blocks_are_cut_by_priority_too() -> None:
    blocks = [
        StaticBlock("keep", "keep " * 10, priority=0, position="user"),
        StaticBlock("cut", "cut " * 200, priority=5, position="user"),
    ]
    memory = Memory(max_tokens=200, blocks=blocks)
    memory.add({"role": "user", "content": "hi"})
    ctx = memory.context()
    assert ctx.tokens == total(ctx.messages) <= 200
    assert "keep " * 10 in str(ctx.messages[-1])
    assert any(r.detail == "cut" for r in ctx.left_out)


# -- facts and recall blocks -------------------------------------------------------------


def sliding(user: str | None, session: str, **options: Any) -> Memory:
    return Memory(
        max_tokens=4000,
        user_id=user,
        session_id=session,
        strategy="sliding_window",
        strategy_options={"max_messages": 2},
        **options,
    )


def test_facts_block_shows_the_users_valid_facts_only() -> None:
    facts = Facts()
    past = datetime.now(timezone.utc) - timedelta(days=30)
    old = facts.add("Alice lives in Lisbon", user_id="alice", valid_from=past)
    facts.update(old.id, "Alice lives in Porto", user_id="alice")
    facts.add("Bob has a cat", user_id="bob")
    block = FactsBlock(facts)
    alice, bob = sliding("alice", "a", blocks=[block]), sliding("bob", "b", blocks=[block])
    alice.add({"role": "user", "content": "hi"})
    bob.add({"role": "user", "content": "hi"})
    assert "Alice lives in Porto" in texts(alice.context())
    assert "Lisbon" not in texts(alice.context())
    assert "Bob" not in texts(alice.context())
    assert "Bob has a cat" in texts(bob.context())
    assert "Alice" not in texts(bob.context())


def test_recall_block_brings_back_archived_turns_not_in_the_window() -> None:
    recall = RecallIndex()
    block = RecallBlock(recall, k=3)
    memory = sliding("alice", "s1", sinks=[recall], blocks=[block])
    memory.add({"role": "user", "content": "My locker code is 4812."})
    memory.add({"role": "assistant", "content": "Noted."})
    memory.add({"role": "user", "content": "The weather is nice."})
    memory.add({"role": "assistant", "content": "Indeed."})
    ctx = memory.context("What is my locker code?")
    assert "My locker code is 4812." in texts(ctx)
    assert block.last_hits[0].doc.text == "My locker code is 4812."
    window = {m.text for m in memory.messages(status="active")}
    assert not window & {h.doc.text for h in block.last_hits}
    other = sliding("bob", "s2", sinks=[recall], blocks=[block])
    other.add({"role": "user", "content": "hello"})
    assert "4812" not in texts(other.context("What is my locker code?"))
    assert memory.context().tokens == total(memory.context().messages)


def test_recall_block_can_stay_in_the_current_session() -> None:
    recall = RecallIndex()
    first = sliding("alice", "s1", sinks=[recall])
    for text in ["I parked on level 3", "ok", "x", "y"]:
        first.add({"role": "user", "content": text})
    block = RecallBlock(recall, sessions="current")
    second = sliding("alice", "s2", sinks=[recall], blocks=[block])
    second.add({"role": "user", "content": "hi"})
    assert "level 3" not in texts(second.context("where did I park?"))
    everywhere = sliding("alice", "s3", sinks=[recall], blocks=[RecallBlock(recall)])
    everywhere.add({"role": "user", "content": "hi"})
    assert "level 3" in texts(everywhere.context("where did I park?"))


@settings(max_examples=examples(25), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["alice", "bob", "carol"]), st.sampled_from(["tea", "chess", "Lisbon"])),
        min_size=1,
        max_size=12,
    )
)
def test_blocks_never_leak_across_users(script: list[tuple[str, str]]) -> None:
    facts, recall = Facts(), RecallIndex()
    blocks = [FactsBlock(facts), RecallBlock(recall, k=10)]
    memories = {u: sliding(u, f"session-{u}", sinks=[recall], blocks=blocks) for u in ("alice", "bob", "carol")}
    for user, topic in script:
        facts.add(f"{user} secret about {topic}", user_id=user)
        memory = memories[user]
        memory.add({"role": "user", "content": f"{user} note on {topic}"})
        memory.add({"role": "user", "content": "filler"})
        memory.add({"role": "user", "content": "filler two"})
    for user, memory in memories.items():
        rendered = texts(memory.context("tea chess Lisbon note secret"))
        for other in set(memories) - {user}:
            assert other not in rendered
