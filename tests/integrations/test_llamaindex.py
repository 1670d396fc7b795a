"""ConvmemMemory under LlamaIndex's FunctionAgent (over MockFunctionCallingLLM) and SimpleChatEngine (over MockLLM)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory as LlamaMemory
from llama_index.core.tools import FunctionTool

from convmem import InvalidMessageError, Memory
from convmem.integrations.llamaindex import ConvmemMemory
from convmem.messages import Message, ToolCall
from tests.integrations._checks import check_request, tool_output

# llama-index's workflow engine walks its agents' attributes, touching pydantic's deprecated __fields__.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")

SYSTEM = "You are a travel assistant. Answer in one short sentence."
TURNS = 10
REPLY_ROOM = 100  # the scripted replies are far shorter


def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


def as_convmem(messages: list[ChatMessage]) -> list[Message]:
    """An explicit mapping, independent of the adapter's conversion."""
    out = []
    for m in messages:
        text = "".join(b.text for b in m.blocks if isinstance(b, TextBlock))
        calls = tuple(
            ToolCall(b.tool_call_id or "", b.tool_name, json.dumps(b.tool_kwargs))
            for b in m.blocks
            if isinstance(b, ToolCallBlock)
        )
        if m.role.value == "tool":
            out.append(Message(role="tool", content=text, tool_call_id=m.additional_kwargs["tool_call_id"]))
        elif calls:
            out.append(Message(role="assistant", content=text or None, tool_calls=calls))
        else:
            out.append(Message(role=m.role.value, content=text))  # type: ignore[arg-type]
    return out


def scripted_llm(calls: list[list[ChatMessage]]) -> MockFunctionCallingLLM:
    """Two parallel tool calls after a user message, an answer after the results; records every request."""

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        calls.append(list(messages))
        n = len(calls)
        if messages[-1].role.value == "user":
            blocks = [
                ToolCallBlock(tool_call_id=f"c{n}{x}", tool_name="forecast", tool_kwargs={"city": f"City{n}{x}"})
                for x in "ab"
            ]
            return ChatMessage(role="assistant", blocks=blocks)
        return ChatMessage(role="assistant", content=f"Answer {n}: mild all week.")

    return MockFunctionCallingLLM(response_generator=respond)


async def run_agent(memory: Any, calls: list[list[ChatMessage]], turns: int = TURNS) -> None:
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(forecast)], llm=scripted_llm(calls))
    for turn in range(turns):
        response = await agent.run(f"Turn {turn}: how is the weather?", memory=memory)
        assert str(response).endswith("mild all week.")


async def test_function_agent_keeps_budget_and_system_prompt_where_llamaindex_memory_drops_the_prompt(
    offline_tiktoken: Any,
) -> None:
    # max_output_tokens covers the reply and one round of tool results, which the agent appends to get().
    memory = Memory(model="gpt-4o", max_tokens=2_000, max_output_tokens=500)
    memory.add({"role": "system", "content": SYSTEM})
    calls: list[list[ChatMessage]] = []
    await run_agent(ConvmemMemory(memory=memory), calls)
    limit = memory.budget - REPLY_ROOM
    sizes = [check_request(memory.counter, as_convmem(call), limit=limit, system=SYSTEM) for call in calls]
    assert len(sizes) == 2 * TURNS
    assert max(sizes) > limit // 2
    assert len(memory.messages()) == 1 + 5 * TURNS  # nothing lost

    theirs = LlamaMemory.from_defaults(token_limit=memory.budget - 500, session_id="baseline")
    await theirs.aput(ChatMessage(role="system", content=SYSTEM))
    their_calls: list[list[ChatMessage]] = []
    await run_agent(theirs, their_calls)
    engine = theirs.sql_store._async_engine  # type: ignore[attr-defined]  # its in-memory SQLite, closed here
    if engine is not None:
        await engine.dispose()
    without = sum(1 for call in their_calls if not call or call[0].content != SYSTEM)
    assert without > 0  # LlamaIndex's Memory flushes the system prompt with the oldest messages
    print(
        f"\nllamaindex: limit {limit}; convmem max {max(sizes)}, prompt kept in all {len(calls)} calls; "
        f"llama-index Memory dropped the prompt from {without} of {len(their_calls)} calls"
    )


def test_simple_chat_engine_over_mock_llm() -> None:
    memory = Memory(model="gpt-4o", max_tokens=600, max_output_tokens=100)
    memory.add({"role": "system", "content": SYSTEM})
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=20), memory=ConvmemMemory(memory=memory))
    limit = memory.budget - memory.reserved_output
    for turn in range(20):
        engine.chat(f"Turn {turn}: " + "tell me about the weather " * 5)
        check_request(memory.counter, as_convmem(ConvmemMemory(memory=memory).get()), limit=limit, system=SYSTEM)
    assert len(memory.messages()) == 1 + 2 * 20
    assert memory.stats().archived > 0  # the budget was reached, and what left the window was archived


def test_conversions_round_trip_and_refuse_what_they_cannot_carry() -> None:
    memory = ConvmemMemory(memory=Memory(max_tokens=2_000))
    messages = [
        ChatMessage(role="system", content=SYSTEM),
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={"a": 1})]),
        ChatMessage(role="tool", content="r", additional_kwargs={"tool_call_id": "c1"}),
        ChatMessage(role="assistant", content="done"),
    ]
    memory.put_messages(messages)
    got = memory.get()
    assert [m.role.value for m in got] == ["system", "user", "assistant", "tool", "assistant"]
    assert got[2].blocks[0] == messages[2].blocks[0]
    assert got[3].additional_kwargs == {"tool_call_id": "c1"}
    assert memory.get_all() == got
    with pytest.raises(InvalidMessageError, match="ImageBlock"):
        memory.put(ChatMessage(role="user", blocks=[ImageBlock(url="https://example.com/a.png")]))
    with pytest.raises(InvalidMessageError):  # a result for an unknown call: refused, nothing stored
        memory.put_messages(
            [
                ChatMessage(role="user", content="x"),
                ChatMessage(role="tool", content="r", additional_kwargs={"tool_call_id": "zz"}),
            ]
        )
    assert len(memory.get_all()) == 5
    memory.set([ChatMessage(role="user", content="fresh")])
    assert [m.content for m in memory.get()] == ["fresh"]
    memory.reset()
    assert memory.get() == []
    assert len(memory.memory.messages()) == 6  # archived, not deleted
