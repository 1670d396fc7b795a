"""ConvmemSession under the OpenAI Agents SDK's real Runner, over the SDK's ScriptedModel (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from convmem import AsyncMemory, ConfigurationError, InvalidMessageError, Memory
from convmem.formats import parse_messages
from convmem.integrations.agents import ConvmemSession
from convmem.stores import open_store
from tests.integrations._checks import check_request, request_tokens, tool_output

SYSTEM = "You are a travel assistant. Answer in one short sentence."
TURNS = 12
set_tracing_disabled(True)


@function_tool
def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


def _script(turns: int) -> ScriptedModel:
    """Per turn: two parallel tool calls, then an answer naming both cities."""
    steps: list[Any] = []
    for turn in range(turns):
        a, b = f"City{turn}A", f"City{turn}B"
        steps.append(
            [
                function_call("forecast", {"city": a}, call_id=f"t{turn}a"),
                function_call("forecast", {"city": b}, call_id=f"t{turn}b"),
            ]
        )
        steps.append(ModelStep.respond(lambda call, a=a, b=b: [assistant_message(f"{a} and {b}: mild all week.")]))
    return ScriptedModel(steps)


def _request(call: ModelCall) -> list[Any]:
    """What the model was sent, as convmem Messages: the instructions, then the input items."""
    items = [{"role": "user", "content": call.input}] if isinstance(call.input, str) else call.input
    return parse_messages([{"role": "system", "content": call.system_instructions}], "openai") + parse_messages(
        items, format="responses"
    )


async def _run(session: Any, config: RunConfig | None, turns: int = TURNS) -> ScriptedModel:
    model = _script(turns)
    agent = Agent(name="travel", instructions=SYSTEM, model=model, tools=[forecast])
    for turn in range(turns):
        result = await Runner.run(agent, f"Turn {turn}: how is the weather?", session=session, run_config=config)
        assert result.final_output.endswith("mild all week.")
    model.assert_complete()
    return model


def _memory(**options: Any) -> AsyncMemory:
    return AsyncMemory(model="gpt-4o", max_tokens=2_000, max_output_tokens=300, **options)


async def test_every_model_call_stays_within_budget_where_sqlite_session_does_not() -> None:
    memory = _memory()
    limit = memory.budget - memory.reserved_output
    session = ConvmemSession(memory)
    ours = await _run(session, RunConfig(call_model_input_filter=session.call_model_input_filter))
    sizes = [check_request(memory.counter, _request(call), limit=limit, system=SYSTEM) for call in ours.calls]
    assert len(sizes) == 2 * TURNS
    assert max(sizes) > limit // 2  # the history was used, not thrown away

    theirs = await _run(SQLiteSession("baseline"), None)
    their_sizes = [request_tokens(memory.counter, _request(call)) for call in theirs.calls]
    assert max(their_sizes) > 3 * limit  # the SDK's own session never trims
    over = next(i for i, size in enumerate(their_sizes) if size > limit)
    print(
        f"\nagents: limit {limit}; convmem max {max(sizes)}; SQLiteSession max {max(their_sizes)}, over at call {over}"
    )
    # Nothing was lost: every item of every turn is stored, archived or in the window.
    stored = await memory.messages()
    assert len(stored) == TURNS * 5  # user, assistant with 2 calls, 2 results, answer
    assert {m.tool_call_id for m in stored if m.role == "tool"} == {f"t{t}{x}" for t in range(TURNS) for x in "ab"}


async def test_get_items_alone_is_the_budgeted_context() -> None:
    memory = _memory()
    session = ConvmemSession(memory)
    await _run(session, None, turns=6)
    items = await session.get_items()
    limit = memory.budget - memory.reserved_output
    messages = parse_messages(items, format="responses")
    assert request_tokens(memory.counter, messages) <= limit
    assert messages[0].role == "user"  # whole units: never a result without its call
    assert (await memory.context(format="responses")).messages == items
    assert len(await session.get_items(limit=3)) == 3
    assert await session.get_items(limit=3) == items[-3:]


async def test_parallel_calls_and_their_outputs_in_one_batch() -> None:
    items: list[Any] = [
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "forecast", "arguments": '{"city":"Paris"}', "id": "c1"},
        {"type": "function_call", "call_id": "c2", "name": "forecast", "arguments": '{"city":"Rome"}', "id": "c2"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": "rainy"},
    ]
    # Memory.add_many takes the items as they come: the parallel calls join one assistant message (issue 13).
    direct = Memory(max_tokens=1_000)
    direct.add_many(items)
    assert [len(m.tool_calls) for m in direct.messages()] == [0, 2, 0, 0]
    session = ConvmemSession(_memory())
    await session.add_items(items)
    assert await session.get_items() == items
    assert len(await session.memory.messages()) == 4  # user, one assistant with both calls, two results


async def test_reasoning_items_and_sdk_message_fields_round_trip() -> None:
    session = ConvmemSession(_memory())
    items: list[Any] = [
        {"role": "user", "content": "think first"},
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "forecast", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": [], "logprobs": []}],
        },
    ]
    await session.add_items(items)
    # Given back as the request schema takes them: an output message's logprobs are reply-only.
    sent = [*items[:-1], {**items[-1], "content": [{"type": "output_text", "text": "done", "annotations": []}]}]
    assert await session.get_items() == sent


async def test_pop_item_removes_exactly_the_newest_item() -> None:
    session = ConvmemSession(_memory())
    assert await session.pop_item() is None  # nothing stored yet
    await session.add_items([{"role": "user", "content": "hi"}])
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    answer = {"role": "assistant", "content": "hello"}
    await session.add_items([reasoning, answer])  # one assistant message rendering to two items
    assert await session.pop_item() == answer
    assert await session.get_items() == [{"role": "user", "content": "hi"}, reasoning]
    assert await session.pop_item() == reasoning
    assert await session.pop_item() == {"role": "user", "content": "hi"}
    assert await session.pop_item() is None
    assert await session.memory.messages() == []


async def test_pop_of_a_result_leaves_no_orphan_call_in_the_context() -> None:
    session = ConvmemSession(_memory())
    await session.add_items(
        [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "forecast", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]
    )
    assert (await session.pop_item()) == {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    assert await session.get_items() == [{"role": "user", "content": "go"}]  # the call awaits its result again
    assert session.memory.pending_tool_calls == ["c1"]


async def test_clear_session_empties_the_context_and_keeps_the_history() -> None:
    session = ConvmemSession(_memory())
    await _run(session, None, turns=2)
    await session.clear_session()
    assert await session.get_items() == []
    assert len(await session.memory.messages()) == 10  # archived, not deleted
    await _run(session, None, turns=1)  # the session goes on after a clear
    assert len(await session.get_items()) == 6


async def test_the_filter_refuses_input_this_session_has_not_stored() -> None:
    session = ConvmemSession(_memory())
    model = _script(1)
    agent = Agent(name="travel", instructions=SYSTEM, model=model, tools=[forecast])
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    with pytest.raises(ConfigurationError, match="same ConvmemSession"):
        await Runner.run(agent, "hi", session=SQLiteSession("other"), run_config=config)


async def test_a_bad_item_stores_nothing() -> None:
    session = ConvmemSession(_memory())
    with pytest.raises(InvalidMessageError):
        await session.add_items([{"role": "user", "content": "ok"}, {"type": "video_call", "id": "w"}])
    assert await session.memory.messages() == []


def test_a_sync_memory_in_a_persistent_store_resumes(tmp_path: Any) -> None:
    import asyncio

    store = open_store(f"sqlite:///{tmp_path}/agents.db")
    memory = Memory(model="gpt-4o", max_tokens=2_000, max_output_tokens=300, store=store, user_id="u1")
    asyncio.run(_run(ConvmemSession(memory), None, turns=2))
    again = Memory.open(memory.session_id, store=store, user_id="u1")
    items = asyncio.run(ConvmemSession(again).get_items())
    assert items == asyncio.run(ConvmemSession(memory).get_items())
    assert json.dumps(items)  # plain JSON, as the SDK sends it
    store.close()
