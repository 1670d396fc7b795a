"""The phase that renders a context that fits: the order of its messages, and each format's rendering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import ConfigurationError
from convmem.formats.openai import to_openai, to_openai_messages
from convmem.messages import Message, TextPart
from convmem.policy.context import Truncation
from convmem.policy.cut import cut
from convmem.policy.draft import SummaryText, Truncated, first_draft, summary_message
from convmem.policy.render import ordered, render, span

from .._quick import examples
from ._build import WORDS, assistant, block, inputs, request, tools, user, window


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def test_the_order_is_pinned_stable_blocks_per_turn_blocks_summary_window_inputs() -> None:
    built = window(user(1, "hi"), assistant(1, "hello"), pinned=["pin"])
    message = summary_message("before", 0, 0)
    summary = SummaryText("before", 0, 0, WORDS.count_message(message), message)
    blocks = [block("turn", 1, per_turn=True), block("rules", 1), block("recall", 1, position="user")]
    asked = Message(role="user", content="ask")
    assembly = request(built, summary=summary, blocks=blocks, inputs=inputs(asked))
    draft = first_draft(assembly)
    out = ordered(assembly, draft, span(built, draft))
    assert [m.role for m in out[:4]] == ["system", "system", "system", "user"]
    assert _texts(out) == [
        "pin",
        "<rules>\nrules\n</rules>",
        "<turn>\nturn\n</turn>",
        message.text,  # a user note after every system message
        "hi",
        "hello",
        "<recall>\nrecall\n</recall>\nask",  # the input carries the user blocks, as a text part of their own
    ]
    assert out[-1].content == (TextPart("<recall>\nrecall\n</recall>"), TextPart("ask"))


def test_the_carrier_in_the_window_gets_the_blocks_even_with_a_tool_loop_after_it() -> None:
    built = window(user(1, "old"), assistant(1), user(1, "question"), tools(2, 1))
    assembly = request(built, blocks=[block("recall", 1, position="user")])
    draft = first_draft(assembly)
    out = ordered(assembly, draft, span(built, draft))
    assert [m.text for m in out if m.role == "user"] == ["old", "<recall>\nrecall\n</recall>\nquestion"]
    assert out[-1].role == "tool"


def test_without_a_user_message_the_blocks_are_the_last_message() -> None:
    built = window(tools(1, 1))
    assembly = request(built, blocks=[block("recall", 1, position="user")])
    draft = first_draft(assembly)
    out = ordered(assembly, draft, span(built, draft))
    assert out[-1] == Message(role="user", content="<recall>\nrecall\n</recall>")


def test_the_span_counts_the_window_messages_sent() -> None:
    built = window(user(20), assistant(20), user(1), assistant(1), pending=True)
    assembly = request(built)
    draft = first_draft(assembly)
    whole = span(built, draft)
    assert (whole.range, whole.size, whole.end) == ((0, 3), 4, 4)  # the pending call and its result are not sent
    later = span(built, draft._replace(start=2))
    assert (later.range, later.size, later.end) == ((2, 3), 2, 4)
    assert span(window(), first_draft(request(window()))).range is None


def test_a_truncated_context_sends_the_cut_messages() -> None:
    built = window(user(1, "first"), user(1, "second"), pinned=["pin"])
    assembly = request(built, render_openai=to_openai)
    draft = first_draft(assembly)
    cut_pin, cut_newest = Message(role="system", content="p"), Message(role="user", content="cut")
    truncated = draft._replace(truncated=Truncated([cut_pin], [cut_newest], [], (Truncation(2, 3, 3),)))
    messages, *_ = render(assembly, truncated, span(built, truncated))
    assert messages == [
        {"role": "system", "content": "p"},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "cut"},
    ]


def test_anthropic_marks_end_the_messages_they_name() -> None:
    built = window(user(1, "a"), assistant(1, "b"), user(1, "c"), pinned=["pin"])
    assembly = request(built, format="anthropic")
    draft = first_draft(assembly)
    messages, system, *_ = render(assembly, draft, span(built, draft), marks=(2,))
    assert system == "pin"
    marked = {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}
    assert messages[1] == {"role": "assistant", "content": [marked]}
    assert "cache_control" not in str(messages[0]) + str(messages[2])


def test_an_unknown_format_is_refused() -> None:
    built = window(user(1))
    assembly = request(built, format="gemini")
    draft = first_draft(assembly)
    with pytest.raises(ConfigurationError, match="unknown format 'gemini'"):
        render(assembly, draft, span(built, draft))


unit = st.one_of(
    st.integers(1, 30).map(user), st.integers(1, 30).map(assistant), st.integers(1, 30).map(lambda n: tools(2, n))
)


@settings(max_examples=examples(200), deadline=None)
@given(
    units=st.lists(unit, max_size=8),
    pinned=st.lists(st.sampled_from(["be brief", "be kind"]), max_size=2),
    pending=st.booleans(),
    blocks=st.lists(
        st.tuples(st.integers(1, 20), st.sampled_from(["user", "system"]), st.booleans(), st.integers(0, 3)),
        max_size=3,
    ),
    asked=st.lists(st.sampled_from(["user", "assistant"]), max_size=2),
    over=st.integers(0, 120),
)
def test_the_window_cache_renders_what_rendering_every_message_does(
    units: list[list[Message]],
    pinned: list[str],
    pending: bool,
    blocks: list[tuple[int, str, bool, int]],
    asked: list[str],
    over: int,
) -> None:
    """The OpenAI fast path copies the window's cached dicts and renders only the rest: the same messages."""
    built = window(*units, pinned=pinned, pending=pending)
    given = [block(f"b{i}", n, position=p, per_turn=t, priority=q) for i, (n, p, t, q) in enumerate(blocks)]
    asked_messages = [Message(role=role, content=f"{role} asks") for role in asked]  # type: ignore[arg-type]
    cached = request(built, blocks=given, inputs=inputs(*asked_messages), render_openai=to_openai)
    draft = first_draft(cached)
    if over:
        draft = cut(cached, draft, draft.total - over)  # the oldest units may be left out, the blocks move
    sent = span(built, draft)
    fast, system, *_ = render(cached, draft, sent)
    assert system is None
    assert fast == to_openai_messages(ordered(cached, draft, sent))
    assert fast == render(cached._replace(render_openai=None), draft, sent)[0]
