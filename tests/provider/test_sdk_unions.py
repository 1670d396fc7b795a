"""Every member of the installed SDKs' content unions is accepted, stored, exported and imported losslessly,
and sent back in its own format as a request the SDK's own (strict) types and the provider's rules accept.

The unions are walked, not listed (:mod:`.members`): for each member a minimal valid instance is built from
its type, put where a conversation holds it (a result after its call, a server tool's result with its use),
added (``add_many``; a reply member through ``add_response``), and then: the session's export, imported
into another store, exports byte for byte the same; the memory reopened from it renders the same request;
that request passes the strict SDK types and the provider rules; and an object kept verbatim is in it
verbatim. Each union's table of handled members must equal the members the SDK has: a member a future SDK
adds fails :func:`test_every_member_is_handled` until it is given a place here (and handled).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args, get_origin

import pytest

from convmem import Memory
from convmem.stores import MemoryStore

from . import rules, strict
from .members import _alternatives, _unwrap, members, minimal
from .pairs import CALLS, OUTPUTS, answer_key
from .strict import _hints

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from anthropic.types import beta as anthropic_beta  # noqa: E402
from openai.types import chat, responses  # noqa: E402

Batches = list[list[Any]]
Build = Callable[[dict[str, Any]], Batches]
MODELS = {"openai": "gpt-4o", "responses": "gpt-4o", "anthropic": "claude-sonnet-4-6"}
U = {"role": "user", "content": "hi"}
OK = {"role": "assistant", "content": "ok"}


def element_union(td: Any, key: str) -> Any:
    """The union of the elements of the list ``td[key]`` holds."""
    for alternative in _alternatives(_hints(td)[key]):
        args = get_args(_unwrap(alternative))
        if get_origin(_unwrap(alternative)) is not None and args and not isinstance(args[0], str):
            return args[0]
    raise AssertionError(f"{td.__name__}.{key} holds no list")


# --- Chat Completions ----------------------------------------------------------------------------------------
def _chat_call(call_id: str = "x") -> dict[str, Any]:
    function = {"name": "f", "arguments": "{}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


CHAT_MESSAGES: dict[str, Build] = {
    "ChatCompletionDeveloperMessageParam": lambda x: [[x, U]],
    "ChatCompletionSystemMessageParam": lambda x: [[x, U]],
    "ChatCompletionUserMessageParam": lambda x: [[x]],
    "ChatCompletionAssistantMessageParam": lambda x: [[U], [x]],
    "ChatCompletionToolMessageParam": lambda x: [[U], [_chat_call()], [x]],
    "ChatCompletionFunctionMessageParam": lambda x: [
        [U],
        [{"role": "assistant", "content": None, "function_call": {"name": "x", "arguments": "{}"}}],
        [x],
    ],
}
CHAT_USER_PARTS: dict[str, Build] = {
    "ChatCompletionContentPartTextParam": lambda x: [[{"role": "user", "content": [x]}]],
    "ChatCompletionContentPartImageParam": lambda x: [[{"role": "user", "content": [x]}]],
    "ChatCompletionContentPartInputAudioParam": lambda x: [[{"role": "user", "content": [x]}]],
    "File": lambda x: [[{"role": "user", "content": [{**x, "file": {"file_id": "file-1"}}]}]],
}
CHAT_ASSISTANT_PARTS: dict[str, Build] = {
    "ChatCompletionContentPartTextParam": lambda x: [[U], [{"role": "assistant", "content": [x]}]],
    "ChatCompletionContentPartRefusalParam": lambda x: [[U], [{"role": "assistant", "content": [x]}]],
}
CHAT_CALLS: dict[str, Build] = {
    "ChatCompletionMessageFunctionToolCallParam": lambda x: [
        [U],
        [{"role": "assistant", "tool_calls": [{**x, "function": {"name": "f", "arguments": "{}"}}]}],
        [{"role": "tool", "tool_call_id": x["id"], "content": "ok"}],
    ],
    "ChatCompletionMessageCustomToolCallParam": lambda x: [
        [U],
        [{"role": "assistant", "tool_calls": [x]}],
        [{"role": "tool", "tool_call_id": x["id"], "content": "ok"}],
    ],
}

# --- Responses -----------------------------------------------------------------------------------------------


def _call(x: dict[str, Any]) -> Batches:
    x = {**x, "arguments": "{}"} if x["type"] == "function_call" else x
    return [[U], [x], [OUTPUTS[x["type"]]]]


def _output(x: dict[str, Any]) -> Batches:
    return [[U], [CALLS[x["type"]]], [{**x, answer_key(x["type"]): "x"}]]


def _kept(x: dict[str, Any]) -> Batches:
    return [
        [U],
        [
            x,
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            },
        ],
    ]


RESPONSES_ITEMS: dict[str, Build] = {
    "EasyInputMessageParam": lambda x: [[x]],
    "Message": lambda x: [[x]],
    "ResponseOutputMessageParam": lambda x: [[U], [x]],
    "ResponseFileSearchToolCallParam": _kept,
    "ResponseComputerToolCallParam": _call,
    "ComputerCallOutput": _output,
    "ResponseFunctionWebSearchParam": _kept,
    "ResponseFunctionToolCallParam": _call,
    "FunctionCallOutput": _output,
    "ToolSearchCall": _kept,
    "ResponseToolSearchOutputItemParamParam": _kept,
    "AdditionalTools": _kept,
    "ResponseConfigurationUpdateItemParamParam": _kept,
    "ResponseReasoningItemParam": _kept,
    "ResponseCompactionItemParamParam": lambda x: [[U], [x], [{"role": "user", "content": "again"}]],
    "ImageGenerationCall": _kept,
    "ResponseCodeInterpreterToolCallParam": _kept,
    "LocalShellCall": _call,
    "LocalShellCallOutput": _output,
    "ShellCall": _call,
    "ShellCallOutput": _output,
    "ApplyPatchCall": _call,
    "ApplyPatchCallOutput": _output,
    "McpListTools": _kept,
    "McpApprovalRequest": _call,
    "McpApprovalResponse": _output,
    "McpCall": _kept,
    "ResponseCustomToolCallOutputParam": _output,
    "ResponseCustomToolCallParam": _call,
    "CompactionTrigger": lambda x: [[U], [x]],
    "ItemReference": _kept,
    "Program": _kept,
    "ProgramOutput": _kept,
}
RESPONSES_INPUT_PARTS: dict[str, Build] = {
    "ResponseInputTextParam": lambda x: [[{"type": "message", "role": "user", "content": [x]}]],
    "ResponseInputImageParam": lambda x: [
        [{"type": "message", "role": "user", "content": [{**x, "image_url": "https://x.example/a.png"}]}]
    ],
    "ResponseInputFileParam": lambda x: [
        [{"type": "message", "role": "user", "content": [{**x, "file_id": "file-1"}]}]
    ],
}
RESPONSES_OUTPUT_PARTS: dict[str, Build] = {
    "ResponseOutputTextParam": lambda x: [
        [U],
        [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [x]}],
    ],
    "ResponseOutputRefusalParam": lambda x: [
        [U],
        [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [x]}],
    ],
}
RESPONSES_OUTPUTS: dict[str, Build] = {  # what a function_call_output's output list holds
    name: (
        lambda x, _n=name: [
            [U],
            [CALLS["function_call_output"]],
            [
                {
                    "type": "function_call_output",
                    "call_id": "x",
                    "output": [
                        {**x, "file_id": "file-1"}
                        if x["type"] == "input_file"
                        else ({**x, "image_url": "https://x.example/a.png"} if x["type"] == "input_image" else x)
                    ],
                }
            ],
        ]
    )
    for name in ("ResponseInputTextContentParam", "ResponseInputImageContentParam", "ResponseInputFileContentParam")
}


# --- Anthropic -----------------------------------------------------------------------------------------------
def _user_block(x: dict[str, Any]) -> Batches:
    return [[{"role": "user", "content": [x]}]]


def _assistant_block(x: dict[str, Any]) -> Batches:
    return [[U], [{"role": "assistant", "content": [x, {"type": "text", "text": "ok"}]}]]


def _server_result(x: dict[str, Any]) -> Batches:
    use = {"type": "server_tool_use", "id": x["tool_use_id"], "name": "web_search", "input": {}}
    if x["type"] == "mcp_tool_result":
        use = {"type": "mcp_tool_use", "id": x["tool_use_id"], "name": "f", "server_name": "s", "input": {}}
    return [[U], [{"role": "assistant", "content": [use, x, {"type": "text", "text": "ok"}]}]]


def _tool_use(x: dict[str, Any]) -> Batches:
    return [
        [U],
        [{"role": "assistant", "content": [x]}],
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": x["id"], "content": "ok"}]}],
    ]


def _tool_result(x: dict[str, Any]) -> Batches:
    use = {"type": "tool_use", "id": x["tool_use_id"], "name": "f", "input": {}}
    return [[U], [{"role": "assistant", "content": [use]}], [{"role": "user", "content": [x]}]]


def _in_result(x: dict[str, Any]) -> Batches:
    return _tool_result({"type": "tool_result", "tool_use_id": "t1", "content": [x]})


def _thinking(x: dict[str, Any]) -> Batches:
    return [[U], [{"role": "assistant", "content": [x, {"type": "text", "text": "ok"}]}]]


ANTHROPIC_BLOCKS: dict[str, Build] = {
    "TextBlockParam": _user_block,
    "ImageBlockParam": _user_block,
    "DocumentBlockParam": _user_block,
    "SearchResultBlockParam": _user_block,
    "ThinkingBlockParam": _thinking,
    "RedactedThinkingBlockParam": _thinking,
    "ToolUseBlockParam": _tool_use,
    "ToolResultBlockParam": _tool_result,
    "ServerToolUseBlockParam": _assistant_block,
    "WebSearchToolResultBlockParam": _server_result,
    "WebFetchToolResultBlockParam": _server_result,
    "CodeExecutionToolResultBlockParam": _server_result,
    "BashCodeExecutionToolResultBlockParam": _server_result,
    "TextEditorCodeExecutionToolResultBlockParam": _server_result,
    "ToolSearchToolResultBlockParam": _server_result,
    "ContainerUploadBlockParam": _user_block,
}
ANTHROPIC_BETA_BLOCKS: dict[str, Build] = {
    **{f"Beta{name}": build for name, build in ANTHROPIC_BLOCKS.items() if name != "DocumentBlockParam"},
    "BetaRequestDocumentBlockParam": _user_block,
    "BetaAdvisorToolResultBlockParam": _server_result,
    "BetaMCPToolUseBlockParam": _assistant_block,
    "BetaRequestMCPToolResultBlockParam": _server_result,
    "BetaCompactionBlockParam": lambda x: [
        [U],
        [{"role": "assistant", "content": [{**x, "content": "the summary"}, {"type": "text", "text": "ok"}]}],
    ],
    "BetaRequestToolAdditionBlockParam": _assistant_block,
    "BetaRequestToolRemovalBlockParam": _assistant_block,
    "BetaMCPToolListingBlockParam": _assistant_block,
    "BetaFallbackBlockParam": _assistant_block,
}
ANTHROPIC_MESSAGES: dict[str, Build] = {
    "UserMessageParam": lambda x: [[x]],
    "AssistantMessageParam": lambda x: [[U], [x]],
    "SystemMessageParam": lambda x: [[x, U]],
}
ANTHROPIC_DOCUMENT_SOURCES: dict[str, Build] = {
    name: (lambda x: _user_block({"type": "document", "source": x}))
    for name in (
        "Base64PDFSourceParam",
        "PlainTextSourceParam",
        "ContentBlockSourceParam",
        "URLPDFSourceParam",
        "FileDocumentSourceParam",
    )
}
ANTHROPIC_RESULT_CONTENT: dict[str, Build] = dict.fromkeys(
    (
        "TextBlockParam",
        "ImageBlockParam",
        "SearchResultBlockParam",
        "DocumentBlockParam",
        "ToolReferenceBlockParam",
        "BrowserStateBlockParam",
    ),
    _in_result,
)

# format, the union's name, the union, the builders of its handled members, the strict type of a message
REQUEST_UNIONS: list[tuple[str, str, Any, dict[str, Build], Any]] = [
    ("openai", "chat messages", chat.ChatCompletionMessageParam, CHAT_MESSAGES, None),
    ("openai", "chat user parts", chat.ChatCompletionContentPartParam, CHAT_USER_PARTS, None),
    (
        "openai",
        "chat assistant parts",
        element_union(chat.ChatCompletionAssistantMessageParam, "content"),
        CHAT_ASSISTANT_PARTS,
        None,
    ),
    ("openai", "chat tool calls", chat.ChatCompletionMessageToolCallUnionParam, CHAT_CALLS, None),
    ("responses", "responses items", responses.ResponseInputItemParam, RESPONSES_ITEMS, None),
    ("responses", "responses input parts", responses.ResponseInputContentParam, RESPONSES_INPUT_PARTS, None),
    (
        "responses",
        "responses output parts",
        element_union(responses.ResponseOutputMessageParam, "content"),
        RESPONSES_OUTPUT_PARTS,
        None,
    ),
    (
        "responses",
        "responses call outputs",
        element_union(responses.response_input_item_param.FunctionCallOutput, "output"),
        RESPONSES_OUTPUTS,
        None,
    ),
    (
        "anthropic",
        "anthropic blocks",
        anthropic.types.ContentBlockParam,
        ANTHROPIC_BLOCKS,
        anthropic.types.MessageParam,
    ),
    (
        "anthropic",
        "anthropic beta blocks",
        anthropic_beta.BetaContentBlockParam,
        ANTHROPIC_BETA_BLOCKS,
        anthropic_beta.BetaMessageParam,
    ),
    ("anthropic", "anthropic messages", anthropic.types.MessageParam, ANTHROPIC_MESSAGES, anthropic.types.MessageParam),
    (
        "anthropic",
        "anthropic document sources",
        _hints(anthropic.types.DocumentBlockParam)["source"],
        ANTHROPIC_DOCUMENT_SOURCES,
        anthropic.types.MessageParam,
    ),
    (
        "anthropic",
        "anthropic tool result content",
        element_union(anthropic.types.ToolResultBlockParam, "content"),
        ANTHROPIC_RESULT_CONTENT,
        anthropic.types.MessageParam,
    ),
]


def _cases() -> list[Any]:
    return [
        pytest.param(fmt, build, minimal(member), message_type, id=f"{label}:{member.__name__}")
        for fmt, label, union, table, message_type in REQUEST_UNIONS
        for member in members(union)
        if (build := table.get(member.__name__)) is not None
    ]


@pytest.mark.parametrize(
    ("label", "union", "table"),
    [pytest.param(label, union, table, id=label) for _, label, union, table, _ in REQUEST_UNIONS],
)
def test_every_member_is_handled(label: str, union: Any, table: dict[str, Build]) -> None:
    assert {m.__name__ for m in members(union)} == set(table), f"{label}: a member is new (or gone); give it a place"


def _contains(value: Any, wanted: Any) -> bool:
    """True when ``wanted`` is ``value`` or a sub-object of it, compared as JSON."""
    target = json.dumps(wanted, sort_keys=True)
    stack = [value]
    while stack:
        item = stack.pop()
        if json.dumps(item, sort_keys=True) == target:
            return True
        if isinstance(item, dict):
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
    return False


def sent_checked(fmt: str, memory: Memory, message_type: Any = None) -> Any:
    """The memory's next request in ``fmt``, checked against the SDK's strict types and the provider's rules."""
    ctx = memory.context(format=fmt)
    if fmt == "openai":
        strict.chat_messages(ctx.messages)
    elif fmt == "responses":
        strict.responses_items(ctx.messages)
    else:
        strict.anthropic_system(ctx.system)
        for i, m in enumerate(ctx.messages):
            strict.check(message_type or anthropic.types.MessageParam, m, f"messages[{i}]")
    rules.check(fmt, ctx.messages)
    return ctx


def round_trip(memory: Memory) -> Memory:
    """The memory reopened from another store its session was exported to; both exports are the same bytes."""
    data = memory.store.export_jsonl(memory.session_id)
    other = MemoryStore()
    other.import_jsonl(data)
    assert other.export_jsonl(memory.session_id) == data
    return Memory.open(memory.session_id, store=other)


@pytest.mark.parametrize(("fmt", "build", "instance", "message_type"), _cases())
def test_every_request_member_is_accepted_kept_and_sent_back(
    fmt: str, build: Build, instance: dict[str, Any], message_type: Any
) -> None:
    memory = Memory(MODELS[fmt], format=fmt, max_tokens=100_000)
    batches = build(json.loads(json.dumps(instance)))
    for batch in batches:
        memory.add_many(batch)
    ctx = sent_checked(fmt, memory, message_type)
    reopened = round_trip(memory)
    assert json.dumps(sent_checked(fmt, reopened, message_type).messages) == json.dumps(ctx.messages)
    assert reopened.messages() == memory.messages()
    if _kept_verbatim(instance):
        assert _contains([ctx.system, ctx.messages], instance), "a kept object is sent back verbatim"
    for other in MODELS:  # another format: what it cannot carry is left out (and said), never sent as is
        if other != fmt:
            elsewhere = sent_checked(other, memory)
            if _kept_verbatim(instance):
                assert not _contains([elsewhere.system, elsewhere.messages], instance)
                assert any(entry.reason == "not_carried" for entry in elsewhere.left_out) or _faithful(instance)


def _faithful(instance: dict[str, Any]) -> bool:
    from convmem.formats._native import faithful_text

    return faithful_text(instance) is not None


def _kept_verbatim(instance: dict[str, Any]) -> bool:
    """Objects convmem keeps verbatim (its own fields are spelled by the renderer, in the API's canonical form)."""
    from convmem.formats._native import ANTHROPIC_KEPT, RESPONSES_CALLS, RESPONSES_KEPT, RESPONSES_OUTPUTS

    kind = instance.get("type")
    if kind in ("thinking", "redacted_thinking", "compaction", "compaction_trigger", "document", "item_reference"):
        return False  # trimmed to the request's keys, adopted as the summary, sent last, a FilePart, typed
    return kind in ANTHROPIC_KEPT | RESPONSES_KEPT | set(RESPONSES_CALLS) | set(RESPONSES_OUTPUTS)
