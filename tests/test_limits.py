"""Limits at the door: each kind of hostile input is a named InvalidMessageError, and nothing is stored."""

from __future__ import annotations

import pytest

from convmem import InvalidMessageError, Memory
from convmem.errors import ConfigurationError
from convmem.limits import DEPTH_CEILING, MAX_INT, Limits, check_json, json_text_depth
from convmem.messages import Message, ToolCall


def _nested(depth: int) -> object:
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _call(arguments: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}],
    }


HOSTILE = [
    pytest.param(_call("[" * 5000 + "]" * 5000), "tool_calls[0].arguments", "limit of 256", id="args-5000-deep"),
    pytest.param(_call("[" * 65 + "]" * 65), "tool_calls[0].arguments", "limit of 64", id="args-65-deep"),
    pytest.param(
        _call('{"a": "' + "[" * 500 + '"}'), None, None, id="brackets-inside-strings-are-not-nesting"
    ),  # stored
    pytest.param(_call('{"a": NaN}'), "tool_calls[0].arguments", "NaN", id="args-nan"),
    pytest.param(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {"a": _nested(5000)}}]},
        "content[0].input",
        "limit of 256",
        id="anthropic-input-5000-deep",
    ),
    pytest.param({"role": "user", "content": "hi", "x": {"a": _nested(5000)}}, "extra", "limit of 256", id="deep"),
    pytest.param({"role": "user", "content": "hi", "x": {"a": _nested(70)}}, "extra", "limit of 64", id="extra-70"),
    pytest.param({"role": "user", "content": "hi \ud800 there"}, "content", "surrogate", id="surrogate-fast-path"),
    pytest.param(
        {"role": "user", "content": [{"type": "text", "text": "\udfff"}]}, "content[0].text", "surrogate", id="part"
    ),
    pytest.param({"role": "user", "content": "x", "name": "a\ud800"}, "name", "surrogate", id="surrogate-name"),
    pytest.param({"role": "user", "content": "x", "x": {"\ud800": 1}}, "extra", "surrogate", id="surrogate-key"),
    pytest.param({"role": "user", "content": "x", "x": float("nan")}, "extra", "NaN", id="nan"),
    pytest.param({"role": "user", "content": "x", "x": [float("-inf")]}, "extra", "NaN or infinity", id="inf"),
    pytest.param({"role": "user", "content": "x", "x": 2**53}, "extra", str(MAX_INT), id="int-2**53"),
    pytest.param({"role": "user", "content": "x", "x": -(2**63)}, "extra", str(MAX_INT), id="int-2**63"),
    pytest.param({"role": "user", "content": "x" * (16 * 2**20 + 1)}, "content", "limit of 16777216", id="size"),
]


@pytest.mark.parametrize(("item", "field", "words"), HOSTILE)
def test_hostile_input_is_a_named_error_and_nothing_is_stored(item: dict[str, object], field: str, words: str) -> None:
    memory = Memory(max_tokens=50_000)
    memory.add({"role": "user", "content": "before"})
    if field is None:
        memory.add(item)
        assert memory.messages()[-1].role == "assistant"
        return
    with pytest.raises(InvalidMessageError) as info:
        memory.add_many([{"role": "user", "content": "fine"}, item])
    assert info.value.index == 1
    assert info.value.field == field
    assert words in str(info.value)
    assert [m.text for m in memory.messages()] == ["before"]


def test_message_itself_refuses_what_no_store_can_keep() -> None:
    with pytest.raises(InvalidMessageError, match="limit of 256"):
        Message(role="user", content="x", metadata={"a": _nested(10_000)})
    with pytest.raises(InvalidMessageError, match="limit of 256"):
        ToolCall("c", "f", "{" * 3000)
    with pytest.raises(InvalidMessageError, match="surrogate"):
        Message(role="user", content="\ud83d")
    Message(role="user", content="x", metadata={"a": _nested(DEPTH_CEILING - 1), "n": MAX_INT, "m": -MAX_INT})


def test_limits_are_configurable_up_to_the_ceilings() -> None:
    deep = _call("[" * 100 + "]" * 100)
    with pytest.raises(InvalidMessageError, match="limit of 64"):
        Memory(max_tokens=50_000).add(deep)
    memory = Memory(max_tokens=50_000, limits=Limits(max_depth=128))
    memory.add(deep)
    small = Memory(max_tokens=50_000, limits=Limits(max_message_bytes=100))
    with pytest.raises(InvalidMessageError, match="over the limit of 100"):
        small.add({"role": "user", "content": "é" * 60})  # 120 bytes of UTF-8
    for bad in ({"max_depth": DEPTH_CEILING + 1}, {"max_depth": 0}, {"max_message_bytes": 2**40}):
        with pytest.raises(ConfigurationError, match="from 1 to"):
            Limits(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="Limits"):
        Memory(max_tokens=50_000, limits={"max_depth": 3})  # type: ignore[arg-type]


def test_a_ten_megabyte_message_is_accepted() -> None:
    memory = Memory(max_tokens=50_000)
    memory.add({"role": "user", "content": "word " * 2_000_000})
    assert len(memory.messages()) == 1


def test_the_checks_do_not_recurse() -> None:
    with pytest.raises(InvalidMessageError, match="limit of 256"):
        check_json({"a": _nested(200_000)}, "metadata")
    with pytest.raises(InvalidMessageError, match="limit of 10"):
        json_text_depth('{"a": ' * 11 + "1" + "}" * 11, "arguments", 10)
    json_text_depth('["' + "{" * 100 + '"]', "arguments", 10)  # inside a string: not nesting
