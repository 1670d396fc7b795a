"""Tool definitions in the budget and in the request (issue 26, deliver 4).

The counts are checked against what the providers publish, never against convmem's own code: the
OpenAI cookbook's formula (written out again here from the cookbook) and the ``prompt_tokens`` OpenAI's
API reported for the cookbook's own request; Anthropic's tool-use system prompt table. The shapes are
checked against the installed SDKs' request types, made strict, for every member of their tool unions.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import NotRequired, Required, is_typeddict

from convmem import Memory
from convmem.errors import ConfigurationError
from convmem.formats.tool_definitions import parse_tools, render_tools
from convmem.tokens._vocab import load_encoding

from ._quick import examples
from .provider.strict import check
from .validators import validate_context

_O200K, _CL100K = load_encoding("o200k_base"), load_encoding("cl100k_base")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}


# -- the cookbook's formula, written out again (no convmem code) --------------------------------


def cookbook_tools(tools: list[dict[str, Any]], encoding: Any, func_init: int) -> int:
    """``num_tokens_for_tools`` of OpenAI's cookbook, over Chat or Responses function tools."""
    prop_init, prop_key, enum_init, enum_item, func_end = 3, 3, -3, 3, 12

    def n(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    total = 0
    for tool in tools:
        function = tool.get("function", tool)
        total += func_init
        description = function.get("description", "")
        if description.endswith("."):
            description = description[:-1]
        total += n(function["name"] + ":" + description)
        properties = (function.get("parameters") or {}).get("properties") or {}
        if properties:
            total += prop_init
            for key, schema in properties.items():
                total += prop_key
                if "enum" in schema:
                    total += enum_init
                    for item in schema["enum"]:
                        total += enum_item + n(item)
                p_description = schema.get("description", "")
                if p_description.endswith("."):
                    p_description = p_description[:-1]
                total += n(f"{key}:{schema['type']}:{p_description}")
    return total + func_end if tools else 0


def chat_text_count(messages: list[dict[str, Any]], encoding: Any) -> int:
    """The cookbook's message formula for plain-text Chat messages."""
    n = encoding.encode_ordinary
    return 3 + sum(3 + len(n(m["role"])) + len(n(m["content"])) for m in messages)


# -- what OpenAI's API reported -------------------------------------------------------------------


@pytest.mark.parametrize(("model", "reported"), [("gpt-4o", 101), ("gpt-4o-mini", 101), ("gpt-4", 105)])
def test_the_cookbooks_request_counts_what_openais_api_reported(model: str, reported: int) -> None:
    """The cookbook sent these two messages with the weather tool; the API answered these prompt_tokens."""
    memory = Memory(model, tools=[WEATHER], max_tokens=8000)
    memory.add(
        {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."}
    )
    memory.add({"role": "user", "content": "What's the weather like in San Francisco?"})
    context = memory.context()
    assert context.tokens == reported
    assert context.account.exact
    assert context.request()["tools"] == [WEATHER]
    assert memory.context(format="responses").tokens == reported  # the same formula for Responses' flat tools


# -- the property: the account is the formula on the rendered request ------------------------------

_words = st.text(alphabet="abcdefgh ijk.,:0123456789é", min_size=0, max_size=24)
_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=12)


@st.composite
def flat_tools(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chat function tools within the formula's reach: properties with a type, a description, string enums."""
    tools = []
    for name in draw(st.lists(_names, min_size=1, max_size=4, unique=True)):
        properties: dict[str, Any] = {}
        for key in draw(st.lists(_names, max_size=4, unique=True)):
            schema: dict[str, Any] = {"type": draw(st.sampled_from(["string", "integer", "boolean", "number"]))}
            if draw(st.booleans()):
                schema["description"] = draw(_words)
            if draw(st.booleans()):
                schema["enum"] = draw(st.lists(_words, min_size=1, max_size=3))
            properties[key] = schema
        function: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            function["description"] = draw(_words)
        if properties or draw(st.booleans()):
            function["parameters"] = {"type": "object", "properties": properties, "required": list(properties)[:1]}
        tools.append({"type": "function", "function": function})
    return tools


@given(
    tools=flat_tools(),
    turns=st.lists(st.tuples(_words, _words), min_size=1, max_size=12),
    budget=st.integers(600, 3000),
    model=st.sampled_from(["gpt-4o", "gpt-4"]),
)
@settings(max_examples=examples(150), deadline=None)
def test_with_tools_the_account_is_the_providers_formula_on_the_request_and_the_budget_holds(
    tools: list[dict[str, Any]], turns: list[tuple[str, str]], budget: int, model: str
) -> None:
    encoding, func_init = (_O200K, 7) if model == "gpt-4o" else (_CL100K, 10)
    memory = Memory(model, tools=tools, max_tokens=budget, max_output_tokens=100)
    memory.add({"role": "system", "content": "You answer."})
    for question, answer in turns:
        memory.add({"role": "user", "content": question or "?"})
        memory.add({"role": "assistant", "content": answer or "."})
    context = memory.context()
    request = context.request()
    assert context.account.tools == cookbook_tools(request["tools"], encoding, func_init)
    assert context.account.total == chat_text_count(request["messages"], encoding) + context.account.tools
    assert context.account.exact
    assert context.account.total + context.account.reserved_output <= budget
    responses = memory.context(format="responses")
    assert responses.account.tools == cookbook_tools(responses.request()["tools"], encoding, func_init)
    for i, tool in enumerate(request["tools"]):
        check(_chat_tool_type(), tool, f"tools[{i}]")
    for i, tool in enumerate(responses.request()["tools"]):
        check(_responses_tool_type(), tool, f"tools[{i}]")


def test_what_the_formula_does_not_read_is_added_and_the_count_says_it_is_an_estimate() -> None:
    nested = {
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book a trip.",
            "parameters": {
                "type": "object",
                "properties": {"legs": {"type": "array", "items": {"type": "object", "properties": {"to": {}}}}},
            },
        },
    }
    memory = Memory("gpt-4o", tools=[nested], max_tokens=8000)
    memory.add({"role": "user", "content": "hi"})
    context = memory.context()
    assert not context.account.exact  # the counter is exact, the tools' count is not
    assert context.account.tools > cookbook_tools([nested], _O200K, 7)  # the nested items are priced too


# -- Anthropic: the tool-use system prompt ----------------------------------------------------------


@pytest.mark.parametrize(("model", "prompt"), [("claude-sonnet-4-5", 346), ("claude-3-opus", 530)])
def test_anthropic_counts_its_tool_use_system_prompt_and_the_definitions(model: str, prompt: int) -> None:
    memory = Memory(model, tools=[WEATHER], format="anthropic", cache_breakpoints=False)
    memory.add({"role": "user", "content": "What's the weather like in San Francisco?"})
    context = memory.context()
    sent = context.request()["tools"]
    assert sent[0]["input_schema"] == WEATHER["function"]["parameters"]  # type: ignore[index]
    definitions = sum(memory.counter.count_text(json.dumps(t, separators=(",", ":"))) for t in sent)
    assert context.account.tools == prompt + definitions
    assert not context.account.exact
    without = Memory(model, format="anthropic", cache_breakpoints=False)
    without.add({"role": "user", "content": "What's the weather like in San Francisco?"})
    assert context.tokens == without.context().tokens + prompt + definitions


def test_anthropic_marks_after_the_tools_and_counts_the_callers_marks_on_tools_and_system() -> None:
    mine = {"name": "lookup", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
    memory = Memory("claude-sonnet-4-5", tools=[WEATHER], format="anthropic", max_tokens=20_000)
    system = {"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}
    memory.add({"role": "system", "content": [system]})
    for i in range(3):
        memory.add({"role": "user", "content": f"q{i}"})
        memory.add({"role": "assistant", "content": f"a{i}"})
    memory.add({"role": "user", "content": "last"})
    request = memory.context().request()
    assert request["tools"][-1]["cache_control"] == {"type": "ephemeral"}  # the tools are cached on their own
    both = memory.context(tools=[WEATHER, mine]).request()
    assert both["tools"][-1]["cache_control"] == {"type": "ephemeral"}  # the caller's, kept
    assert "cache_control" not in both["tools"][0]
    assert _anthropic_marks(both) <= 4
    lazy = {**mine, "defer_loading": True}
    lazy.pop("cache_control")
    deferred = memory.context(tools=[WEATHER, lazy]).request()["tools"]
    assert "cache_control" in deferred[0] and "cache_control" not in deferred[1]  # noqa: PT018


def _anthropic_marks(request: dict[str, Any]) -> int:
    """Every cache_control of a request, the top-level one included."""
    return json.dumps(request).count('"cache_control"')


# -- the window keeps room for the tools; a change of tools -------------------------------------------


def test_eviction_keeps_the_memorys_tools_free_of_the_window() -> None:
    big = [{"type": "function", "function": {"name": f"tool_{i}", "description": "word " * 80}} for i in range(5)]
    memory = Memory("gpt-4o", tools=big, max_tokens=2500, max_output_tokens=200)
    for i in range(60):
        memory.add({"role": "user", "content": f"question {i} " * 10})
        memory.add({"role": "assistant", "content": f"answer {i} " * 10})
        context = memory.context()
        assert context.account.total + context.account.reserved_output <= 2500
        assert not [o for o in context.left_out if o.reason == "budget"]  # evicted ahead, never cut for the turn
    assert context.account.tools > 400


def test_a_change_of_tools_moves_the_cached_prefix_and_the_account_says_so() -> None:
    other = {"type": "function", "function": {"name": "search", "description": "Search the web."}}
    memory = Memory("gpt-4o", tools=[WEATHER], max_tokens=8000)
    memory.add({"role": "system", "content": "You help."})
    memory.add({"role": "user", "content": "hi"})
    first = memory.context()
    assert first.account.breakpoints[0] == first.account.tools  # the tools are the first stable part
    same = memory.context()
    assert not same.account.tools_changed
    assert same.account.reused == same.account.total - same.account.overhead  # tools included
    changed = memory.context(tools=[WEATHER, other])
    assert changed.account.tools_changed
    assert changed.account.reused == 0
    again = memory.context(tools=[WEATHER, other])  # equal tools given again: the same prefix
    assert not again.account.tools_changed
    assert again.account.reused > again.account.tools
    none = memory.context(tools=[])
    assert "tools" not in none.request()
    assert none.account.tools == 0
    assert none.account.tools_changed


def test_a_tool_the_format_cannot_carry_is_left_out_with_why() -> None:
    web = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    memory = Memory("gpt-4o", tools=[WEATHER, web], max_tokens=8000)
    memory.add({"role": "user", "content": "hi"})
    chat = memory.context()
    assert [t["function"]["name"] for t in chat.request()["tools"]] == ["get_current_weather"]
    (out,) = [o for o in chat.left_out if o.reason == "tool_unsupported"]
    assert "web_search" in out.detail
    assert "Anthropic" in out.detail
    anthropic = memory.context(format="anthropic")
    assert web in [{k: v for k, v in t.items() if k != "cache_control"} for t in anthropic.request()["tools"]]
    assert not [o for o in anthropic.left_out if o.reason == "tool_unsupported"]
    validate_context(anthropic)


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ({"type": "function"}, "list of tool definitions"),
        (["not a tool"], r"tools\[0\] must be a JSON object"),
        ([{"type": "function", "function": {"description": "no name"}}], r"tools\[0\]\.function\.name"),
        ([{"type": "function", "name": "f", "parameters": "x"}], r"tools\[0\]\.parameters"),
        ([{"name": "f", "input_schema": {}, "strict": "yes"}], r"tools\[0\]\.strict"),
        ([WEATHER, WEATHER], r"tools\[1\]: a second tool named 'get_current_weather'"),
        ([{"type": "function", "function": {"name": "f"}, "extra": 1}], r"tools\[0\]\.extra"),
        ([{"description": "neither"}], r"tools\[0\] is no tool definition"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"x": float("nan")}}}], "not JSON"),
    ],
)
def test_bad_tools_are_refused_naming_the_tool_and_the_field(tools: Any, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        Memory("gpt-4o", tools=tools)
    memory = Memory("gpt-4o")
    with pytest.raises(ConfigurationError, match=says.replace("tools", r"context\(tools=\.\.\.\)", 1)):
        memory.context(tools=tools)


# -- every member of the SDKs' tool unions ------------------------------------------------------------


def _chat_tool_type() -> Any:
    from openai.types.chat import ChatCompletionToolUnionParam

    return ChatCompletionToolUnionParam


def _responses_tool_type() -> Any:
    from openai.types.responses import ToolParam

    return ToolParam


def _anthropic_tool_type() -> Any:
    from anthropic.types import ToolUnionParam

    return ToolUnionParam


UNIONS = {"openai": _chat_tool_type, "responses": _responses_tool_type, "anthropic": _anthropic_tool_type}


def minimal(tp: Any) -> Any:
    """The smallest value of a request type: each required key of a TypedDict, the first alternative of a union."""
    origin = get_origin(tp)
    if origin in (Required, NotRequired, typing.Required, typing.NotRequired, typing.Annotated):
        return minimal(get_args(tp)[0])
    if origin is Union or origin is type(int | None):
        alternatives = [a for a in get_args(tp) if a is not type(None)]
        requests = [a for a in alternatives if is_typeddict(a) or get_origin(a) is not None or a in (str, int, bool)]
        return minimal((requests or alternatives)[0])
    if origin is Literal:
        return get_args(tp)[0]
    if is_typeddict(tp):
        hints = get_type_hints(tp, include_extras=True)
        required = {k for k, h in hints.items() if get_origin(h) in (Required, typing.Required)}
        if tp.__total__:
            required |= {k for k, h in hints.items() if get_origin(h) not in (NotRequired, typing.NotRequired)}
        return {key: minimal(hints[key]) for key in sorted(required)}
    if tp is str:
        return "x"
    if tp is bool:
        return False
    if tp in (int, float):
        return 1
    if origin in (dict, Mapping) or tp in (dict, object):
        return {}
    return []  # lists, iterables, sequences


def _members() -> list[tuple[str, Any]]:
    out = []
    for fmt, union in UNIONS.items():
        for member in get_args(union()):
            out.append((fmt, member))
    return out


@pytest.mark.parametrize(("fmt", "member"), _members(), ids=lambda v: getattr(v, "__name__", str(v)))
def test_every_member_of_the_sdk_tool_unions_is_taken_sent_back_as_given_and_refused_only_elsewhere(
    fmt: str, member: Any
) -> None:
    tool = minimal(member)
    check(UNIONS[fmt](), tool)  # the instance is a valid request tool
    (parsed,) = parse_tools([tool])
    assert parsed.format == fmt
    own, refused = render_tools([parsed], fmt)
    assert own == [tool]  # sent back as given
    assert not refused
    for other, union in UNIONS.items():
        if other == fmt:
            continue
        rendered, refused = render_tools([parsed], other)
        if parsed.native is None:  # a function: the other format's own shape
            check(union(), rendered[0], f"{fmt}->{other}")
        else:
            assert rendered == []
            assert refused[0].tool is parsed


def test_a_function_moves_between_the_formats_without_losing_its_schema() -> None:
    (chat,) = parse_tools([WEATHER])
    schema = WEATHER["function"]["parameters"]  # type: ignore[index]
    (anthropic,), _ = render_tools([chat], "anthropic")
    assert anthropic == {"name": "get_current_weather", "description": chat.description, "input_schema": schema}
    (responses,), _ = render_tools(parse_tools([anthropic]), "responses")
    assert responses == {
        "type": "function",
        "name": "get_current_weather",
        "description": chat.description,
        "parameters": schema,
        "strict": False,  # not strict unless it says so: Responses would default to strict
    }
    (back,), _ = render_tools(parse_tools([responses]), "openai")
    assert back == {**WEATHER, "function": {**WEATHER["function"], "strict": False}}  # type: ignore[dict-item]


def test_tools_that_send_the_same_keep_the_prefix_and_still_say_what_was_left_out() -> None:
    web = {"type": "web_search_20250305", "name": "web_search"}
    memory = Memory("gpt-4o", tools=[WEATHER], max_tokens=8000)
    memory.add({"role": "user", "content": "hi"})
    first = memory.context()
    with_web = memory.context(tools=[WEATHER, web])  # Chat sends the same tools: the same prefix
    assert not with_web.account.tools_changed
    assert with_web.account.tools == first.account.tools
    assert [o.reason for o in with_web.left_out] == ["tool_unsupported"]
    assert not memory.context().left_out  # the memory's own again: nothing left out


def test_tools_are_counted_once_however_the_memorys_and_a_requests_tools_alternate() -> None:
    from convmem.policy.controls import ToolsForRequest
    from convmem.tokens import counter_for, lookup_model

    class Counting:
        def __init__(self) -> None:
            self.inner, self.calls = counter_for("gpt-4o"), 0
            self.encoding = self.inner.encoding

        def count_text(self, text: str) -> int:
            self.calls += 1
            return self.inner.count_text(text)

    counter = Counting()
    tools = ToolsForRequest(counter, lookup_model("gpt-4o"))  # type: ignore[arg-type]
    own = parse_tools([WEATHER])
    other = {"type": "function", "function": {"name": "now"}}
    first = tools(own, "openai")
    seen = []
    for _ in range(5):
        assert tools(own, "openai") == first
        tools(parse_tools([WEATHER, other]), "openai")  # a request's own tools, parsed anew each time
        assert tools(parse_tools([WEATHER]), "openai").tokens == first.tokens  # equal tools: the same count
        seen.append(counter.calls)
    assert len(set(seen)) == 1  # after the first round, nothing is counted again
