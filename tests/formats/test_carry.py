"""What a format cannot carry: replaced by its text where faithful, else left out with a note, never sent as is."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.formats import parse_items, render
from convmem.formats._carry import Note, carry, changes
from convmem.formats._native import faithful_text, opaque_tokens, texts
from convmem.messages import Message

from .._quick import examples
from ..provider import rules

_U = {"role": "user", "content": "hi"}
_SEARCH = {
    "type": "search_result",
    "source": "https://a.example",
    "title": "A",
    "content": [{"type": "text", "text": "fjords"}],
}
# Units as an application adds them, each from one format, each holding something only that format has.
UNITS: dict[str, list[dict[str, Any]]] = {
    "anthropic server tool": [
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "found"},
            ],
        }
    ],
    "anthropic thinking call": [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "tool_use", "id": "t.1", "name": "f", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t.1", "content": [_SEARCH]}]},
    ],
    "anthropic search result": [{"role": "user", "content": [_SEARCH, {"type": "text", "text": "see"}]}],
    "anthropic compaction": [
        {"role": "assistant", "content": [{"type": "compaction", "content": "so far", "encrypted_content": "e"}]}
    ],
    "responses computer call": [
        {
            "type": "computer_call",
            "id": "cu",
            "call_id": "c9",
            "action": {"type": "screenshot"},
            "status": "completed",
            "pending_safety_checks": [],
        },
        {
            "type": "computer_call_output",
            "call_id": "c9",
            "output": {"type": "computer_screenshot", "image_url": "https://s.example/1.png"},
        },
    ],
    "responses web search": [
        {"type": "web_search_call", "id": "ws", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"role": "assistant", "content": "ok"},
    ],
    "responses compaction": [{"type": "compaction", "id": "cmp", "encrypted_content": "x" * 40}],
    "chat custom call": [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "k1", "type": "custom", "custom": {"name": "sh", "input": "ls"}}],
        },
        {"role": "tool", "tool_call_id": "k1", "content": "a.txt"},
    ],
    "chat refusal": [{"role": "assistant", "content": None, "refusal": "no"}],
    "chat audio": [{"role": "assistant", "content": None, "audio": {"id": "au", "transcript": "spoken"}}],
    "chat audio input": [
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}]}
    ],
}


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    items: list[Any] = []
    for name in draw(st.lists(st.sampled_from(sorted(UNITS)), min_size=1, max_size=6)):
        items += [_U, *json.loads(json.dumps(UNITS[name]))]
    return parse_items(items)


@settings(max_examples=examples(80), deadline=None)
@given(conversations(), st.sampled_from(["openai", "anthropic", "responses"]))
def test_every_format_renders_what_it_carries_and_notes_the_rest(messages: list[Message], fmt: str) -> None:
    notes: list[Note] = []
    kept: list[int] = []
    carried = carry(messages, fmt, notes, kept)
    assert carry(carried, fmt) == carried, "carrying twice changes nothing"
    assert not any(changes(m, fmt) for m in carried)
    assert kept == sorted(kept)
    assert all(0 <= i < len(messages) for i in kept)
    rendered = render(carried, fmt, drop_names=True)
    request = rendered.messages if not isinstance(rendered, list) else rendered
    rules.check(fmt, request)  # calls answered, ids in their rule, no empty content
    sent = json.dumps(request)
    for i, m in enumerate(messages):
        for other, ns in m.extra.items():
            for obj in ns.get("$layout") or () if isinstance(ns, dict) and other != fmt else ():
                if isinstance(obj, dict):
                    assert json.dumps(obj) not in sent, "another format's object is never sent as it is"
                    text = faithful_text(obj)
                    assert (text is not None and json.dumps(text)[1:-1] in sent) or Note(
                        i, f"{other} {obj.get('type')}"
                    ) in notes
        if i not in kept:
            assert any(note.at == i for note in notes), "a message left out whole is noted"


def test_the_text_of_a_kept_object_is_what_the_model_reads() -> None:
    use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "oslo"}}
    assert texts(use) == ["web_search", '{"query":"oslo"}']
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://u", "title": "T", "encrypted_content": "E" * 40}],
    }
    assert texts(result) == ["https://u", "T"]
    assert opaque_tokens(result, "anthropic") == 10, "the encrypted page, estimated at 4 characters a token"
    assert texts({"type": "thinking", "thinking": "why", "signature": "sig"}) == ["why"]
    assert (
        opaque_tokens({"type": "reasoning", "id": "r", "summary": [], "encrypted_content": "E" * 99}, "responses") == 0
    )
    assert opaque_tokens({"type": "compaction", "encrypted_content": "E" * 8}, "responses") == 2
    assert opaque_tokens({"type": "compaction", "content": "s", "encrypted_content": "E" * 8}, "anthropic") == 0
    assert faithful_text(_SEARCH) == "A https://a.example\nfjords"
    document = {
        "type": "document",
        "title": "memo",
        "source": {"type": "text", "media_type": "text/plain", "data": "hi"},
    }
    assert faithful_text(document) == texts(document)[0] == "memo\nhi"
