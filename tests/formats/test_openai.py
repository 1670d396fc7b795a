"""OpenAI Chat Completions: exact round trips both ways, extras kept verbatim, clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import InvalidMessageError
from convmem.formats.openai import from_openai, from_openai_messages, moved_images, to_openai, to_openai_messages
from convmem.messages import AudioPart, FilePart, ImagePart, Message, TextPart, ToolCall

from .._quick import examples
from ..strategies import messages, with_unknown_keys, without_unknown_keys

# Everything Chat Completions can express exactly: no local paths, no file URLs, no
# sizes or metadata (never rendered).
# A tool result's images travel in a user message of their own (tested apart), and an assistant message
# with neither content nor calls is sent with "content": "".
expressible = messages(sources=("url", "data"), sizes=False, file_sources=("data", "file_id"), metadata=False).filter(
    lambda m: not moved_images(m) and not (m.role == "assistant" and m.content is None and not m.tool_calls)
)


def _variants(d: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """Null/empty spellings a real dict may use for fields the Message leaves empty."""
    if d["role"] == "assistant" and "content" not in d and draw(st.booleans()):
        d["content"] = None
    if d["role"] == "assistant" and "tool_calls" not in d and draw(st.booleans()):
        d["tool_calls"] = draw(st.sampled_from([None, []]))
    if "name" not in d and draw(st.booleans()):
        d["name"] = None
    return d


@st.composite
def openai_dicts(draw: st.DrawFn) -> dict[str, Any]:
    d = to_openai(draw(expressible))
    return _variants(draw(with_unknown_keys(d)), draw)


@settings(max_examples=examples(300))
@given(expressible)
def test_message_round_trip(m: Message) -> None:
    assert from_openai(to_openai(m)) == m


@settings(max_examples=examples(300))
@given(openai_dicts())
def test_dict_round_trip(d: dict[str, Any]) -> None:
    assert to_openai(from_openai(d)) == _sent(d)


def _sent(d: dict[str, Any]) -> dict[str, Any]:
    """What a request carries of ``d``: no unknown keys, no null name, no empty tool_calls."""
    out = without_unknown_keys(d)
    if out.get("name", "") is None:
        del out["name"]
    if not out.get("tool_calls", True):
        del out["tool_calls"]
    if out["role"] == "assistant" and out.get("content") is None and "tool_calls" not in out:
        out["content"] = ""
    return out


@settings(max_examples=examples(50))
@given(st.lists(openai_dicts(), max_size=5))
def test_list_round_trip(items: list[dict[str, Any]]) -> None:
    assert to_openai_messages(from_openai_messages(items)) == [_sent(d) for d in items]


def test_plain_message_fast_path() -> None:
    m = from_openai({"role": "user", "content": "hi"})
    assert m == Message(role="user", content="hi")
    assert not m.extra
    assert to_openai(m) == {"role": "user", "content": "hi"}


def test_api_response_message_keeps_its_nulls() -> None:
    d = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    m = from_openai(d)
    assert m.content is None
    assert m.tool_calls == (ToolCall("c1", "f", '{"a": 1}'),)
    assert m.extra == {
        "openai": {"content": None, "refusal": None, "annotations": [], "audio": None, "function_call": None}
    }
    # Kept for export, never sent: the request schema refuses annotations, and nulls say nothing.
    assert to_openai(m) == {"role": "assistant", "content": None, "tool_calls": d["tool_calls"]}


def test_single_text_part_list_stays_a_list() -> None:
    d = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    m = from_openai(d)
    assert m.content == (TextPart("hi"),)
    assert to_openai(m) == d


def test_data_url_becomes_data_and_media_type() -> None:
    d = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}],
    }
    m = from_openai(d)
    assert m.content == (ImagePart(data="AAAA", media_type="image/png", detail="low"),)
    assert to_openai(m) == d


def test_plain_url_stays_url() -> None:
    m = from_openai({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]})
    assert m.content == (ImagePart(url="https://x/a.png"),)


def test_audio_file_and_refusal_parts() -> None:
    d = {
        "role": "user",
        "content": [
            {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
            {"type": "file", "file": {"file_id": "file-1"}},
        ],
    }
    m = from_openai(d)
    assert m.content == (
        AudioPart("UklG", "wav"),
        FilePart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        FilePart(file_id="file-1"),
    )
    assert to_openai(m) == d
    refusal = {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}
    parsed = from_openai(refusal)
    assert parsed.content == (TextPart("no", extra={"openai": {"type": "refusal"}}),)
    assert to_openai(parsed) == refusal


def test_nested_unknown_keys_are_namespaced() -> None:
    d = {
        "role": "assistant",
        "content": [{"type": "text", "text": "t", "x": 1}],
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}", "y": 2}, "z": 3}],
    }
    m = from_openai(d)
    assert isinstance(m.content, tuple)
    assert m.content[0].extra == {"openai": {"x": 1}}
    assert m.tool_calls[0].extra == {"openai": {"function": {"y": 2}, "z": 3}}
    assert to_openai(m) == {
        "role": "assistant",
        "content": [{"type": "text", "text": "t"}],
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }


def test_outputs_share_no_mutable_state() -> None:
    d = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    m = from_openai(d)
    d["function_call"]["name"] = "g"
    out = to_openai(m)
    assert out["function_call"] == {"name": "f", "arguments": "{}"}
    out["function_call"]["name"] = "h"
    assert to_openai(m)["function_call"] == {"name": "f", "arguments": "{}"}


@pytest.mark.parametrize(
    ("d", "field"),
    [
        ({"content": "x"}, "role"),
        ({"role": "robot", "content": "x"}, "role"),
        ({"role": "function", "content": "x"}, "name"),
        ({"role": "user", "content": 3}, "content"),
        ({"role": "user", "content": None}, "content"),
        ({"role": "user", "content": [{"type": "video"}]}, "content[0].type"),
        ({"role": "user", "content": [{"type": "text"}]}, "content[0].text"),
        ({"role": "user", "content": ["hi"]}, "content[0]"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": "https://x"}]}, "content[0].image_url"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "max"}}]},
            "content[0].detail",
        ),
        ({"role": "tool", "content": "42"}, "tool_call_id"),
        ({"role": "user", "content": "x", "name": 5}, "name"),
        ({"role": "assistant", "tool_calls": {}}, "tool_calls"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
            "tool_calls[0].type",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]},
            "tool_calls[0].custom.input",
        ),
        ({"role": "assistant", "tool_calls": [{"id": "c", "type": "mcp", "mcp": {}}]}, "tool_calls[0].type"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{x"}}],
            },
            "tool_calls[0].arguments",
        ),
        (
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            "tool_calls[0].id",
        ),
        (
            {
                "role": "user",
                "content": "x",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            "tool_calls",
        ),
    ],
)
def test_parse_errors_name_the_field(d: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_openai(d)
    assert info.value.field == field
    assert info.value.index is None


def test_batch_errors_carry_the_index() -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_openai_messages([{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}])
    assert (info.value.index, info.value.field) == (1, "tool_call_id")
    with pytest.raises(InvalidMessageError) as info:
        to_openai_messages(
            [Message(role="user", content="a"), Message(role="user", content=(ImagePart(path="/a.png"),))]
        )
    assert (info.value.index, info.value.field) == (1, "content[0].path")


@pytest.mark.parametrize(
    ("m", "field"),
    [
        (Message(role="user", content=(ImagePart(path="/tmp/a.png"),)), "content[0].path"),
        (Message(role="user", content=(ImagePart(data="AAAA"),)), "content[0].media_type"),
        (Message(role="user", content=(FilePart(url="https://x/a.pdf"),)), "content[0].url"),
        (Message(role="user", content=(FilePart(file_id="f", media_type="application/pdf"),)), "content[0].media_type"),
        (Message(role="user", content="x", extra={"openai": 3}), "extra.openai"),
        (
            Message(role="user", content=(TextPart("x", extra={"openai": {"type": "image"}}),)),
            "content[0].extra.openai.type",
        ),
    ],
)
def test_render_errors_name_the_field(m: Message, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        to_openai(m)
    assert info.value.field == field


@pytest.mark.parametrize(
    "d",
    [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "sh", "input": "ls -la"}}],
        },
        {"role": "function", "name": "lookup", "content": "42"},
        {"role": "function", "name": "lookup", "content": None},
    ],
)
def test_custom_calls_and_the_function_role_round_trip(d: dict[str, Any]) -> None:
    m = from_openai(d)
    assert to_openai(m) == d
    if d["role"] == "function":
        assert m.role == "user", "a legacy function result is a unit of its own"


def test_vendor_fields_go_back_to_their_own_provider_only() -> None:
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
        "extra_content": {"google": {"thought_signature": "s"}},
    }
    d = {"role": "assistant", "content": None, "reasoning_content": "why", "tool_calls": [call]}
    m = from_openai(d)
    assert to_openai(m) == d, "to a model convmem does not know: as it came"
    assert to_openai(m, vendor="deepseek")["reasoning_content"] == "why"
    assert "extra_content" not in to_openai(m, vendor="deepseek")["tool_calls"][0]
    assert to_openai(m, vendor="google")["tool_calls"][0]["extra_content"] == call["extra_content"]
    assert "reasoning_content" not in to_openai(m, vendor="google")
    plain = to_openai(m, vendor="openai")
    assert "reasoning_content" not in plain
    assert "extra_content" not in plain["tool_calls"][0]
    without_calls = from_openai({"role": "assistant", "content": "hi", "reasoning_content": "why"})
    assert to_openai(without_calls, vendor="deepseek") == {"role": "assistant", "content": "hi"}, (
        "only on a tool-call turn"
    )
