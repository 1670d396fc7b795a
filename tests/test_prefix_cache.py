"""Prompt-cache-stable contexts: what an add without eviction leaves unchanged, where blocks go, the account.

Providers bill the start of a request that repeats the previous request at a discount, so a memory
must not rewrite the early part of its request from turn to turn (issue 14), and a block must never
be sent with a higher role than its position says (issue 13).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.formats.anthropic import _marks as _breakpoints
from convmem.longterm import StaticBlock
from convmem.longterm.blocks.base import Turn
from convmem.messages import Message, TextPart

from ._quick import examples
from .validators import validate_anthropic, validate_context

FORMATS = ("openai", "anthropic", "responses")


class PerTurn:
    """A per-turn block (like recall): its text depends on the turn's query only."""

    per_turn = True
    priority = 3
    max_tokens = None

    def __init__(self, position: str = "user", words: int = 3) -> None:
        self.name, self.position, self.words = "recall", position, words

    def render(self, query: str | None) -> str:
        return self.render_turn(Turn(query))

    def render_turn(self, turn: Turn) -> str:
        return f"recalled for {turn.query!r}: " + "memo " * self.words if turn.query else ""


def flat(ctx: Any) -> list[Any]:
    """A request as a list of its pieces in order, as a provider's cache sees it.

    Text parts become ``("text", text)`` in every format (a string content is one text part), and
    ``cache_control`` marks are dropped: they place breakpoints and are not part of the cached text.
    """
    out: list[Any] = []
    system = ctx.system
    if system:
        for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
            out.append(("text", block["text"]))
        out.append("end of system")
    for item in ctx.messages:
        # Responses takes a message item with or without ``"type": "message"`` alike.
        head = {
            k: v for k, v in item.items() if k not in ("content", "cache_control") and (k, v) != ("type", "message")
        }
        out.append(("message", json.dumps(head, sort_keys=True)))
        content = item.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for part in parts:
            if "text" in part and part.get("type") in ("text", "input_text", "output_text"):
                out.append(("text", part["text"]))
            else:
                out.append(
                    ("part", json.dumps({k: v for k, v in part.items() if k != "cache_control"}, sort_keys=True))
                )
    return out


def block_index(pieces: list[Any]) -> int | None:
    """Where the per-turn block (rendered in its ``<recall>`` tags) is, if anywhere."""
    return next((i for i, p in enumerate(pieces) if p[0] == "text" and p[1].startswith("<recall>")), None)


# A script of steps: a user turn, a plain reply, or a tool loop (a call, then its results one by one).
step = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 30)),
    st.tuples(st.just("assistant"), st.integers(1, 30)),
    st.tuples(st.just("tools"), st.integers(1, 3)),
)


def messages_of(script: list[tuple[str, int]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for n, (kind, size) in enumerate(script):
        if kind == "tools":
            calls = [
                {"id": f"call_{n}_{i}", "type": "function", "function": {"name": "look", "arguments": "{}"}}
                for i in range(size)
            ]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out += [{"role": "tool", "tool_call_id": c["id"], "content": f"result {c['id']}"} for c in calls]
        else:
            out.append({"role": kind, "content": f"{kind} {n} " + "word " * size})
    return out


def contexts(memory: Memory, script: list[tuple[str, int]]) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """Play ``script`` into ``memory``; after each message that completes a turn, its context in each format
    (checked by the provider's rules), with the message."""
    for message in messages_of(script):
        memory.add(message)
        if memory.pending_tool_calls:
            continue
        for fmt in FORMATS:
            ctx = memory.context(format=fmt)
            validate_context(ctx)
            yield message, fmt, ctx


@settings(max_examples=examples(40), deadline=None)
@given(script=st.lists(step, min_size=1, max_size=12), system_block=st.booleans())
def test_an_add_without_eviction_changes_nothing_before_the_newest_unit(
    script: list[tuple[str, int]], system_block: bool
) -> None:
    blocks: list[Any] = [PerTurn()]
    if system_block:
        blocks.insert(0, StaticBlock("persona", "Be brief.", priority=0))
    memory = Memory(model="gpt-4o", max_tokens=100_000, max_output_tokens=1000, blocks=blocks)
    memory.add({"role": "system", "content": "You are a test."})
    previous: dict[str, Any] = {}
    for message, fmt, ctx in contexts(memory, script):
        assert not any(o.reason in ("archived", "budget") for o in ctx.left_out)  # no eviction
        pieces = flat(ctx)
        before = previous.get(fmt)
        if before is not None:
            old_ctx, old_pieces = before
            carried = block_index(old_pieces)
            # Only a new user message moves the per-turn block, and only when what followed the older
            # message is short (else that message keeps it: Window.carry); everything before it stays.
            moved = message["role"] == "user" and carried is not None and pieces[: len(old_pieces)] != old_pieces
            cut = carried if moved else len(old_pieces)
            assert pieces[:cut] == old_pieces[:cut], fmt
            sent_before = old_ctx.account.total - old_ctx.account.overhead
            if cut == len(old_pieces):
                assert ctx.account.reused == sent_before
            else:
                assert ctx.account.reused in old_ctx.account.breakpoints
                assert 0 < ctx.account.reused < sent_before
        previous[fmt] = (ctx, pieces)


def test_the_per_turn_block_stays_on_the_user_message_through_a_tool_loop() -> None:
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[PerTurn()])
    memory.add({"role": "user", "content": "weather?"})
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    memory.add_many([{"role": "assistant", "content": None, "tool_calls": [call]}])
    memory.add({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
    for fmt in FORMATS:
        ctx = memory.context(format=fmt)
        text = json.dumps(ctx.messages)
        assert "recalled for 'weather?'" in text
        assert "recalled" not in json.dumps(ctx.system or "")
        users = [m for m in ctx.messages if m.get("role") == "user"]
        assert "recalled" in json.dumps(users[0])
    ctx = memory.context()
    assert ctx.messages[0]["content"][0]["text"].startswith("<recall>\nrecalled for 'weather?'")
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "tool"]


@settings(max_examples=examples(60), deadline=None)
@given(
    budget=st.integers(150, 900),
    words=st.integers(1, 400),
    opening=st.sampled_from(["user", "assistant", "tools"]),
    turns=st.integers(0, 12),
)
def test_a_user_block_never_gains_the_system_role(budget: int, words: int, opening: str, turns: int) -> None:
    """Cut to fit, moved past a left-out user message, or with no user message at all: never in a system message."""
    blocks = [PerTurn(words=words), StaticBlock("notes", "note " * words, position="user", priority=4)]
    memory = Memory(model="gpt-4o", max_tokens=budget, max_output_tokens=50, blocks=blocks)
    memory.add({"role": "system", "content": "sys"})
    if opening == "tools":
        call = {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        memory.add_many([{"role": "assistant", "content": None, "tool_calls": [call]}])
        memory.add({"role": "tool", "tool_call_id": "c0", "content": "out " * 10})
    else:
        memory.add({"role": opening, "content": "open " * 5})
    for i in range(turns):
        memory.add({"role": "user" if i % 2 else "assistant", "content": f"t{i} " + "x " * (i * 7 % 40)})
    for fmt in FORMATS:
        ctx = memory.context(format=fmt)
        system_text = json.dumps(ctx.system or "") + json.dumps(
            [m for m in ctx.messages if m.get("role") in ("system", "developer")]
        )
        assert "memo" not in system_text, fmt
        assert "note " not in system_text, fmt
        assert ctx.tokens <= budget - 50
        if fmt == "anthropic":
            validate_anthropic(ctx.system, ctx.messages)


def test_a_per_turn_system_block_goes_after_the_summary_and_the_stable_blocks_before_it() -> None:
    blocks = [PerTurn(position="system"), StaticBlock("persona", "steady")]
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=blocks)
    memory.add({"role": "system", "content": "pinned"})
    memory.add({"role": "user", "content": "hello"})
    ctx = memory.context()
    systems = [m["content"] for m in ctx.messages if m["role"] == "system"]
    assert systems[0] == "pinned"
    assert "steady" in systems[1]
    assert "recalled" in systems[2]
    # The stable part ends before the per-turn block: the breakpoints end the pinned and the stable system part.
    persona = memory.counter.count_message(Message(role="system", content="<persona>\nsteady\n</persona>"))
    assert ctx.account.breakpoints == (ctx.account.pinned, ctx.account.pinned + persona)


def anthropic_marks(ctx: Any) -> list[str]:
    """Where the cache_control marks are: "system" or the role of the message, in order."""
    where = []
    for block in ctx.system if isinstance(ctx.system, list) else []:
        if "cache_control" in block:
            where.append("system")
    for message in ctx.messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if "cache_control" in block:
                where.append(message["role"])
    return where


def test_anthropic_breakpoints_end_the_stable_parts_and_can_be_turned_off() -> None:
    blocks = [StaticBlock("persona", "steady"), PerTurn()]
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=blocks)
    memory.add({"role": "system", "content": "pinned"})
    for i in range(3):
        memory.add({"role": "user", "content": f"question {i}"})
        memory.add({"role": "assistant", "content": f"answer {i}"})
    memory.add({"role": "user", "content": "question 3"})
    ctx = memory.context(format="anthropic")
    # The pinned prompt, the system part, and the last message before the one carrying the per-turn block.
    assert anthropic_marks(ctx) == ["system", "system", "assistant"]
    assert ctx.messages[-2]["content"][-1]["text"] == "answer 2"
    assert "cache_control" not in json.dumps(ctx.messages[-1])
    assert len(ctx.account.breakpoints) == 3
    validate_anthropic(ctx.system, ctx.messages)
    # Inside a tool loop, the whole request is resent by the next call: its end is marked too.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    memory.add_many([{"role": "assistant", "content": None, "tool_calls": [call]}])
    memory.add({"role": "tool", "tool_call_id": "c1", "content": "done"})
    ctx = memory.context(format="anthropic")
    assert len(anthropic_marks(ctx)) == 4
    assert ctx.messages[-1]["content"][-1].get("cache_control") == {"type": "ephemeral"}
    off = Memory(model="gpt-4o", max_tokens=8000, blocks=blocks, cache_breakpoints=False)
    off.add({"role": "user", "content": "hi"})
    ctx = off.context(format="anthropic")
    assert anthropic_marks(ctx) == []
    assert isinstance(ctx.system, str)
    assert ctx.account.breakpoints  # the account still says where the stable parts end


def test_the_callers_own_cache_control_marks_count_toward_the_limit_of_four() -> None:
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[StaticBlock("persona", "steady"), PerTurn()])
    memory.add({"role": "system", "content": "pinned"})
    for i in range(3):
        mark = {"anthropic": {"cache_control": {"type": "ephemeral"}}}
        memory.add(Message(role="user", content=(TextPart(f"q{i}", extra=mark),)))
        memory.add({"role": "assistant", "content": f"a{i}"})
    memory.add({"role": "user", "content": "last"})
    ctx = memory.context(format="anthropic")
    assert len(anthropic_marks(ctx)) == _breakpoints.MAX_BREAKPOINTS
    assert anthropic_marks(ctx).count("user") == 3  # the caller's own are all kept


def test_mark_puts_cache_control_on_the_last_rendered_block() -> None:
    from convmem.formats.anthropic._render import to_anthropic
    from convmem.messages import ToolCall

    text = _breakpoints.mark(Message(role="user", content="hi"))
    assert text is not None
    assert to_anthropic([text]).messages[0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert _breakpoints.mark(text) is None  # already marked: no second mark
    calls = Message(role="assistant", content="", tool_calls=(ToolCall("c1", "f", "{}"),))
    marked = _breakpoints.mark(calls)
    assert marked is not None
    assert marked.tool_calls[-1].extra["anthropic"]["cache_control"]
    parts = Message(role="user", content=(TextPart("a"), TextPart("b")))
    marked = _breakpoints.mark(parts)
    assert marked is not None
    assert not parts.content[-1].extra  # type: ignore[union-attr]
    assert marked.content[-1].extra["anthropic"]["cache_control"]  # type: ignore[union-attr]
    assert _breakpoints.mark(Message(role="assistant", content="")) is None


def test_reused_counts_the_prefix_shared_with_the_previous_context_of_the_same_format() -> None:
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[PerTurn()])
    memory.add({"role": "system", "content": "pinned"})
    memory.add({"role": "user", "content": "one"})
    first = memory.context()
    assert first.account.reused == 0  # nothing before it
    assert memory.context().account.reused == first.account.total - first.account.overhead  # the same request
    assert memory.context(format="anthropic").account.reused == 0  # its own format's first
    memory.add({"role": "assistant", "content": "two"})
    memory.add({"role": "user", "content": "three"})
    ctx = memory.context()
    assert ctx.account.reused == first.account.pinned  # the block moved off "one": only the system part is kept
    memory.stats()  # a stats() call builds a context but is no request: it does not move the reference
    assert memory.context().account.reused == ctx.account.total - ctx.account.overhead


def test_eviction_keeps_room_for_the_blocks_claim() -> None:
    from convmem.longterm import RecallBlock
    from convmem.longterm.recall.index import RecallIndex

    index = RecallIndex()
    memory = Memory(model="gpt-4o", max_tokens=1500, blocks=[RecallBlock(index, share=0.2)], sinks=[index], user_id="u")
    for i in range(80):
        memory.add({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about topic {i % 7} " * 4})
        ctx = memory.context()
        assert not any(o.reason == "budget" for o in ctx.left_out)  # the window is never squeezed turn by turn
    assert memory._core.limit() <= 1500 - memory.reserved_output - int(0.2 * (1500 - memory.reserved_output))


@pytest.mark.parametrize("fmt", FORMATS)
def test_blocks_ride_a_trailing_user_message_when_no_user_message_is_left(fmt: str) -> None:
    memory = Memory(model="gpt-4o", max_tokens=8000, blocks=[PerTurn()])
    memory.add({"role": "assistant", "content": "I start."})
    ctx = memory.context("what now?")
    assert "recalled for 'what now?'" in json.dumps(ctx.messages)
    bare = Memory(model="gpt-4o", max_tokens=8000, blocks=[StaticBlock("notes", "n1", position="user")])
    bare.add({"role": "assistant", "content": "I start."})
    ctx = bare.context(format=fmt)
    assert "n1" in json.dumps(ctx.messages[-1])
    assert "n1" not in json.dumps(ctx.system or "")
