"""The current cache controls (issue 26, deliver 5): OpenAI's key, options and explicit breakpoints,
Anthropic's lifetimes, its automatic mark and the limit of four marks, the caller's own included.

Requests are checked against the installed SDKs' request types, made strict (``tests/provider/strict``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory, Message
from convmem.errors import ConfigurationError
from convmem.formats._breakpoints import KEY, count, place
from convmem.messages import TextPart

from ._quick import examples
from .provider.strict import check
from .validators import validate_context

TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look a word up."}}


def _conversation(memory: Memory, turns: int = 3) -> Memory:
    memory.add({"role": "system", "content": "You help."})
    for i in range(turns):
        memory.add({"role": "user", "content": f"question {i}"})
        memory.add({"role": "assistant", "content": f"answer {i}"})
    memory.add({"role": "user", "content": "the last question"})
    return memory


def _check_openai(request: dict[str, Any], fmt: str) -> None:
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.chat.completion_create_params import PromptCacheOptions as ChatOptions
    from openai.types.responses import ResponseInputItemParam
    from openai.types.responses.response_create_params import PromptCacheOptions as ResponsesOptions

    if fmt == "openai":
        for i, message in enumerate(request["messages"]):
            check(ChatCompletionMessageParam, message, f"messages[{i}]")
    else:
        for i, item in enumerate(request["input"]):
            check(ResponseInputItemParam, item, f"input[{i}]")
    if "prompt_cache_options" in request:
        check(ChatOptions if fmt == "openai" else ResponsesOptions, request["prompt_cache_options"])
    if "prompt_cache_key" in request:
        assert isinstance(request["prompt_cache_key"], str)


def _breakpoints(request: dict[str, Any]) -> int:
    return json.dumps(request).count(f'"{KEY}"')


# -- OpenAI ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openai", "responses"])
def test_prompt_cache_key_and_options_go_with_every_openai_request(fmt: str) -> None:
    memory = _conversation(
        Memory("gpt-4o", prompt_cache_key="user-7", prompt_cache_options={"mode": "explicit", "ttl": "30m"})
    )
    request = memory.context(format=fmt).request()
    assert request["prompt_cache_key"] == "user-7"
    assert request["prompt_cache_options"] == {"mode": "explicit", "ttl": "30m"}
    _check_openai(request, fmt)
    anthropic = memory.context(format="anthropic").request()
    assert "prompt_cache_key" not in anthropic
    assert "prompt_cache_options" not in anthropic


@pytest.mark.parametrize("fmt", ["openai", "responses"])
def test_gpt56_gets_explicit_breakpoints_at_the_stable_ends_and_gpt4o_none(fmt: str) -> None:
    terra = _conversation(Memory("gpt-5.6-terra", tools=[TOOL])).context(format=fmt)
    request = terra.request()
    _check_openai(request, fmt)
    assert 1 <= _breakpoints(request) <= 3  # beside OpenAI's own implicit breakpoint
    items = request["messages" if fmt == "openai" else "input"]
    assert KEY in items[0]["content"][-1]  # the end of the pinned system message
    assert _breakpoints(_conversation(Memory("gpt-4o")).context(format=fmt).request()) == 0
    off = _conversation(Memory("gpt-5.6-terra", cache_breakpoints=False)).context(format=fmt).request()
    assert _breakpoints(off) == 0


def test_breakpoints_do_not_change_what_is_counted() -> None:
    marked = _conversation(Memory("gpt-5.6-terra")).context()
    plain = _conversation(Memory("gpt-5.6-terra", cache_breakpoints=False)).context()
    assert marked.tokens == plain.tokens
    assert marked.messages != plain.messages


def test_a_responses_assistant_message_never_takes_an_input_part() -> None:
    memory = Memory("gpt-5.6-sol", blocks=[])
    memory.add({"role": "user", "content": "hi"})
    memory.add({"role": "assistant", "content": "hello"})
    items = memory.context(format="responses").request()["input"]
    assert items[-1]["role"] == "assistant"
    assert items[-1]["content"] == "hello"  # the end mark moved to the user message before it
    assert KEY in items[0]["content"][-1]


def test_place_respects_the_limit_counting_the_callers_own_and_walks_back_to_a_carrier() -> None:
    own = {"role": "user", "content": [{"type": "text", "text": "a", KEY: {"mode": "explicit"}}]}
    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}
    items = [{"role": "system", "content": "s"}, own, calls, {"role": "tool", "tool_call_id": "c", "content": "r"}]
    out = place(items, [3, 2, 0], limit=3, format="openai")
    assert count(out) == 3
    assert out[3]["content"][-1][KEY] == {"mode": "explicit"}
    assert out[2] is calls  # a call cannot carry one, and the message before it is marked already
    assert out[0]["content"][0][KEY] == {"mode": "explicit"}
    assert items[0] == {"role": "system", "content": "s"}  # the items given are never changed
    assert count(place(items, [3, 0], limit=1, format="openai")) == 1  # the caller's own fill the limit


def test_prompt_cache_options_are_checked_where_they_are_given_and_where_they_are_sent() -> None:
    with pytest.raises(ConfigurationError, match=r"prompt_cache_options\.mode"):
        Memory("gpt-4o", prompt_cache_options={"mode": "sometimes"})
    with pytest.raises(ConfigurationError, match="'retention'"):
        Memory("gpt-4o", prompt_cache_options={"retention": "24h"})
    with pytest.raises(ConfigurationError, match="prompt_cache_key must be a string"):
        Memory("gpt-4o", prompt_cache_key=7)  # type: ignore[arg-type]
    memory = _conversation(Memory("gpt-5.6-sol", prompt_cache_options={"ttl": "12h"}))
    _check_openai(memory.context(format="responses").request(), "responses")
    with pytest.raises(ConfigurationError, match="Chat Completions API takes '30m'"):
        memory.context(format="openai")


# -- Anthropic ---------------------------------------------------------------------------------------


def _anthropic_blocks(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every block that carries a cache_control, in the order the API reads them: tools, system, messages."""
    blocks = [t for t in request.get("tools", []) if "cache_control" in t]
    system = request.get("system")
    stack: list[Any] = list(system) if isinstance(system, list) else []
    for message in request["messages"]:
        stack += message["content"] if isinstance(message["content"], list) else []
    while stack:
        block = stack.pop(0)
        if "cache_control" in block:
            blocks.append(block)
        if isinstance(block.get("content"), list):
            stack = list(block["content"]) + stack
    return blocks


def _rank(block: dict[str, Any]) -> int:
    return 2 if block["cache_control"].get("ttl") == "1h" else 1


def _check_anthropic(context: Any) -> None:
    from anthropic.types import CacheControlEphemeralParam, MessageParam, TextBlockParam, ToolUnionParam

    request = context.request()
    for i, message in enumerate(request["messages"]):
        check(MessageParam, message, f"messages[{i}]")
    if isinstance(request.get("system"), list):
        for i, block in enumerate(request["system"]):
            check(TextBlockParam, block, f"system[{i}]")
    for i, tool in enumerate(request.get("tools", [])):
        check(ToolUnionParam, tool, f"tools[{i}]")
    if "cache_control" in request:
        check(CacheControlEphemeralParam, request["cache_control"], "cache_control")
    validate_context(context)


def test_a_1h_ttl_goes_on_every_mark_convmem_places() -> None:
    context = _conversation(Memory("claude-sonnet-4-5", tools=[TOOL], format="anthropic", cache_ttl="1h")).context()
    blocks = _anthropic_blocks(context.request())
    assert len(blocks) >= 2
    assert all(b["cache_control"] == {"type": "ephemeral", "ttl": "1h"} for b in blocks)
    _check_anthropic(context)


def test_a_callers_shorter_mark_shortens_the_marks_after_it_and_a_longer_one_lengthens_those_before() -> None:
    short = {"anthropic": {"cache_control": {"type": "ephemeral"}}}
    memory = Memory("claude-sonnet-4-5", format="anthropic", cache_ttl="1h", max_tokens=20_000)
    memory.add(
        {"role": "system", "content": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]}
    )
    memory.add({"role": "user", "content": "one"})
    memory.add({"role": "assistant", "content": "two"})
    memory.add(Message(role="user", content=(TextPart("three", extra=short),)))
    blocks = _anthropic_blocks(memory.context().request())
    assert [_rank(b) for b in blocks] == [1] * len(blocks)  # after the caller's 5-minute system mark: 5 minutes
    long = {"anthropic": {"cache_control": {"type": "ephemeral", "ttl": "1h"}}}
    later = Memory("claude-sonnet-4-5", format="anthropic", max_tokens=20_000)  # convmem's would be 5 minutes
    later.add({"role": "system", "content": "rules"})
    later.add({"role": "user", "content": "one"})
    later.add({"role": "assistant", "content": "two"})
    later.add(Message(role="user", content=(TextPart("three", extra=long),)))
    ranks = [_rank(b) for b in _anthropic_blocks(later.context().request())]
    assert ranks == sorted(ranks, reverse=True)
    assert ranks[0] == 2  # the system mark takes the caller's later hour


def test_automatic_caching_sends_the_top_level_mark_and_leaves_it_a_place() -> None:
    mark = {"anthropic": {"cache_control": {"type": "ephemeral"}}}
    memory = Memory("claude-sonnet-4-5", tools=[TOOL], format="anthropic", cache_breakpoints="automatic")
    memory.add({"role": "system", "content": "pinned"})
    for i in range(3):
        memory.add(Message(role="user", content=(TextPart(f"q{i}", extra=mark),)))
        memory.add({"role": "assistant", "content": f"a{i}"})
    memory.add({"role": "user", "content": "last"})
    context = memory.context()
    request = context.request()
    assert request["cache_control"] == {"type": "ephemeral"}
    assert len(_anthropic_blocks(request)) + 1 == 4  # the caller's three, and the automatic one
    last = request["messages"][-1]["content"]
    assert "cache_control" not in json.dumps(last)  # the automatic mark is the last block's
    _check_anthropic(context)
    crowded = Memory("claude-sonnet-4-5", format="anthropic", cache_breakpoints="automatic")
    for i in range(4):
        crowded.add(Message(role="user", content=(TextPart(f"q{i}", extra=mark),)))
        crowded.add({"role": "assistant", "content": f"a{i}"})
    assert "cache_control" not in crowded.context().request()  # the caller's four leave no place for it


def test_cache_options_of_the_wrong_kind_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="cache_ttl"):
        Memory("claude-sonnet-4-5", cache_ttl="2h")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cache_breakpoints"):
        Memory("claude-sonnet-4-5", cache_breakpoints="sometimes")  # type: ignore[arg-type]


_ttls = st.sampled_from([None, "5m", "1h"])


@given(
    marks=st.lists(st.tuples(st.booleans(), _ttls), min_size=1, max_size=8),
    system_ttl=st.sampled_from(["none", "5m", "1h"]),
    tool_ttl=st.sampled_from(["none", "5m", "1h"]),
    asked=_ttls,
    automatic=st.booleans(),
)
@settings(max_examples=examples(200), deadline=None)
def test_any_mix_of_the_callers_marks_and_convmems_stays_within_four_and_in_lifetime_order(
    marks: list[tuple[bool, str | None]], system_ttl: str, tool_ttl: str, asked: Any, automatic: bool
) -> None:
    """Whatever the caller marked (in lifetime order, as the API wants), the request stays valid."""
    order = {"none": 3, "1h": 2, "5m": 1}
    tool: dict[str, Any] = {"name": "t", "input_schema": {"type": "object"}}
    if tool_ttl != "none":
        tool["cache_control"] = {"type": "ephemeral", "ttl": tool_ttl}
    memory = Memory(
        "claude-sonnet-4-5",
        tools=[tool],
        format="anthropic",
        cache_ttl=asked,
        cache_breakpoints="automatic" if automatic else True,
        max_tokens=50_000,
    )
    system: dict[str, Any] = {"type": "text", "text": "rules"}
    callers = tool_ttl != "none"
    if system_ttl != "none" and order[system_ttl] <= order[tool_ttl]:  # the caller's own marks keep the API's order
        system["cache_control"] = {"type": "ephemeral", "ttl": system_ttl}
        callers += 1
    memory.add({"role": "system", "content": [system]})
    ceiling = min(order[tool_ttl], order[system_ttl])
    for i, (marked, ttl) in enumerate(marks):
        if marked and order[ttl or "5m"] <= ceiling:
            ceiling = order[ttl or "5m"]
            callers += 1
            control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
            memory.add(
                Message(role="user", content=(TextPart(f"q{i}", extra={"anthropic": {"cache_control": control}}),))
            )
        else:
            memory.add({"role": "user", "content": f"q{i}"})
        memory.add({"role": "assistant", "content": f"a{i}"})
    context = memory.context()
    request = context.request()
    blocks = _anthropic_blocks(request)
    ranks = [_rank(b) for b in blocks]
    if callers <= 4:
        assert len(blocks) + ("cache_control" in request) <= 4
    assert ranks == sorted(ranks, reverse=True), ranks
    if "cache_control" in request:
        assert _rank(request) <= min(ranks, default=2)
    _check_anthropic(context)
