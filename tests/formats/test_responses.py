"""Responses API: exact round trips, parallel calls as one Message, reasoning kept, clear errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import InvalidMessageError
from convmem.formats._carry import Note
from convmem.formats.responses import from_responses, to_responses
from convmem.messages import AudioPart, FilePart, ImagePart, Message, TextPart, ToolCall

from .._quick import examples
from ..provider import strict
from ..strategies import conversations, messages, with_unknown_keys, without_unknown_keys

OPTIONS: dict[str, Any] = {
    "kinds": ("text", "image", "file"),  # input messages take no audio
    "names": False,
    "metadata": False,
    "sources": ("url", "data"),
    "sizes": False,
}
_REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}


@st.composite
def item_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid input items with unknown keys, reasoning items and both message spellings."""
    conversation = draw(conversations(max_turns=4, **OPTIONS).filter(lambda ms: all(map(_plain_assistant, ms))))
    items = draw(with_unknown_keys(to_responses(conversation)))
    for item in items:
        if "role" in item and isinstance(item["content"], str) and draw(st.booleans()):
            item["type"] = "message"
        elif "role" in item and item["role"] != "assistant" and draw(st.booleans()):
            item.pop("type", None)
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), dict(_REASONING))
    return items


@settings(max_examples=examples(150), deadline=None)
@given(item_lists())
def test_items_round_trip(items: list[dict[str, Any]]) -> None:
    assert to_responses(from_responses(items)) == without_unknown_keys(items)


def _plain_assistant(m: Message) -> bool:
    """Assistant text parts are sent as an easy message or an output message, which come back as such;
    an image is sent with ``detail`` ("auto" when it had none), which comes back set; the empty text of an
    assistant that calls tools is not sent (see the test below)."""
    parts = m.content if isinstance(m.content, tuple) else ()
    plain = m.role != "assistant" or not isinstance(m.content, tuple)
    empty_beside_calls = m.role == "assistant" and m.content == "" and bool(m.tool_calls)
    return plain and not empty_beside_calls and all(p.detail for p in parts if isinstance(p, ImagePart))


@settings(max_examples=examples(300))
@given(messages(**OPTIONS).filter(_plain_assistant))
def test_message_round_trip(m: Message) -> None:
    assert from_responses(to_responses([m])) == [m]


def test_empty_assistant_text_beside_tool_calls_is_not_sent() -> None:
    calls = (ToolCall(id="c1", name="f", arguments="{}"),)
    items = to_responses([Message(role="assistant", content="", tool_calls=calls)])
    assert [item["type"] for item in items] == ["function_call"]
    assert from_responses(items) == [Message(role="assistant", content=None, tool_calls=calls)]


@settings(max_examples=examples(75), deadline=None)
@given(conversations(max_turns=4, **OPTIONS).filter(lambda ms: all(map(_plain_assistant, ms))))
def test_conversation_round_trip(conversation: list[Message]) -> None:
    assert from_responses(to_responses(conversation)) == conversation


def test_plain_messages_are_easy_messages() -> None:
    assert to_responses([Message(role="user", content="hi")]) == [{"role": "user", "content": "hi"}]
    assert from_responses([{"role": "user", "content": "hi"}]) == [Message(role="user", content="hi")]


def test_parallel_calls_are_one_message() -> None:
    items = [
        {"role": "user", "content": "weather?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "checking"}]},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "w",
            "arguments": '{"city":"a"}',
            "id": "fc_1",
            "status": "completed",
        },
        {"type": "function_call", "call_id": "c2", "name": "w", "arguments": '{"city":"b"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sun"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]},
    ]
    user, assistant, r1, r2 = from_responses(items)
    assert assistant == Message(
        role="assistant",
        content=(TextPart("checking"),),
        tool_calls=(
            ToolCall("c1", "w", '{"city":"a"}', extra={"responses": {"id": "fc_1", "status": "completed"}}),
            ToolCall("c2", "w", '{"city":"b"}'),
        ),
    )
    assert r1 == Message(role="tool", tool_call_id="c1", content="sun")
    assert r2 == Message(role="tool", tool_call_id="c2", content=(TextPart("rain"),))
    # Assistant text is sent as an easy message: input messages take input_text, which is for other roles.
    assert to_responses([user, assistant, r1, r2]) == [
        items[0],
        {"role": "assistant", "content": "checking"},
        *items[2:],
    ]


def test_api_output_message_keeps_its_fields() -> None:
    item = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
    }
    (m,) = from_responses([item])
    assert m.extra == {"responses": {"id": "msg_1", "status": "completed"}}
    assert m.content == (TextPart("hi", extra={"responses": {"annotations": [], "logprobs": []}}),)
    # An output message as the request schema takes it: logprobs are reply-only, annotations are sent empty.
    sent = {**item, "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    assert to_responses([m]) == [sent]


def test_reasoning_items_stay_with_their_run() -> None:
    items = [
        {"role": "user", "content": "q"},
        _REASONING,
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "r"},
        _REASONING,
    ]
    user, call, result, thought = from_responses(items)
    assert call.tool_calls == (ToolCall("c1", "f", "{}"),)
    assert call.extra == {"responses": {"$layout": [_REASONING, "t"]}}
    assert thought == Message(role="assistant", extra={"responses": {"$layout": [_REASONING]}})
    assert to_responses([user, call, result, thought]) == items


def test_parts() -> None:
    item = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
            {"type": "input_image", "file_id": "file-1", "detail": "auto"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
            {"type": "input_file", "file_url": "https://x/a.pdf"},
            {"type": "output_text", "text": "odd but kept"},
        ],
    }
    (m,) = from_responses([item])
    assert m.content == (
        ImagePart(data="AAAA", media_type="image/png", detail="high"),
        FilePart(file_id="file-1", extra={"responses": {"type": "input_image", "detail": "auto"}}),
        FilePart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        FilePart(url="https://x/a.pdf"),
        TextPart("odd but kept", extra={"responses": {"type": "output_text"}}),
    )
    # A user message takes input_text only: the odd output_text is kept in extra and sent as input_text.
    sent = {**item, "content": [*item["content"][:-1], {"type": "input_text", "text": "odd but kept"}]}
    assert to_responses([m]) == [sent]


def test_audio_is_left_out_of_input_messages_with_a_note() -> None:
    (m,) = from_responses(
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}]}]
    )
    assert m.content == (AudioPart("UklG", "wav"),)
    notes: list[Note] = []
    spoken = m.replace(content=(TextPart("listen"), *m.content))
    assert to_responses([spoken], notes=notes) == [
        {"role": "user", "content": [{"type": "input_text", "text": "listen"}]}  # as it came: no "type"
    ]
    assert notes == [Note(0, "an audio part")]


def test_easy_message_with_list_content() -> None:
    item = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    (m,) = from_responses([item])
    assert m.extra == {"responses": {"$absent": ["type"]}}
    assert to_responses([m]) == [item]


def test_text_then_calls_merge_on_the_way_back() -> None:
    """Documented: items cannot tell these two messages from one."""
    text = Message(role="assistant", content="ok")
    calls = Message(role="assistant", tool_calls=(ToolCall("c1", "f"),))
    assert from_responses(to_responses([text, calls])) == [text.replace(tool_calls=calls.tool_calls)]


@pytest.mark.parametrize(
    ("messages", "index", "field"),
    [
        ([Message(role="user", content="a"), Message(role="user", content="b", name="n")], 1, "name"),
        ([Message(role="user", content=(ImagePart(path="/tmp/a.png"),))], 0, "content[0].path"),
        ([Message(role="user", content=(ImagePart(data="AAAA"),))], 0, "content[0].media_type"),
        ([Message(role="user", content=(FilePart(file_id="f", media_type="a/b"),))], 0, "content[0].media_type"),
        (
            [Message(role="assistant", content="a", extra={"responses": {"$layout": ["t"]}})],
            0,
            "extra.responses.$layout",
        ),
        ([Message(role="assistant", content="a", extra={"responses": {"$layout": []}})], 0, "extra.responses.$layout"),
        ([Message(role="user", content="a", extra={"responses": {"$absent": ["type"]}})], 0, "extra.responses.$absent"),
        (
            [Message(role="user", content=(TextPart("a", extra={"responses": {"type": "text"}}),))],
            0,
            "content[0].extra.responses.type",
        ),
        (
            [
                Message(
                    role="user",
                    content=(FilePart(data="A", file_id="f", extra={"responses": {"type": "input_image"}}),),
                )
            ],
            0,
            "content[0].extra.responses.type",
        ),
    ],
)
def test_render_errors(messages: list[Message], index: int, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        to_responses(messages)
    assert (info.value.index, info.value.field) == (index, field)


def test_drop_names() -> None:
    assert to_responses([Message(role="user", content="a", name="n")], drop_names=True) == [
        {"role": "user", "content": "a"}
    ]


_OK = {"role": "user", "content": "ok"}


@pytest.mark.parametrize(
    ("items", "index", "field"),
    [
        ([_OK, {"role": "tool", "content": "x"}], 1, "role"),
        ([_OK, {"content": "x"}], 1, "role"),
        ([_OK, {"type": "video_call", "id": "ws"}], 1, "type"),
        ([_OK, {"type": "compaction", "id": "cmp"}], 1, "encrypted_content"),
        ([_OK, {"type": "computer_call", "id": "cc", "action": {}}], 1, "call_id"),
        ([_OK, {"type": "function_call", "name": "f", "arguments": "{}"}], 1, "call_id"),
        ([_OK, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}], 1, "arguments"),
        ([_OK, {"type": "function_call_output", "output": "x"}], 1, "call_id"),
        ([_OK, {"type": "function_call_output", "call_id": "c"}], 1, "output"),
        ([_OK, {"role": "user", "content": [{"type": "input_video"}]}], 1, "content[0].type"),
        ([_OK, {"role": "user", "content": [{"type": "input_image"}]}], 1, "content[0].file_id"),
        (
            [_OK, {"role": "user", "content": [{"type": "input_image", "image_url": "u", "detail": "x"}]}],
            1,
            "content[0].detail",
        ),
        (
            [_OK, {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]}],
            1,
            "content[0].input_audio.format",
        ),
        ([_OK, {"role": "user", "content": [{"type": "input_file"}]}], 1, "content[0].file"),
        (
            [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c", "name": "g", "arguments": "{}"},
            ],
            0,
            "tool_calls[1].id",
        ),
        ([3], 0, "item"),
    ],
)
def test_parse_errors(items: list[Any], index: int, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_responses(items)
    assert (info.value.index, info.value.field) == (index, field)


_HOSTED = [
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "s", "tools": []},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
    {"id": "msg_old"},  # an item_reference, its type left out
]
_APP_CALLS = [
    (
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "c1",
            "action": {"type": "screenshot"},
            "status": "completed",
            "pending_safety_checks": [],
        },
        {"type": "computer_call_output", "call_id": "c1", "output": {"type": "computer_screenshot", "file_id": "f"}},
    ),
    (
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c2", "name": "sql", "input": "SELECT 1"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "1"},
    ),
    (
        {"type": "mcp_approval_request", "id": "mcpr_1", "name": "f", "arguments": "{}", "server_label": "s"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    ),
    (
        {
            "type": "local_shell_call",
            "id": "ls_1",
            "call_id": "c3",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {"type": "local_shell_call_output", "id": "c3", "output": "a.txt"},
    ),
]


_APP_CALLS += [
    (
        {"type": "shell_call", "call_id": "c4", "action": {"commands": ["ls"]}},
        {"type": "shell_call_output", "call_id": "c4", "output": []},
    ),
    (
        {
            "type": "apply_patch_call",
            "call_id": "c5",
            "status": "completed",
            "operation": {"type": "delete_file", "path": "a"},
        },
        {"type": "apply_patch_call_output", "call_id": "c5", "status": "completed"},
    ),
]


@settings(max_examples=examples(100))
@given(st.lists(st.sampled_from(_HOSTED), max_size=3), st.sampled_from(_APP_CALLS))
def test_hosted_items_and_calls_the_app_answers_round_trip(hosted: list[dict[str, Any]], pair: Any) -> None:
    """The provider's own items join their run in place; a call the app answers is a ToolCall, its output a
    tool Message answering it; the items come back as they went in."""
    call, output = pair
    items = [{"role": "user", "content": "hi"}, *hosted, call, output]
    messages = from_responses(items)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert messages[2].tool_call_id == messages[1].tool_calls[0].id
    assert to_responses(messages) == items


@pytest.mark.parametrize("pair", _APP_CALLS[2:], ids=lambda pair: pair[0]["type"])
def test_a_repaired_call_the_app_answers_is_sent_its_own_output(pair: Any) -> None:
    """``repair()`` answers an open call with placeholder text: it goes out as the output that call takes."""
    from convmem import Memory

    call, _ = pair
    memory = Memory("gpt-5.1", format="responses", max_tokens=10_000)
    memory.add({"role": "user", "content": "hi"})
    memory.add(call)
    (placeholder,) = memory.repair()
    items = memory.context().messages
    strict.responses_items(items)
    answer = items[-1]
    assert answer["type"] == {"mcp_approval_request": "mcp_approval_response"}.get(
        call["type"], call["type"] + "_output"
    )
    assert placeholder.text in json.dumps(answer)
