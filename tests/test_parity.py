"""The sync and async twins give identical results for the same scenarios."""

from __future__ import annotations

from typing import Any

import pytest

from convmem import AsyncMemory, Memory, Message, ToolCall

from .fakes import AsyncRecordingSummarizer, FlakySummarizer, RecordingSummarizer

SCENARIO: list[list[Any]] = [
    [{"role": "system", "content": "You are a careful assistant."}],
    *[[{"role": "user", "content": f"question {i} " * 6}] for i in range(3)],
    [Message(role="assistant", tool_calls=(ToolCall("a", "f", "{}"), ToolCall("b", "g", '{"x": [1, 2]}')))],
    [Message(role="tool", tool_call_id="a", content="result a " * 30)],
    [Message(role="tool", tool_call_id="b", content="result b " * 30)],
    *[
        [{"role": "user", "content": f"follow-up {i} " * 9}, {"role": "assistant", "content": f"reply {i}"}]
        for i in range(12)
    ],
]

CONFIGS: list[dict[str, Any]] = [
    {"strategy": "token_budget"},
    {"strategy": "sliding_window", "strategy_options": {"max_messages": 5}},
    {
        "strategy": "summary_buffer",
        "summarizer": RecordingSummarizer,
        "strategy_options": {"max_tokens": 200, "keep_recent_tokens": 100},
    },
    {
        "strategy": "summary_buffer",
        "summarizer": lambda: FlakySummarizer({1, 3}),
        "strategy_options": {"max_tokens": 200, "keep_recent_tokens": 100},
    },
    {"strategy": "compaction", "summarizer": AsyncRecordingSummarizer, "strategy_options": {"max_tokens": 250}},
]


def build(config: dict[str, Any]) -> dict[str, Any]:
    options = dict(config)
    if "summarizer" in options:
        options["summarizer"] = options["summarizer"]()
    return options


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: str(c["strategy"]))
async def test_sync_and_async_give_identical_contexts(config: dict[str, Any]) -> None:
    sync = Memory(max_tokens=600, max_output_tokens=50, **build(config))
    asyn = AsyncMemory(max_tokens=600, max_output_tokens=50, **build(config))
    for step in SCENARIO:
        sync.add_many(step)
        await asyn.add_many(step)
        for fmt in ("openai", "anthropic", "responses"):
            a, b = sync.context(format=fmt), await asyn.context(format=fmt)
            assert (a.messages, a.system, a.account, a.left_out) == (b.messages, b.system, b.account, b.left_out)
    assert sync.stats() == asyn.stats()
    assert [m.content for m in sync.messages()] == [m.content for m in await asyn.messages()]
    assert [m.content for m in sync.messages("archived")] == [m.content for m in await asyn.messages("archived")]
    assert sync.rollback_incomplete() == await asyn.rollback_incomplete() == []
    await asyn.aclose()
    sync.close()


def test_every_public_method_has_an_async_twin() -> None:
    public = {name for name in dir(Memory) if not name.startswith("_")}
    twins = {name for name in dir(AsyncMemory) if not name.startswith("_")}
    assert public - {"close"} <= twins
    assert "aclose" in twins
