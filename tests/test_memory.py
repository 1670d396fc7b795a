"""Behaviour of the Memory facade: integrity, strategies, budgets, stats, resume."""

from __future__ import annotations

import json
from typing import Any

import pytest

from convmem import (
    ConfigurationError,
    ConflictError,
    ContextOverflowError,
    InvalidMessageError,
    Memory,
    Message,
    SessionNotFoundError,
    ToolCall,
)
from convmem.formats.openai import from_openai
from convmem.policy.repair import SYNTHETIC_RESULT
from convmem.policy.truncate import MARKER
from convmem.stores import MemoryStore
from convmem.tokens import counter_for

from .fakes import FlakySummarizer, RecordingSummarizer, SpyCounter
from .validators import validate_anthropic, validate_openai, validate_responses

COUNTER = counter_for("gpt-4o")


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def call(*ids: str, text: str | None = None) -> Message:
    return Message(role="assistant", content=text, tool_calls=tuple(ToolCall(i, "lookup", '{"q": 1}') for i in ids))


def result(call_id: str, text: str = "ok") -> Message:
    return Message(role="tool", tool_call_id=call_id, content=text)


def _cumulative(calls: list[tuple[str | None, list[str]]]) -> list[list[str]]:
    total: list[str] = []
    out = []
    for _, ids in calls:
        total = total + ids
        out.append(total)
    return out


def context_total(messages: list[dict[str, object]]) -> int:
    """Count a rendered OpenAI context independently of the memory's account."""
    return sum(COUNTER.count_message(from_openai(m)) for m in messages) + COUNTER.reply_priming


def test_context_keeps_system_first_and_order() -> None:
    memory = Memory(max_tokens=1000)
    memory.add(user("hi"))
    memory.add({"role": "system", "content": "be brief"})
    memory.add(assistant("hello"))
    ctx = memory.context()
    assert [m["role"] for m in ctx.messages] == ["system", "user", "assistant"]
    assert ctx.tokens == context_total(ctx.messages)
    assert ctx.account.exact


def test_parallel_tool_calls_are_evicted_whole() -> None:
    memory = Memory(max_tokens=400)
    memory.add(user("look these up"))
    memory.add_many([call("a", "b", "c"), result("a", "x " * 60), result("b", "y " * 60), result("c", "z " * 60)])
    memory.add(user("thanks " * 10))
    memory.add(assistant("done"))
    ctx = memory.context()
    validate_openai(ctx.messages)
    roles = [m["role"] for m in ctx.messages]
    assert roles.count("tool") in (0, 3)
    assert ctx.tokens + ctx.account.reserved_output <= ctx.budget


def test_unknown_tool_call_id_is_refused_and_nothing_stored() -> None:
    memory = Memory(max_tokens=1000)
    memory.add(user("q"))
    memory.add(call("a"))
    with pytest.raises(InvalidMessageError) as info:
        memory.add(result("zzz"))
    assert info.value.field == "tool_call_id"
    assert "zzz" in str(info.value)
    assert len(memory.messages()) == 2


def test_tool_result_without_a_call_is_refused() -> None:
    memory = Memory(max_tokens=1000)
    memory.add(user("q"))
    with pytest.raises(InvalidMessageError, match="does not follow"):
        memory.add(result("a"))


def test_a_stored_id_with_other_content_is_a_conflict_naming_it_and_nothing_is_stored() -> None:
    memory = Memory(max_tokens=1000)
    memory.add(Message(role="user", content="one", id="m1"))
    with pytest.raises(ConflictError, match="'m1'"):
        memory.add_many([Message(role="assistant", content="two"), Message(role="user", content="three", id="m1")])
    with pytest.raises(ConflictError, match=r"'m1'.*other content"):
        memory.add(Message(role="user", content="not one", id="m1"))
    assert [m.text for m in memory.messages()] == ["one"]
    with pytest.raises(InvalidMessageError) as info:  # an id twice in one batch is the batch's own mistake
        memory.add_many([Message(role="user", content="a", id="x"), Message(role="assistant", content="b", id="x")])
    assert (info.value.field, info.value.index) == ("id", 1)


def test_adding_a_stored_message_again_is_a_retry_that_stores_nothing() -> None:
    memory = Memory(max_tokens=1000)
    first = memory.add(Message(role="user", content="one", id="m1"))
    again = memory.add(Message(role="user", content="one", id="m1"))  # created_at stamped anew: still a retry
    assert again == first
    memory.add_many([Message(role="assistant", content="two", id="m2"), Message(role="user", content="3", id="m3")])
    assert memory.add_many([Message(role="assistant", content="two", id="m2")])[0].id == "m2"
    assert [m.id for m in memory.messages()] == ["m1", "m2", "m3"]
    assert memory.stats().messages == 3
    assert [m["content"] for m in memory.context().messages] == ["one", "two", "3"]


IDEMPOTENT_DICTS = [
    {"role": "user", "content": "one", "id": "k1"},  # OpenAI Chat
    {"role": "user", "content": [{"type": "text", "text": "two"}], "id": "k2"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}], "id": "k3"},
    {"type": "function_call_output", "call_id": "t1", "output": "ok", "id": "k4"},  # Responses
    {"type": "message", "role": "user", "content": "five", "id": "k5"},
]


def test_a_dicts_id_in_any_format_is_its_idempotency_key() -> None:
    memory = Memory(max_tokens=1000)
    for item in IDEMPOTENT_DICTS:
        assert memory.add(item).id == item["id"]
    stored = memory.messages()
    for item in IDEMPOTENT_DICTS:  # each retried: nothing more is stored
        memory.add(item)
    memory.add_many(IDEMPOTENT_DICTS[3:])
    assert memory.messages() == stored
    assert [m.id for m in stored] == ["k1", "k2", "k3", "k4", "k5"]
    # A Chat dict has no id field: the key is the message's, as the Message with that id would be stored.
    assert stored[0] == Message(role="user", content="one", id="k1", created_at=stored[0].created_at)
    assert memory.add(Message(role="user", content="one", id="k1")) == stored[0]
    with pytest.raises(ConflictError, match="'k1'"):
        memory.add({"role": "user", "content": "not one", "id": "k1"})
    # The Agents SDK's stand-in id names no item: such items get ids of their own.
    fake = memory.add({"type": "message", "role": "assistant", "content": "six", "id": "__fake_id__"})
    assert fake.id != "__fake_id__"
    assert memory.add({"type": "message", "role": "user", "content": "seven", "id": "__fake_id__"}).id != fake.id
    # Several Responses items of one message: the message item's id.
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "8"}], "id": "msg_8"}
    assert [m.id for m in memory.add_many([reasoning, answer])] == ["msg_8"]
    assert len(memory.messages()) == 8


def test_batch_with_a_bad_message_is_all_or_nothing() -> None:
    memory = Memory(max_tokens=1000)
    with pytest.raises(InvalidMessageError) as info:
        memory.add_many([user("fine"), {"role": "wizard", "content": "x"}])
    assert info.value.index == 1
    assert info.value.field == "role"
    assert memory.messages() == []


def test_message_after_unanswered_calls_is_refused_then_rollback_or_repair() -> None:
    memory = Memory(max_tokens=1000)
    memory.add(user("q"))
    memory.add_many([call("a", "b"), result("a")])
    assert memory.pending_tool_calls == ["b"]
    with pytest.raises(InvalidMessageError, match="unanswered"):
        memory.add(user("next"))
    ctx = memory.context()
    assert [r.reason for r in ctx.left_out] == ["pending_tool_results"]
    validate_openai(ctx.messages)
    removed = memory.rollback_incomplete()
    assert [m.role for m in removed] == ["assistant", "tool"]
    assert [m.role for m in memory.messages()] == ["user"]
    memory.add(call("c"))
    added = memory.repair()
    assert [m.tool_call_id for m in added] == ["c"]
    assert added[0].text == SYNTHETIC_RESULT
    assert added[0].metadata["convmem"]["synthetic"] is True
    memory.add(user("next"))
    validate_openai(memory.context().messages)


def test_window_starts_at_a_user_message_after_eviction() -> None:
    memory = Memory(max_tokens=200)
    for i in range(20):
        memory.add(user(f"question {i} " * 3))
        memory.add_many([call(f"c{i}"), result(f"c{i}", "r " * 5)])
        memory.add(assistant(f"answer {i}"))
    ctx = memory.context()
    non_system = [m for m in ctx.messages if m["role"] != "system"]
    assert non_system[0]["role"] == "user"
    assert ctx.tokens + ctx.account.reserved_output <= ctx.budget
    reasons = {r.reason: r for r in ctx.left_out}
    assert reasons["archived"].messages == len(memory.messages("archived"))
    assert memory.stats().archived == reasons["archived"].messages


def test_sliding_window_keeps_at_most_n_messages() -> None:
    memory = Memory(max_tokens=10_000, strategy="sliding_window", strategy_options={"max_messages": 4})
    for i in range(10):
        memory.add(user(f"u{i}"))
        memory.add(assistant(f"a{i}"))
    ctx = memory.context()
    assert [m["content"] for m in ctx.messages] == ["u8", "a8", "u9", "a9"]
    assert len(memory.messages()) == 20
    assert len(memory.messages("archived")) == 16


def test_summary_buffer_is_incremental_and_records_its_range() -> None:
    summarizer = RecordingSummarizer()
    memory = Memory(
        max_tokens=2000,
        strategy="summary_buffer",
        summarizer=summarizer,
        strategy_options={"max_tokens": 120, "keep_recent_tokens": 60},
    )
    added = []
    for i in range(30):
        added += memory.add_many([user(f"turn {i} question"), assistant(f"turn {i} answer")])
    assert len(summarizer.calls) >= 3
    seen: set[str] = set()
    for _previous, ids in summarizer.calls:
        assert not (seen & set(ids)), "a message was summarized twice: history was re-summarized"
        seen |= set(ids)
    outputs = [f"covers {len(seen_ids)}" for seen_ids in _cumulative(summarizer.calls)]
    for output, (previous, _) in zip(outputs, summarizer.calls[1:], strict=False):
        assert previous is not None
        assert previous.startswith(output + " messages"), "each call must get the previous summary"
    summarized = memory.messages("summarized")
    assert [m.id for m in summarized] == [m.id for m in added[: len(summarized)]]
    ctx = memory.context()
    assert ctx.messages[0]["role"] == "user"  # a summary is quoted as data, never given the system's role
    assert ctx.messages[0]["content"].startswith('<earlier-conversation-summary messages="0-')
    assert f"covers {len(summarized)} messages" in ctx.messages[0]["content"]
    assert memory.stats().summaries == len(summarizer.calls)


@pytest.mark.parametrize("mode", ["raise", "empty"])
def test_failed_summary_archives_warns_and_retries(mode: str) -> None:
    summarizer = FlakySummarizer({1}, mode=mode)
    memory = Memory(
        max_tokens=2000,
        strategy="summary_buffer",
        summarizer=summarizer,
        strategy_options={"max_tokens": 120, "keep_recent_tokens": 60},
    )
    for i in range(30):
        memory.add_many([user(f"turn {i} question"), assistant(f"turn {i} answer")])
    stats = memory.stats()
    assert stats.summary_failures == 1
    assert any("summary failed" in w for w in stats.warnings)
    first_ids, second_ids = summarizer.calls[0][1], summarizer.calls[1][1]
    assert second_ids[: len(first_ids)] == first_ids, "the failed units were not retried"
    ctx = memory.context()
    assert "503" not in json.dumps(ctx.messages)
    assert "overloaded" not in json.dumps(ctx.messages)
    assert len(memory.messages()) == 60


def test_compaction_keeps_the_newest_turn() -> None:
    memory = Memory(
        max_tokens=5000,
        strategy="compaction",
        summarizer=RecordingSummarizer(),
        strategy_options={"max_tokens": 150, "keep_turns": 1},
    )
    for i in range(12):
        memory.add_many([user(f"question {i} " * 3), assistant(f"answer {i} " * 3)])
    ctx = memory.context()
    assert ctx.messages[0]["role"] == "user"  # the summary's note, before the window
    assert ctx.messages[0]["content"].startswith("<earlier-conversation-summary")
    assert ctx.messages[-2]["content"].startswith("question 11")


def test_budget_comes_from_the_registry() -> None:
    memory = Memory(model="gpt-4o", max_output_tokens=1000)
    assert (memory.budget, memory.reserved_output) == (128_000, 1000)
    explicit = Memory(model="gpt-4o", max_tokens=5000)
    assert (explicit.budget, explicit.reserved_output) == (5000, 0)
    with pytest.raises(ConfigurationError):
        Memory(max_tokens=100, max_output_tokens=100)


def test_oversized_newest_message_raises_or_is_truncated_visibly() -> None:
    huge = "log line with details\n" * 2000
    strict = Memory(max_tokens=500, on_overflow="raise")
    strict.add(user(huge))
    with pytest.raises(ContextOverflowError) as info:
        strict.context()
    assert info.value.budget == 500
    assert strict.messages()[0].text == huge  # stored intact
    lenient = Memory(max_tokens=500)
    lenient.add({"role": "system", "content": "sys"})
    lenient.add(user(huge))
    ctx = lenient.context()
    assert MARKER.strip() in ctx.messages[-1]["content"]
    assert ctx.messages[-1]["content"].startswith("log line")
    assert ctx.tokens == context_total(ctx.messages) <= 500
    assert ctx.truncated
    assert ctx.truncated[0].original_tokens > 500
    assert lenient.messages()[1].text == huge


def test_messages_are_counted_once() -> None:
    spy = SpyCounter(COUNTER)
    memory = Memory(max_tokens=300, counter=spy)  # type: ignore[arg-type]
    for i in range(50):
        memory.add(user(f"message {i} " * 5))
        memory.context()
    assert spy.calls
    assert all(n == 1 for key, n in spy.calls.items() if key is not None)
    assert sum(n for key, n in spy.calls.items() if key is not None) == 50


def test_pinned_context_is_always_in_context() -> None:
    tasks = ["write tests"]
    memory = Memory(max_tokens=300, pinned_context=lambda: "TODO: " + ", ".join(tasks))
    for i in range(40):
        memory.add(user(f"filler {i} " * 8))
    tasks.append("ship")
    ctx = memory.context()
    assert any("TODO: write tests, ship" in str(m["content"]) for m in ctx.messages)
    assert ctx.account.blocks["pinned_context"] > 0
    assert ctx.tokens == context_total(ctx.messages) <= 300


def test_formats_in_and_out() -> None:
    memory = Memory(max_tokens=2000)
    memory.add({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    memory.add_many(
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]},
        ]
    )
    memory.add_many(
        [
            {"type": "function_call", "call_id": "r1", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "r1", "output": "7"},
        ]
    )
    memory.add(assistant("done"))
    validate_openai(memory.context().messages)
    anthropic = memory.context(format="anthropic")
    validate_anthropic(anthropic.system, anthropic.messages)
    validate_responses(memory.context(format="responses").messages)


def test_record_usage_accumulates_cost_from_the_registry() -> None:
    memory = Memory(model="gpt-4o", max_output_tokens=100)
    memory.add(user("hi"))
    memory.record_usage({"prompt_tokens": 1_000_000, "completion_tokens": 0})
    memory.record_usage({"input_tokens": 0, "output_tokens": 1_000_000, "cache_read_input_tokens": 0})
    stats = memory.stats()
    info = memory._core.info
    assert info is not None
    assert stats.input_tokens == 1_000_000
    assert stats.output_tokens == 1_000_000
    assert stats.cost_usd == pytest.approx(info.input_price_per_mtok + info.output_price_per_mtok)
    with pytest.raises(InvalidMessageError, match="usage"):
        memory.record_usage({"completion_tokens": 3})


def test_clear_archives_everything_and_keeps_system() -> None:
    memory = Memory(max_tokens=1000)
    memory.add({"role": "system", "content": "sys"})
    memory.add_many([user("a"), assistant("b")])
    memory.clear()
    assert [m["role"] for m in memory.context().messages] == ["system"]
    assert len(memory.messages("archived")) == 2
    memory.clear(keep_system=False)
    assert memory.context().messages == []
    assert len(memory.messages()) == 3


def test_reopen_gives_the_same_context_and_isolates_users() -> None:
    store = MemoryStore()
    summarizer = RecordingSummarizer()
    options = {
        "max_tokens": 400,
        "strategy": "summary_buffer",
        "summarizer": summarizer,
        "strategy_options": {"max_tokens": 150, "keep_recent_tokens": 80},
    }
    memory = Memory(store=store, user_id="alice", **options)  # type: ignore[arg-type]
    memory.add({"role": "system", "content": "sys"})
    for i in range(25):
        memory.add_many([user(f"q{i} " * 4), call(f"c{i}"), result(f"c{i}"), assistant(f"a{i}")])
    before = memory.context()
    reopened = Memory.open(memory.session_id[:8], store=store, user_id="alice", **options)  # type: ignore[arg-type]
    after = reopened.context()
    assert after.messages == before.messages
    assert after.account == before.account
    assert reopened.stats() == memory.stats()
    with pytest.raises(SessionNotFoundError):
        Memory.open(memory.session_id, store=store, user_id="mallory", max_tokens=400)


def test_unknown_strategy_and_bad_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="unknown strategy"):
        Memory(max_tokens=100, strategy="lru")
    with pytest.raises(ConfigurationError, match="only used by"):
        Memory(max_tokens=100, strategy="token_budget", summarizer=object())
    with pytest.raises(ConfigurationError, match="max_messages"):
        Memory(max_tokens=100, strategy="sliding_window", strategy_options={"max_messages": 0})


def test_plain_dict_fast_path_equals_the_format_parser() -> None:
    from datetime import datetime, timezone

    from convmem.formats import parse_message
    from convmem.memory._intake import parse_all

    now = datetime.now(timezone.utc)
    for role in ("user", "assistant", "system", "developer"):
        [fast] = parse_all([{"role": role, "content": "héllo"}], now)
        slow = parse_message({"role": role, "content": "héllo"})
        assert fast.replace(id=None, created_at=None) == slow


def test_default_reserve_is_capped_to_a_quarter_of_the_window() -> None:
    memory = Memory(model="gpt-4")
    assert memory.budget == 8192
    assert memory.reserved_output == 2048


def test_token_budget_evicts_in_chunks_down_to_the_low_watermark() -> None:
    memory = Memory(max_tokens=1000, strategy_options={"low_watermark": 0.5})
    for i in range(60):
        memory.add(user(f"message number {i} " * 4))
    ctx = memory.context()
    assert ctx.tokens <= 1000
    exact = Memory(max_tokens=1000, strategy_options={"low_watermark": 1.0})
    for i in range(60):
        exact.add(user(f"message number {i} " * 4))
    assert exact.context().account.window > ctx.account.window


def test_evicted_units_flow_to_sinks_whole_and_a_failing_sink_loses_nothing() -> None:
    received: list[list[str]] = []

    class Sink:
        def absorb(self, units: Any, *, session_id: str, user_id: str | None) -> None:
            received.extend([[s.message.role for s in unit] for unit in units])

    class BrokenSink:
        def absorb(self, units: Any, *, session_id: str, user_id: str | None) -> None:
            raise OSError("index offline")

    memory = Memory(max_tokens=300, sinks=[Sink(), BrokenSink()])
    for i in range(15):
        memory.add(user(f"question {i} " * 5))
        memory.add_many([call(f"c{i}", f"d{i}"), result(f"c{i}", "r " * 10), result(f"d{i}", "s " * 10)])
    assert ["assistant", "tool", "tool"] in received
    assert all(unit in (["user"], ["assistant", "tool", "tool"]) for unit in received)
    assert sum(len(u) for u in received) == len(memory.messages("archived"))
    assert any("BrokenSink failed: OSError: index offline" in w for w in memory.stats().warnings)


def test_store_spec_string_opens_sqlite_and_the_session_resumes(tmp_path: Any) -> None:
    from convmem.stores import open_store

    path = tmp_path / "conv.db"
    memory = Memory(max_tokens=300, store=f"sqlite://{path}", user_id="u1")
    for i in range(30):
        memory.add_many([user(f"question {i} " * 4), call(f"c{i}"), result(f"c{i}", "r " * 8), assistant(f"a{i}")])
    before = memory.context()
    memory.close()
    reopened = Memory.open(memory.session_id, store=open_store(str(path)), user_id="u1", max_tokens=300)
    assert reopened.context().messages == before.messages
    assert len(reopened.messages()) == 120
    reopened.close()


@pytest.mark.parametrize("strategy", ["summary_buffer", "compaction"])
def test_folding_strategies_default_to_the_extractive_summarizer(strategy: str) -> None:
    from convmem.llm import ExtractiveSummarizer
    from convmem.llm.extractive import HEADER

    memory = Memory(max_tokens=400, strategy=strategy, summary_max_tokens=80)
    assert isinstance(memory.strategy.summarizer, ExtractiveSummarizer)
    for i in range(40):
        memory.add(user(f"Turn {i}: the invoice total was {100 + i} euros, due on day {i % 28 + 1}."))
    stats = memory.stats()
    assert stats.summaries > 0
    assert stats.warnings == ()  # bound to the memory's counter: the cap is exact, nothing is truncated
    summary = memory.context().messages[0]["content"]
    assert HEADER in summary


def test_open_without_options_reuses_the_saved_budget_and_strategy(tmp_path: Any) -> None:
    from convmem.stores import open_store

    store = open_store(str(tmp_path / "c.db"))
    memory = Memory(
        max_tokens=900,
        max_output_tokens=100,
        strategy="sliding_window",
        strategy_options={"max_messages": 6},
        store=store,
    )
    for i in range(20):
        memory.add_many([user(f"q{i}"), assistant(f"a{i}")])
    before = memory.context()
    memory.close()  # the store was passed in: it stays open for its owner
    reopened = Memory.open(memory.session_id, store=store)
    assert (reopened.budget, reopened.reserved_output) == (900, 100)
    assert reopened.context().messages == before.messages
    reopened.add_many([user("q20"), assistant("a20")])
    assert [m["content"] for m in reopened.context().messages][-2:] == ["q20", "a20"]
    assert len(reopened.context().messages) == 6
    overridden = Memory.open(memory.session_id, store=store, strategy="token_budget")
    assert overridden.strategy.name == "token_budget"
    store.close()
