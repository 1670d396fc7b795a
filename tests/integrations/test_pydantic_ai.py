"""ConvmemHistory under Pydantic AI's real agent graph, over FunctionModel (no network)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from convmem import AsyncMemory, InvalidMessageError, Memory
from convmem.integrations.pydantic_ai import ConvmemHistory
from convmem.messages import Message, ToolCall
from tests.integrations._checks import check_request, request_tokens, tool_output
from tests.validators import ProviderRuleError

SYSTEM = "You are a travel assistant. Answer in one short sentence."
TURNS = 12


def as_convmem(messages: list[ModelMessage]) -> list[Message]:
    """An explicit mapping, independent of the adapter's conversion."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            calls = tuple(
                ToolCall(p.tool_call_id, p.tool_name, p.args_as_json_str())
                for p in m.parts
                if isinstance(p, ToolCallPart)
            )
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            out.append(Message(role="assistant", content=text or None, tool_calls=calls))
            continue
        for p in m.parts:
            if isinstance(p, SystemPromptPart):
                out.append(Message(role="system", content=p.content))
            elif isinstance(p, UserPromptPart):
                out.append(Message(role="user", content=str(p.content)))
            elif isinstance(p, ToolReturnPart):
                out.append(Message(role="tool", content=str(p.content), tool_call_id=p.tool_call_id))
    return out


def scripted(calls: list[list[ModelMessage]]) -> FunctionModel:
    """Two parallel tool calls after a user prompt, an answer after the results; records every request."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(list(messages))
        n = len(calls)
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart(f"Answer {n}: mild all week.")])
        return ModelResponse(parts=[ToolCallPart("forecast", {"city": f"City{n}{x}"}, f"c{n}{x}") for x in "ab"])

    return FunctionModel(respond)


def make_agent(calls: list[list[ModelMessage]], capability: Any = None) -> Agent[None, str]:
    capabilities = [capability] if capability is not None else []
    agent = Agent(scripted(calls), system_prompt=SYSTEM, capabilities=capabilities)

    @agent.tool_plain
    def forecast(city: str) -> str:
        """The twelve-day forecast for a city."""
        return tool_output(city)

    return agent


async def run(agent: Agent[None, str], *, pass_history: bool = True) -> list[ModelMessage]:
    history: list[ModelMessage] | None = None
    for turn in range(TURNS):
        result = await agent.run(f"Turn {turn}: how is the weather?", message_history=history)
        assert result.output.endswith("mild all week.")
        history = result.all_messages() if pass_history else None
    return history or []


MODES = {
    "capability, all_messages passed on": (lambda h: h, True),
    "capability, the memory supplies the history": (lambda h: h, False),
    "history processor, all_messages passed on": (ProcessHistory, True),
}


@pytest.mark.parametrize("mode", list(MODES))
async def test_every_request_within_budget_where_keep_last_n_breaks_tool_calls_and_prompt(mode: str) -> None:
    wrap, pass_history = MODES[mode]
    memory = AsyncMemory(model="gpt-4o", max_tokens=2_000, max_output_tokens=300)
    limit = memory.budget - memory.reserved_output
    calls: list[list[ModelMessage]] = []
    history = await run(make_agent(calls, wrap(ConvmemHistory(memory))), pass_history=pass_history)
    sizes = [check_request(memory.counter, as_convmem(call), limit=limit, system=SYSTEM) for call in calls]
    assert len(sizes) == 2 * TURNS
    assert max(sizes) > limit // 2
    stored = await memory.messages()
    in_flight = 1 if wrap is ProcessHistory else 0  # a processor sees the last answer only at the next request
    assert len(stored) == 1 + 5 * TURNS - in_flight  # the system prompt once; user, calls, 2 results, answer
    if pass_history and wrap is not ProcessHistory:
        assert len(history) == 4 * TURNS  # as a capability, the run's own history keeps every request and response

    bare_calls: list[list[ModelMessage]] = []
    await run(make_agent(bare_calls))
    bare = [request_tokens(memory.counter, as_convmem(call)) for call in bare_calls]
    assert max(bare) > 3 * limit

    # The keep-the-last-messages processor of the usual examples: small, and broken.
    last_calls: list[list[ModelMessage]] = []
    await run(make_agent(last_calls, ProcessHistory(lambda messages: messages[-5:])))
    broken = 0
    for call in last_calls:
        try:
            check_request(memory.counter, as_convmem(call), limit=10**9, system=SYSTEM)
        except (AssertionError, ProviderRuleError):
            broken += 1
    assert broken > 0
    print(
        f"\npydantic-ai ({mode}): limit {limit}; "
        f"convmem max {max(sizes)}; no processor max {max(bare)}; "
        f"keep-last-5 broke {broken} of {len(last_calls)} requests (orphaned tool returns or no system prompt)"
    )


async def test_sync_memory_and_unsupported_parts() -> None:
    history = ConvmemHistory(Memory(max_tokens=2_000))
    out = await history(
        [
            ModelRequest(parts=[SystemPromptPart(SYSTEM), UserPromptPart("hi")]),
            ModelResponse(parts=[ThinkingPart("hmm"), ToolCallPart("f", {"a": 1}, "c1")]),
            ModelRequest(parts=[ToolReturnPart("f", {"ok": True}, "c1")]),
        ]
    )
    assert [type(m).__name__ for m in out] == ["ModelRequest", "ModelResponse", "ModelRequest"]
    assert out[1].parts == [ToolCallPart("f", {"a": 1}, "c1")]  # thinking is not resent
    assert isinstance(out[2].parts[0], ToolReturnPart)
    assert out[2].parts[0].tool_name == "f"
    with pytest.raises(InvalidMessageError, match="only text user prompts"):
        await history([*out, ModelResponse(parts=[TextPart("ok")]), ModelRequest(parts=[UserPromptPart(["a", "b"])])])
    assert len(history.memory.messages()) == 4  # the refused batch stored nothing
