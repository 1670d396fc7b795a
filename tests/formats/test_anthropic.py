"""Anthropic: request round trips are exact, Message round trips preserve every piece of content."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import InvalidMessageError
from convmem.formats._carry import Note
from convmem.formats.anthropic import CONTINUATION_PLACEHOLDER, AnthropicRequest, from_anthropic, to_anthropic
from convmem.messages import AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall

from .._quick import examples
from ..strategies import conversations, with_unknown_keys, without_unknown_keys

# What Anthropic can express: no audio, names, local paths or multi-source files.
OPTIONS: dict[str, Any] = {
    "kinds": ("text", "image", "file"),
    "names": False,
    "metadata": False,
    "sources": ("url", "data"),
    "sizes": False,
    "single": True,
    "typed": True,
}
_THINKING = [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "redacted_thinking", "data": "xx"}]


def _holds_results(d: dict[str, Any]) -> bool:
    content = d.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


@st.composite
def requests(draw: st.DrawFn) -> AnthropicRequest:
    """Valid, alternating requests with unknown keys, thinking blocks and unusual block orders."""
    conversation = draw(conversations(**OPTIONS))
    if draw(st.booleans()):  # sometimes start with an assistant message (placeholder)
        conversation = [m for m in conversation if m.role != "user"][:1] + conversation
    request = to_anthropic([m for m in conversation if m.role != "tool" or m.tool_call_id])
    out = []
    for d in draw(with_unknown_keys(request.messages, skip=_holds_results)):
        if d["role"] == "assistant" and isinstance(d["content"], list):
            blocks = draw(st.permutations(d["content"]))
            for block in draw(st.lists(st.sampled_from(_THINKING), max_size=2)):
                blocks.insert(draw(st.integers(0, len(blocks))), block)
            d = {**d, "content": blocks}
        if _holds_results(d):
            for block in d["content"]:
                if block["type"] == "tool_result" and draw(st.booleans()):
                    block.pop("content")
        out.append(d)
    system = request.system
    if isinstance(system, list):
        system = draw(with_unknown_keys(system))
    return AnthropicRequest(system, out)


@settings(max_examples=examples(150), deadline=None)
@given(requests())
def test_request_round_trip(request: AnthropicRequest) -> None:
    sent = AnthropicRequest(
        without_unknown_keys(request.system), _no_empty_text(without_unknown_keys(request.messages))
    )
    assert to_anthropic(from_anthropic(request.messages, request.system)) == sent


def _no_empty_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic refuses empty text blocks: a message sends them only when it has nothing else."""
    out = []
    for d in messages:
        content = d["content"]
        if isinstance(content, list):
            kept = [b for b in content if not (b.get("type") == "text" and b.get("text") == "")]
            d = {**d, "content": kept or content}
        out.append(d)
    return out


def _part_atom(part: Part) -> Any:
    if isinstance(part, ImagePart):  # detail and sizes are OpenAI hints, not rendered
        return ImagePart(url=part.url, data=part.data, media_type=part.media_type, extra=part.extra)
    return part


def _atoms(messages: list[Message]) -> tuple[list[Any], list[Any]]:
    """The content of ``messages`` in order, without message boundaries or the pinned role."""
    system: list[Any] = []
    conversation: list[Any] = []
    for m in messages:
        content = (TextPart(m.content),) if isinstance(m.content, str) else m.content or ()
        if m.pinned:
            system += [p for p in content if not (isinstance(p, TextPart) and not p.text)]
        elif m.role == "tool":
            kept = [p for p in content if not (isinstance(p, TextPart) and not p.text)]  # empty text is not sent
            result = m.content if isinstance(m.content, str) else tuple(_part_atom(p) for p in kept)
            conversation.append(("result", m.tool_call_id, result, m.extra))
        else:
            side = "assistant" if m.role == "assistant" else "user"
            parts = [p for p in content if not (isinstance(p, TextPart) and not p.text)]  # empty text is not sent
            conversation += [(side, _part_atom(p)) for p in parts]
            conversation += [(side, c.id, c.name, json.loads(c.arguments), c.extra) for c in m.tool_calls]
    return system, conversation


@settings(max_examples=examples(150), deadline=None)
@given(conversations(**OPTIONS))
def test_messages_keep_every_piece_of_content(conversation: list[Message]) -> None:
    request = to_anthropic(conversation)
    assert _atoms(from_anthropic(request.messages, request.system)) == _atoms(conversation)


def test_identity_for_anthropic_shaped_messages() -> None:
    messages = [
        Message(role="system", content="be brief"),
        Message(role="assistant", content="hello again"),
        Message(role="user", content="hi"),
        Message(role="assistant", content=(TextPart("let me look"),), tool_calls=(ToolCall("c1", "f", '{"q":"x"}'),)),
        Message(role="tool", tool_call_id="c1", content="found", extra={"anthropic": {"is_error": False}}),
        Message(
            role="user", content=(TextPart("thanks", extra={"anthropic": {"cache_control": {"type": "ephemeral"}}}),)
        ),
    ]
    request = to_anthropic(messages)
    assert request.system == "be brief"
    assert request.messages[0] == {"role": "user", "content": CONTINUATION_PLACEHOLDER}
    assert request.messages[4] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "found", "is_error": False},
            {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}},
        ],
    }
    assert from_anthropic(request.messages, request.system) == messages
    assert request.kwargs() == {"system": "be brief", "messages": request.messages}
    assert AnthropicRequest(None, []).kwargs() == {"messages": []}


def test_merging_and_hoisting() -> None:
    messages = [
        Message(role="user", content="a"),
        Message(role="developer", content="d"),
        Message(role="user", content=(TextPart("b"),)),
        Message(role="assistant", content="x", tool_calls=(ToolCall("c1", "f", '{"a": [1, 2]}'), ToolCall("c2", "g"))),
        Message(role="tool", tool_call_id="c1", content="1"),
        Message(
            role="tool", tool_call_id="c2", content=(TextPart("2"), ImagePart(url="https://x/i.png", detail="low"))
        ),
    ]
    request = to_anthropic(messages)
    assert request.system == "d"
    assert request.messages == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": [1, 2]}},
                {"type": "tool_use", "id": "c2", "name": "g", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": [
                        {"type": "text", "text": "2"},
                        {"type": "image", "source": {"type": "url", "url": "https://x/i.png"}},
                    ],
                },
            ],
        },
    ]
    back = from_anthropic(request.messages, request.system)
    assert back[0] == Message(role="system", content="d")
    assert back[2].tool_calls[0].arguments == '{"a":[1,2]}'  # re-encoded compactly
    assert [m.role for m in back] == ["system", "user", "assistant", "tool", "tool"]


def test_system_blocks_and_media() -> None:
    system = [{"type": "text", "text": "s1", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "s2"}]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://x/a.pdf"},
                    "title": "a.pdf",
                    "citations": {"enabled": True},
                },
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
            ],
        }
    ]
    parsed = from_anthropic(messages, system)
    assert parsed[0] == Message(
        role="system",
        content=(TextPart("s1", extra={"anthropic": {"cache_control": {"type": "ephemeral"}}}), TextPart("s2")),
    )
    assert parsed[1].content == (
        ImagePart(data="AAAA", media_type="image/png"),
        FilePart(file_id="file_1", extra={"anthropic": {"type": "image"}}),
        FilePart(url="https://x/a.pdf", filename="a.pdf", extra={"anthropic": {"citations": {"enabled": True}}}),
        FilePart(data="JVBE", media_type="application/pdf"),
    )
    assert to_anthropic(parsed) == AnthropicRequest(system, messages)


def test_thinking_and_block_order_are_kept() -> None:
    blocks = [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
        {"type": "text", "text": "after"},
    ]
    (m,) = from_anthropic([{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}])[1:]
    assert m.content == (TextPart("after"),)
    assert m.tool_calls == (ToolCall("c1", "f", "{}"),)
    assert m.extra == {"anthropic": {"$layout": [blocks[0], "t", "p"]}}
    assert to_anthropic([m]).messages[1]["content"] == blocks


def test_tool_result_without_content_and_text_after_results() -> None:
    d = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}, {"type": "text", "text": "more"}]}
    tool, user = from_anthropic([d])
    assert tool == Message(role="tool", tool_call_id="c1", content="", extra={"anthropic": {"$absent": ["content"]}})
    assert user == Message(role="user", content=(TextPart("more"),))
    assert to_anthropic([tool, user]).messages == [d]


def test_drop_names() -> None:
    request = to_anthropic([Message(role="user", content="hi", name="ann")], drop_names=True)
    assert request.messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("messages", "index", "field"),
    [
        ([Message(role="user", content="a"), Message(role="user", content="b", name="bob")], 1, "name"),
        ([Message(role="system", content="s", name="bob")], 0, "name"),
        ([Message(role="user", content=(ImagePart(path="/tmp/a.png"),))], 0, "content[0].path"),
        ([Message(role="user", content=(ImagePart(data="AAAA"),))], 0, "content[0].media_type"),
        ([Message(role="user", content=(FilePart(data="AAAA"),))], 0, "content[0].media_type"),
        ([Message(role="user", content=(FilePart(data="AAAA", file_id="f", media_type="a/b"),))], 0, "content[0].file"),
        ([Message(role="assistant", tool_calls=(ToolCall("c", "f", "[1]"),))], 0, "tool_calls[0].arguments"),
        ([Message(role="user", content="a"), Message(role="tool", tool_call_id="c", content="r")], 1, "role"),
        ([Message(role="system", content="s", extra={"anthropic": {"x": 1}})], 0, "extra.anthropic"),
        (
            [Message(role="assistant", content="a", extra={"anthropic": {"$layout": ["p", "p"]}})],
            0,
            "extra.anthropic.$layout",
        ),
        ([Message(role="assistant", content="a", extra={"anthropic": {"$layout": []}})], 0, "extra.anthropic.$layout"),
        (
            [Message(role="assistant", content="a", extra={"anthropic": {"$layout": ["x"]}})],
            0,
            "extra.anthropic.$layout",
        ),
        ([Message(role="assistant", content="a", extra={"anthropic": {"$layout": "p"}})], 0, "extra.anthropic.$layout"),
        (
            [Message(role="assistant", content="a", extra={"anthropic": {"$layout": ["p", {"type": "text"}]}})],
            0,
            "extra.anthropic.$layout",
        ),
        (
            [
                Message(
                    role="user", content=(FilePart(data="A", media_type="a/b", extra={"anthropic": {"type": "image"}}),)
                )
            ],
            0,
            "content[0].extra.anthropic.type",
        ),
    ],
)
def test_render_errors(messages: list[Message], index: int, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        to_anthropic(messages)
    assert (info.value.index, info.value.field) == (index, field)


def test_audio_is_left_out_with_a_note() -> None:
    notes: list[Note] = []
    spoken = Message(role="user", content=(TextPart("listen"), AudioPart("UklG", "wav")))
    assert to_anthropic([spoken], notes=notes).messages == [
        {"role": "user", "content": [{"type": "text", "text": "listen"}]}
    ]
    assert notes == [Note(0, "an audio part")]


_OK = {"role": "user", "content": "ok"}


@pytest.mark.parametrize(
    ("messages", "index", "field"),
    [
        ([_OK, {"role": "system", "content": "s"}], 1, "role"),
        ([_OK, {"content": "s"}], 1, "role"),
        ([_OK, {"role": "user", "content": None}], 1, "content"),
        ([_OK, {"role": "assistant", "content": [{"type": "server_tool_use"}]}], 1, "content[0].id"),
        ([_OK, {"role": "assistant", "content": [{"type": "web_search_tool_result"}]}], 1, "content[0].tool_use_id"),
        ([_OK, {"role": "assistant", "content": [{"type": "nope_block"}]}], 1, "content[0].type"),
        (
            [_OK, {"role": "user", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]}],
            1,
            "content[0].type",
        ),
        (
            [
                _OK,
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "tool_result", "tool_use_id": "c"}],
                },
            ],
            1,
            "content[1].type",
        ),
        ([_OK, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}], "x": 1}], 1, "x"),
        ([_OK, {"role": "user", "content": [{"type": "tool_result", "content": "r"}]}], 1, "content[0].tool_use_id"),
        (
            [_OK, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": None}]}],
            1,
            "content[0].content",
        ),
        (
            [_OK, {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": [1]}]}],
            1,
            "content[0].input",
        ),
        ([_OK, {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}], 1, "content[0].id"),
        (
            [{"role": "user", "content": [{"type": "document", "source": {"type": "zip", "data": "x"}}]}],
            0,
            "content[0].source.type",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]}],
            0,
            "content[0].source.media_type",
        ),
        ([{"role": "user", "content": [{"type": "image"}]}], 0, "content[0].source"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "c",
                            "content": [{"type": "video", "source": {"type": "file", "file_id": "f"}}],
                        }
                    ],
                }
            ],
            0,
            "content[0].content[0].type",
        ),
        (["nope"], 0, "message"),
    ],
)
def test_parse_errors(messages: list[Any], index: int, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_anthropic(messages)
    assert (info.value.index, info.value.field) == (index, field)


def test_system_parse_errors_name_the_block() -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_anthropic([], [{"type": "image"}])
    assert (info.value.index, info.value.field) == (None, "system[0].type")


_SERVER = [
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
]
_USER_KEPT = [
    {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}]},
    {"type": "container_upload", "file_id": "file_1"},
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain"}},
]


@settings(max_examples=examples(100))
@given(
    st.permutations([*_SERVER, {"type": "text", "text": "a"}, {"type": "compaction", "content": "s"}]),
    st.lists(st.sampled_from(_USER_KEPT), min_size=1, max_size=3),
    st.booleans(),
)
def test_kept_blocks_round_trip_in_every_message_and_result(
    assistant: list[dict[str, Any]], user: list[dict[str, Any]], note_first: bool
) -> None:
    """Server tools and compaction among an assistant's blocks, search results and text documents in a user
    message and in a tool result, a thinking turn after an app's note: the same request comes back."""
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [*user, {"type": "text", "text": "r"}]}
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [*user, {"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [*assistant, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [result]},
    ]
    if note_first:  # an app's note, then the model's thinking turn: separated, the thinking first
        messages += [
            {"role": "assistant", "content": "note"},
            {"role": "user", "content": CONTINUATION_PLACEHOLDER},
            {"role": "assistant", "content": [thinking, {"type": "text", "text": "done"}]},
        ]
    parsed = from_anthropic(messages)
    assert to_anthropic(parsed).messages == messages
    compactions = [
        m
        for m in parsed
        if any(
            isinstance(b, dict) and b.get("type") == "compaction"
            for b in m.extra.get("anthropic", {}).get("$layout", ())
        )
    ]
    assert len(compactions) == 1
    assert compactions[0].extra["anthropic"]["$layout"] == [{"type": "compaction", "content": "s"}], "it stands alone"
