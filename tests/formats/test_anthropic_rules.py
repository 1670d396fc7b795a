"""The Messages API's rules, each on its own: alternation, tool results, the placeholder, empty text blocks."""

from __future__ import annotations

from typing import Any

import pytest

from convmem.errors import InvalidMessageError
from convmem.formats.anthropic._rules import (
    CONTINUATION_PLACEHOLDER,
    append_alternating,
    is_continuation,
    role_of,
    starting_with_user,
    without_empty_text,
    without_merged_empty_text,
)

TEXT = {"type": "text", "text": "x"}
EMPTY = {"type": "text", "text": ""}
RESULT = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}


def test_only_the_assistant_role_survives_every_other_is_sent_as_user() -> None:
    assert [role_of(r) for r in ("assistant", "user", "tool")] == ["assistant", "user", "user"]


def test_a_message_of_the_same_role_merges_into_the_last_one_as_blocks() -> None:
    out: list[dict[str, Any]] = []
    append_alternating(out, "user", "hi")
    append_alternating(out, "assistant", "hello")
    append_alternating(out, "assistant", [TEXT])
    assert out == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}, TEXT]},
    ]


def test_a_tool_result_follows_its_call_or_other_results_only() -> None:
    out: list[dict[str, Any]] = [{"role": "user", "content": [RESULT]}]
    append_alternating(out, "user", [RESULT], tool_result=True)
    assert out[0]["content"] == [RESULT, RESULT]
    after_text: list[dict[str, Any]] = [{"role": "user", "content": "a question"}]
    with pytest.raises(InvalidMessageError, match="must directly follow") as raised:
        append_alternating(after_text, "user", [RESULT], tool_result=True)
    assert raised.value.field == "role"


def test_the_placeholder_goes_in_front_of_an_assistant_and_is_recognized_on_the_way_back() -> None:
    out = starting_with_user([{"role": "assistant", "content": "go on"}])
    assert out[0] == {"role": "user", "content": CONTINUATION_PLACEHOLDER}
    assert is_continuation(out)
    assert starting_with_user([{"role": "user", "content": "hi"}]) == [{"role": "user", "content": "hi"}]
    # The same text from a user, not followed by an assistant, is a message like any other.
    assert not is_continuation([{"role": "user", "content": CONTINUATION_PLACEHOLDER}])
    assert not is_continuation(
        [{"role": "user", "content": CONTINUATION_PLACEHOLDER}, {"role": "user", "content": "more"}]
    )


def test_empty_text_blocks_go_while_something_else_remains() -> None:
    assert without_empty_text([EMPTY, TEXT, EMPTY]) == [TEXT]
    assert without_empty_text([EMPTY, EMPTY]) == [EMPTY, EMPTY]  # the message must hold something
    merged = [{"role": "user", "content": [EMPTY, EMPTY]}, {"role": "assistant", "content": [EMPTY, TEXT]}]
    without_merged_empty_text(merged)
    assert merged == [{"role": "user", "content": [EMPTY]}, {"role": "assistant", "content": [TEXT]}]
