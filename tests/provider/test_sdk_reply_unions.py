"""Every member of the SDKs' reply content unions goes in through ``add_response``, as the SDK's own object,
and the next request, in every format, is one the SDK's strict types and the provider's rules accept.

The unions are walked (:mod:`.members`): each reply model gets a minimal valid instance, validated by the
SDK's own model, put in a reply where a provider puts it (a server tool's result after its use, an output in
the same reply as its call), and added; a call the application answers is answered. Each union's table of
handled members must equal the SDK's members: a reply member a future SDK adds fails
:func:`test_every_reply_member_is_handled` until it is given a place (and handled).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from convmem import Memory

from .members import members, minimal_model
from .pairs import CALLS, OUTPUTS, answer_key
from .test_sdk_unions import MODELS, U, round_trip, sent_checked

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from anthropic.types import beta as anthropic_beta  # noqa: E402
from openai.types import chat, responses  # noqa: E402

Reply = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # the reply's content or output, what answers it
Place = Callable[[dict[str, Any]], Reply]
_TEXT = {"type": "text", "text": "ok"}
_TOOL = {"type": "function", "name": "f", "parameters": {}, "strict": True}  # a reply's tool, all fields given
_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
}


def _alone(x: dict[str, Any]) -> Reply:
    return [x], []


def _with_text(x: dict[str, Any]) -> Reply:
    return [x, _TEXT], []


def _answered_use(x: dict[str, Any]) -> Reply:
    return [x], [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": x["id"], "content": "ok"}]}]


def _after_use(x: dict[str, Any]) -> Reply:
    use = {"type": "server_tool_use", "id": x["tool_use_id"], "name": "web_search", "input": {}}
    if x["type"] == "mcp_tool_result":
        use = {"type": "mcp_tool_use", "id": x["tool_use_id"], "name": "f", "server_name": "s", "input": {}}
    return [use, x, _TEXT], []


ANTHROPIC_REPLIES: dict[str, Place] = {
    "TextBlock": _alone,
    "ThinkingBlock": _with_text,
    "RedactedThinkingBlock": _with_text,
    "ToolUseBlock": _answered_use,
    "ServerToolUseBlock": _with_text,
    "WebSearchToolResultBlock": _after_use,
    "WebFetchToolResultBlock": _after_use,
    "CodeExecutionToolResultBlock": _after_use,
    "BashCodeExecutionToolResultBlock": _after_use,
    "TextEditorCodeExecutionToolResultBlock": _after_use,
    "ToolSearchToolResultBlock": _after_use,
    "ContainerUploadBlock": _with_text,
}
ANTHROPIC_BETA_REPLIES: dict[str, Place] = {
    **{f"Beta{name}": place for name, place in ANTHROPIC_REPLIES.items()},
    "BetaAdvisorToolResultBlock": _after_use,
    "BetaMCPToolUseBlock": _with_text,
    "BetaMCPToolResultBlock": _after_use,
    "BetaCompactionBlock": lambda x: ([{**x, "content": "the summary"}, _TEXT], []),
    "BetaFallbackBlock": _with_text,
    "BetaMCPToolListingBlock": _with_text,
}


def _kept(x: dict[str, Any]) -> Reply:
    return [x, _MESSAGE], []


def _call(x: dict[str, Any]) -> Reply:
    x = {**x, "arguments": "{}"} if x["type"] == "function_call" else x
    return [x], [OUTPUTS[x["type"]]]


def _output(x: dict[str, Any]) -> Reply:
    return [CALLS[x["type"]], {**x, answer_key(x["type"]): "x"}], []


RESPONSES_REPLIES: dict[str, Place] = {
    "ResponseOutputMessage": _alone,
    "ResponseFileSearchToolCall": _kept,
    "ResponseFunctionToolCall": _call,
    "ResponseFunctionToolCallOutputItem": _output,
    "ResponseFunctionWebSearch": _kept,
    "ResponseComputerToolCall": _call,
    "ResponseComputerToolCallOutputItem": _output,
    "ResponseReasoningItem": _kept,
    "Program": _kept,
    "ProgramOutput": _kept,
    "ResponseToolSearchCall": _kept,
    "ResponseToolSearchOutputItem": lambda x: _kept({**x, "tools": [_TOOL]}),
    "AdditionalTools": lambda x: _kept({**x, "role": "developer", "tools": [_TOOL]}),  # as a reply holds them
    "ResponseCompactionItem": lambda x: ([x, _MESSAGE], []),
    "ImageGenerationCall": lambda x: _kept({**x, "result": "aW1n"}),
    "ResponseCodeInterpreterToolCall": lambda x: _kept({**x, "code": "1", "outputs": []}),
    "LocalShellCall": _call,
    "LocalShellCallOutput": _output,
    "ResponseFunctionShellToolCall": _call,
    "ResponseFunctionShellToolCallOutput": _output,
    "ResponseApplyPatchToolCall": _call,
    "ResponseApplyPatchToolCallOutput": _output,
    "McpCall": _kept,
    "McpListTools": _kept,
    "McpApprovalRequest": _call,
    "McpApprovalResponse": _output,
    "ResponseCustomToolCall": _call,
    "ResponseCustomToolCallOutputItem": _output,
}
CHAT_REPLY_CALLS: dict[str, Place] = {
    "ChatCompletionMessageFunctionToolCall": lambda x: (
        [{**x, "function": {"name": "f", "arguments": "{}"}}],
        [{"role": "tool", "tool_call_id": x["id"], "content": "ok"}],
    ),
    "ChatCompletionMessageCustomToolCall": lambda x: (
        [x],
        [{"role": "tool", "tool_call_id": x["id"], "content": "ok"}],
    ),
}


def _anthropic(content: list[dict[str, Any]], model: Any) -> Any:
    reply = {
        "id": "msg_r",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return model.model_validate(reply)


def _responses(output: list[dict[str, Any]], model: Any) -> Any:
    reply = {
        "id": "resp_r",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }
    return model.model_validate(reply)


def _chat(calls: list[dict[str, Any]], model: Any) -> Any:
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    reply = {
        "id": "chatcmpl-r",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return model.model_validate(reply)


# format, the union's name, the union, where each member goes, the reply builder, its model, the strict type
REPLY_UNIONS: list[tuple[str, str, Any, dict[str, Place], Callable[..., Any], Any, Any]] = [
    (
        "anthropic",
        "anthropic reply blocks",
        anthropic.types.ContentBlock,
        ANTHROPIC_REPLIES,
        _anthropic,
        anthropic.types.Message,
        anthropic.types.MessageParam,
    ),
    (
        "anthropic",
        "anthropic beta reply blocks",
        anthropic_beta.BetaContentBlock,
        ANTHROPIC_BETA_REPLIES,
        _anthropic,
        anthropic_beta.BetaMessage,
        anthropic_beta.BetaMessageParam,
    ),
    (
        "responses",
        "responses output items",
        responses.ResponseOutputItem,
        RESPONSES_REPLIES,
        _responses,
        responses.Response,
        None,
    ),
    (
        "openai",
        "chat reply tool calls",
        chat.chat_completion_message_tool_call.ChatCompletionMessageToolCallUnion,
        CHAT_REPLY_CALLS,
        _chat,
        chat.ChatCompletion,
        None,
    ),
]


@pytest.mark.parametrize(("label", "union", "table"), [pytest.param(u[1], u[2], u[3], id=u[1]) for u in REPLY_UNIONS])
def test_every_reply_member_is_handled(label: str, union: Any, table: dict[str, Place]) -> None:
    assert {m.__name__ for m in members(union, models=True)} == set(table), f"{label}: a member is new (or gone)"


def _cases() -> list[Any]:
    out = []
    for fmt, label, union, table, reply, model, message_type in REPLY_UNIONS:
        for member in members(union, models=True):
            if member.__name__ in table:
                instance = minimal_model(member)
                member.model_validate(instance)  # the SDK's own model takes it
                out.append(
                    pytest.param(
                        fmt,
                        table[member.__name__],
                        instance,
                        reply,
                        model,
                        message_type,
                        id=f"{label}:{member.__name__}",
                    )
                )
    return out


@pytest.mark.parametrize(("fmt", "place", "instance", "reply", "model", "message_type"), _cases())
def test_every_reply_member_goes_back(
    fmt: str, place: Place, instance: dict[str, Any], reply: Callable[..., Any], model: Any, message_type: Any
) -> None:
    memory = Memory(MODELS[fmt], format=fmt, max_tokens=100_000)
    memory.add(U)
    content, answers = place(json.loads(json.dumps(instance)))
    added = memory.add_response(reply(content, model))  # the SDK object itself
    assert added
    if answers:
        memory.add_many(answers)
    memory.add({"role": "user", "content": "and then?"})
    ctx = sent_checked(fmt, memory, message_type)
    reopened = round_trip(memory)
    assert json.dumps(sent_checked(fmt, reopened, message_type).messages) == json.dumps(ctx.messages)
    for other in MODELS:
        if other != fmt:
            sent_checked(other, memory)
