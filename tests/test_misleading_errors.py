"""Errors and figures that used to mislead a newcomer (issue 19).

* a content of the wrong type names both allowed types, in every format and field that holds content;
* an SDK message object (a pydantic model) is accepted, and what it renders back holds only request fields;
* anything else says what is accepted;
* a message cut to fit the budget is reported in ``stats().warnings``, not only ``ctx.warnings``;
* ``stats().context_tokens`` is what ``context().tokens`` reports for the same state.
"""

from __future__ import annotations

import asyncio
from typing import Any, get_type_hints

import pytest
from pydantic import BaseModel

from convmem import AsyncMemory, Memory
from convmem.errors import InvalidMessageError
from convmem.formats import parse_messages

openai_types = pytest.importorskip("openai.types.chat")
from openai.types.chat import ChatCompletion  # noqa: E402
from openai.types.chat.chat_completion_assistant_message_param import (  # noqa: E402
    ChatCompletionAssistantMessageParam,
)
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage  # noqa: E402

ASSISTANT_PARAM_KEYS = set(get_type_hints(ChatCompletionAssistantMessageParam))


# -- content of the wrong type --------------------------------------------------------------
_BAD_CONTENT = [42, 3.5, True, {"text": "hi"}]


@pytest.mark.parametrize("value", _BAD_CONTENT)
@pytest.mark.parametrize(
    ("format", "item"),
    [
        ("openai", lambda v: {"role": "user", "content": v}),
        ("openai", lambda v: {"role": "tool", "tool_call_id": "c1", "content": v}),
        ("anthropic", lambda v: {"role": "user", "content": v}),
        (
            "anthropic",
            lambda v: {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": v}]},
        ),
        ("responses", lambda v: {"type": "message", "role": "user", "content": v}),
        ("responses", lambda v: {"type": "function_call_output", "call_id": "c", "output": v}),
    ],
)
def test_content_of_the_wrong_type_says_a_string_or_a_list_is_allowed(format: str, item: Any, value: object) -> None:
    prefix: list[dict[str, Any]] = []
    if format == "openai" and item(0)["role"] == "tool":
        prefix = [
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            }
        ]
    with pytest.raises(
        InvalidMessageError, match=f"must be a string or a list of content parts, got {type(value).__name__}"
    ):
        parse_messages([*prefix, item(value)], format=format)  # type: ignore[arg-type]


def test_memory_add_with_numeric_content_names_both_types() -> None:
    memory = Memory("gpt-4o")
    with pytest.raises(InvalidMessageError) as info:
        memory.add({"role": "user", "content": 42})
    assert info.value.field == "content"
    assert "a string or a list" in str(info.value)
    assert memory.messages() == []


# -- SDK objects ----------------------------------------------------------------------------
def _completion(message: dict[str, Any]) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        }
    )


_TEXT = {"role": "assistant", "content": "Hello!", "refusal": None, "annotations": []}
_CALLS = {
    "role": "assistant",
    "content": None,
    "annotations": [],
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}],
}


@pytest.mark.parametrize("raw", [_TEXT, _CALLS], ids=["text", "tool_calls"])
def test_an_openai_sdk_message_object_is_accepted_and_renders_request_fields_only(raw: dict[str, Any]) -> None:
    sdk_message = _completion(raw).choices[0].message
    memory = Memory("gpt-4o")
    memory.add({"role": "user", "content": "hi"})
    stored = memory.add(sdk_message)
    assert stored.role == "assistant"
    if raw is _CALLS:
        assert [c.id for c in stored.tool_calls] == ["call_1"]
        memory.add({"role": "tool", "tool_call_id": "call_1", "content": "42"})
    rendered = memory.context().messages[1]
    assert set(rendered) <= ASSISTANT_PARAM_KEYS, set(rendered) - ASSISTANT_PARAM_KEYS
    assert "annotations" not in rendered


def test_sdk_objects_in_a_batch_and_in_the_async_twin() -> None:
    sdk_message = _completion(_TEXT).choices[0].message

    async def run() -> list[dict[str, Any]]:
        memory = AsyncMemory("gpt-4o")
        await memory.add_many([{"role": "user", "content": "hi"}, sdk_message])
        return (await memory.context()).messages

    assert asyncio.run(run())[1] == {"role": "assistant", "content": "Hello!"}
    assert parse_messages([{"role": "user", "content": "hi"}, sdk_message])[1].text == "Hello!"


def test_responses_output_items_are_accepted() -> None:
    message = ResponseOutputMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        }
    )
    call = ResponseFunctionToolCall.model_validate(
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1", "status": "completed"}
    )
    memory = Memory("gpt-4o", format="responses")
    memory.add_many([{"role": "user", "content": "hi"}, message])
    memory.add(call)
    memory.add({"type": "function_call_output", "call_id": "c1", "output": "ok"})
    items = memory.context().messages
    assert [i.get("type", "message") for i in items] == ["message", "message", "function_call", "function_call_output"]
    assert all("async_" not in item for item in items)


class _AnthropicText(BaseModel):
    type: str = "text"
    text: str


class _AnthropicUsage(BaseModel):
    input_tokens: int
    output_tokens: int


class _AnthropicMessage(BaseModel):
    """The shape of ``anthropic.types.Message`` (the SDK is not a dependency of the tests)."""

    id: str
    type: str = "message"
    role: str = "assistant"
    content: list[_AnthropicText]
    model: str
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: _AnthropicUsage


def test_an_anthropic_response_object_keeps_only_role_and_content() -> None:
    reply = _AnthropicMessage(
        id="msg_1",
        content=[_AnthropicText(text="Hi there")],
        model="claude-sonnet-4-5",
        stop_reason="end_turn",
        usage=_AnthropicUsage(input_tokens=5, output_tokens=3),
    )
    memory = Memory("claude-sonnet-4-5", format="anthropic", cache_breakpoints=False)  # the shape, not the marks
    memory.add({"role": "user", "content": "hello"})
    memory.add(reply)
    assert memory.context().messages[1] == {"role": "assistant", "content": [{"type": "text", "text": "Hi there"}]}


@pytest.mark.parametrize("value", [42, "just a string in a list", object(), None])
def test_something_that_is_no_message_says_what_is_accepted(value: object) -> None:
    memory = Memory("gpt-4o")
    with pytest.raises(InvalidMessageError, match="a dict, a Message or an SDK message object"):
        memory.add_many([value])  # type: ignore[list-item]


# -- warnings and figures -------------------------------------------------------------------
@pytest.mark.parametrize("format", ["openai", "anthropic", "responses"])
def test_a_system_prompt_cut_to_fit_is_in_the_stats_warnings(format: str) -> None:
    memory = Memory("gpt-4o", max_tokens=80, max_output_tokens=10, format=format)
    memory.add({"role": "system", "content": "You are a careful assistant. " * 30})
    memory.add({"role": "user", "content": "hi"})
    ctx = memory.context()
    assert ctx.truncated
    assert ctx.warnings
    assert "system message seq 0" in ctx.warnings[0]
    assert memory.stats().warnings == ctx.warnings
    memory.context()
    assert memory.stats().warnings == ctx.warnings  # reported once, not once per turn


def test_a_cut_reported_by_the_async_twin_too() -> None:
    async def run() -> tuple[tuple[str, ...], tuple[str, ...]]:
        memory = AsyncMemory("gpt-4o", max_tokens=80, max_output_tokens=10)
        await memory.add({"role": "system", "content": "You are a careful assistant. " * 30})
        ctx = await memory.context()
        return ctx.warnings, memory.stats().warnings

    warnings, stats_warnings = asyncio.run(run())
    assert warnings
    assert stats_warnings == warnings


def _scenarios() -> dict[str, list[dict[str, Any]]]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {
        "plain": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi!"}],
        "pending_tool_call": [{"role": "user", "content": "look"}, {"role": "assistant", "tool_calls": [call]}],
        "answered_tool_call": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
        "long": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40} for i in range(60)],
        "oversized_system": [{"role": "system", "content": "rules " * 600}, {"role": "user", "content": "go"}],
    }


@pytest.mark.parametrize("strategy", ["token_budget", "summary_buffer"])
@pytest.mark.parametrize("format", ["openai", "anthropic", "responses"])
@pytest.mark.parametrize("scenario", sorted(_scenarios()))
def test_stats_context_tokens_is_what_context_reports(scenario: str, format: str, strategy: str) -> None:
    memory = Memory("gpt-4o", max_tokens=1_500, max_output_tokens=200, format=format, strategy=strategy)
    for message in _scenarios()[scenario]:
        memory.add(message)
        assert memory.stats().context_tokens == memory.context().tokens


@pytest.mark.parametrize("format", ["openai", "anthropic", "responses"])
def test_names_never_stop_a_memory_context_and_the_renderer_hint_can_be_followed(format: str) -> None:
    from convmem.formats import as_message
    from convmem.formats.anthropic._render import to_anthropic

    memory = Memory("gpt-4o", max_tokens=2000)
    memory.add({"role": "user", "content": "hi", "name": "alice"})
    ctx = memory.context(format=format)  # Anthropic and Responses have no name field: it is left out, not refused
    assert ("name" in ctx.messages[-1]) is (format == "openai")
    named = [as_message({"role": "user", "content": "hi", "name": "alice"})]
    with pytest.raises(InvalidMessageError, match="pass drop_names=True"):
        to_anthropic(named)
    assert to_anthropic(named, drop_names=True).messages[0]["role"] == "user"  # the hint works as printed
