"""A guard while assembly is split into phases: the new assembly gives what the old one gave, byte for byte.

The old ``assemble`` (frozen in ``_before_assembly.py``) and the new one run side by side on every context a
memory builds over random conversations with every kind of block, every format and small budgets (so that
blocks shrink, the oldest units are left out, the summary goes and the irreducible part is truncated); the
contexts, the errors and the layouts they leave for the next turn must be equal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import ContextOverflowError
from convmem.formats.openai import to_openai
from convmem.longterm import StaticBlock
from convmem.longterm.blocks.base import Turn
from convmem.memory import _core
from convmem.messages import Message, ToolCall
from convmem.policy import assembly
from convmem.policy.blockfit import BlockItem, BlockText
from convmem.policy.context import LeftOut
from convmem.policy.units import Entry, Window
from convmem.tokens import counter_for

from .._quick import examples
from ..fakes import RecordingSummarizer
from . import _before_assembly

calls = {"n": 0}


def _both(*args: Any, **kwargs: Any) -> Any:
    """Run the old and the new assembly on the same request; return the new one's context."""
    if args:  # the memory's call: assemble(request, previous)
        request, previous = args[0], args[1] if len(args) > 1 else None
    else:
        previous = kwargs.pop("previous", None)
        request = assembly.Assembly(**kwargs)
    params = request._asdict()
    old_previous = dict(previous) if previous is not None else None
    old, old_error = _run(lambda: _before_assembly.assemble(**params, previous=old_previous))
    new, new_error = _run(lambda: NEW(request, previous))
    assert _error(new_error) == _error(old_error)
    if new_error is not None:
        raise new_error
    assert new == old
    assert _comparable(previous) == _comparable(old_previous)
    calls["n"] += 1
    return new


def _run(build: Any) -> tuple[Any, ContextOverflowError | None]:
    try:
        return build(), None
    except ContextOverflowError as exc:
        return None, exc


def _error(exc: ContextOverflowError | None) -> tuple[str, int | None, int | None] | None:
    return None if exc is None else (str(exc), exc.needed, exc.budget)


NEW = assembly.assemble


def _comparable(previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """The layouts, with the fresh ``object()`` a truncated context's pinned key is (equal to nothing) named."""
    if previous is None:
        return None
    out = {}
    for name, layout in previous.items():
        (key, tokens), *rest = layout.system
        if type(key) is object:
            key = "a truncated context's own key"
        out[name] = layout._replace(system=((key, tokens), *rest))
    return out


@pytest.fixture(autouse=True)
def _side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_core, "assemble", _both)


class PerTurn:
    """A per-turn block (like recall): its text depends on the turn's query only."""

    per_turn = True
    max_tokens = None

    def __init__(self, position: str, words: int, priority: int) -> None:
        self.name, self.position, self.words, self.priority = f"turn_{position}", position, words, priority

    def render(self, query: str | None) -> str:
        return self.render_turn(Turn(query))

    def render_turn(self, turn: Turn) -> str:
        return f"recalled for {turn.query!r}: " + "memo " * self.words if turn.query else ""


class Lines:
    """An itemized block with a reserved share, as RecallBlock renders one."""

    def __init__(self, n: int, share: float, per_turn: bool, position: str) -> None:
        self.lines = [(f"line {r:02d} " + "fact " * (3 + r % 4), r) for r in range(n, 0, -1)]
        self.share, self.per_turn, self.position = share, per_turn, position
        self.name, self.max_tokens, self.priority = f"items_{position}", None, 2

    def render(self, query: str | None) -> str:
        return "\n".join(text for text, _ in self.lines)

    def render_items(self, turn: Turn) -> list[tuple[str, int]]:
        return self.lines


block = st.one_of(
    st.builds(lambda n, p: StaticBlock("rules", "be brief " * n, priority=p), st.integers(1, 60), st.integers(0, 4)),
    st.builds(PerTurn, st.sampled_from(["user", "system"]), st.integers(1, 80), st.integers(1, 4)),
    st.builds(
        Lines, st.integers(1, 12), st.sampled_from([0.0, 0.1, 0.3]), st.booleans(), st.sampled_from(["user", "system"])
    ),
)
step = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 40)),
    st.tuples(st.just("huge"), st.integers(200, 900)),
    st.tuples(st.just("assistant"), st.integers(1, 40)),
    st.tuples(st.just("system"), st.integers(1, 20)),
    st.tuples(st.just("tools"), st.integers(1, 3)),
    st.tuples(st.just("image_tool"), st.integers(1, 5)),
)


def _messages(script: list[tuple[str, int]]) -> Iterator[list[dict[str, Any]]]:
    for n, (kind, size) in enumerate(script):
        if kind in ("tools", "image_tool"):
            calls = [
                {"id": f"call.{n}:{i}", "type": "function", "function": {"name": "look", "arguments": "{}"}}
                for i in range(size if kind == "tools" else 1)
            ]
            yield [{"role": "assistant", "content": None, "tool_calls": calls}]
            for c in calls:
                content: Any = f"result {c['id']} " + "row " * size
                if kind == "image_tool":
                    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
                    content = [{"type": "text", "text": content}, image]
                yield [{"role": "tool", "tool_call_id": c["id"], "content": content}]
        elif kind == "huge":
            yield [{"role": "user", "content": "data row 17, value 3.14; " * size}]
        else:
            yield [{"role": kind, "content": f"{kind} {n} " + "word " * size}]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(step, min_size=1, max_size=14),
    blocks=st.lists(block, max_size=3, unique_by=lambda b: b.name),
    budget=st.integers(150, 2500),
    strategy=st.sampled_from(["token_budget", "sliding_window", "summary_buffer"]),
    overflow=st.sampled_from(["truncate", "raise"]),
    breakpoints=st.booleans(),
    inputs=st.lists(st.sampled_from(["none", "text", "assistant", "two"]), min_size=1, max_size=3),
)
def test_the_phases_assemble_what_the_one_function_did(
    script: list[tuple[str, int]],
    blocks: list[Any],
    budget: int,
    strategy: str,
    overflow: str,
    breakpoints: bool,
    inputs: list[str],
) -> None:
    options: dict[str, Any] = {"sliding_window": {"max_messages": 6}}.get(strategy, {})
    if strategy == "summary_buffer":
        options = {"max_tokens": budget // 2, "keep_recent_tokens": budget // 4}
    memory = Memory(
        model="gpt-4o",
        max_tokens=budget,
        max_output_tokens=budget // 10,
        strategy=strategy,
        strategy_options=options,
        summarizer=RecordingSummarizer() if strategy == "summary_buffer" else None,
        blocks=blocks,
        on_overflow=overflow,
        cache_breakpoints=breakpoints,
    )
    for batch in _messages(script):
        try:
            memory.add_many(batch)
        except ContextOverflowError:
            continue
        for format in ("openai", "anthropic", "responses"):
            for kind in inputs:
                given_input: Any = {
                    "none": None,
                    "text": "what did I say about the fox?",
                    "assistant": {"role": "assistant", "content": "thinking aloud"},
                    "two": [{"role": "user", "content": "first " * 30}, {"role": "user", "content": "and second"}],
                }[kind]
                if memory.pending_tool_calls and given_input is not None:
                    continue
                with contextlib.suppress(ContextOverflowError):
                    memory.context(given_input, format=format)
    assert calls["n"] > 0


# --- the same, called directly on hand-built windows with every parameter varied ---------------------------

COUNTER = counter_for("gpt-4o")
unit_kind = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 120)),
    st.tuples(st.just("assistant"), st.integers(1, 120)),
    st.tuples(st.just("tools"), st.integers(1, 3), st.integers(1, 200)),
)
block_text = st.builds(
    lambda name, words, priority, position, per_turn, items, reserve: BlockText(
        name,
        "\n".join(f"item {r} " + "fact " * words for r in range(items, 0, -1)) if items else "rule " * words,
        priority,
        position,
        tuple(BlockItem(f"item {r} " + "fact " * words, r) for r in range(items, 0, -1)),
        reserve if items else 0,
        per_turn,
    ),
    st.sampled_from(["a", "b", "c", "d"]),
    st.integers(0, 60),
    st.integers(0, 4),
    st.sampled_from(["system", "user"]),
    st.booleans(),
    st.integers(0, 6),
    st.integers(0, 120),
)


def _window(pinned: int, script: list[tuple[Any, ...]], pending: bool, carry: int | None) -> Window:
    window = Window()
    seq = 0

    def push(message: Message) -> None:
        nonlocal seq
        entry = Entry(seq, message, COUNTER.count_message(message))
        if message.role not in ("system", "developer"):
            entry.rendered = to_openai(message)
        window.push(entry)
        seq += 1

    for i in range(pinned):
        push(Message(role="system", content=f"pinned {i} " + "rule " * 5))
    for n, kind in enumerate(script):
        if kind[0] == "tools":
            calls = tuple(ToolCall(f"call_{n}_{i}", "look", "{}") for i in range(kind[1]))
            push(Message(role="assistant", tool_calls=calls))
            for call in calls:
                push(Message(role="tool", tool_call_id=call.id, content="row " * kind[2]))
        else:
            push(Message(role=kind[0], content=f"{kind[0]} {n} " + "word " * kind[1]))
    if pending:
        calls = (ToolCall("open_0", "look", "{}"), ToolCall("open_1", "look", "{}"))
        push(Message(role="assistant", tool_calls=calls))
        push(Message(role="tool", tool_call_id="open_0", content="half"))
    users = [u for u in window.units if u.kind == "user"]
    if carry is not None and len(users) > 1:
        entry = users[carry % (len(users) - 1)].entries[0]
        message = entry.message.replace(content="<recall>kept</recall> " + str(entry.message.content))
        window.carry(entry.seq, message, COUNTER.count_message(message), to_openai(message))
    return window


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pinned=st.integers(0, 2),
    script=st.lists(unit_kind, max_size=10),
    pending=st.booleans(),
    carry=st.none() | st.integers(0, 5),
    blocks=st.lists(block_text, max_size=4, unique_by=lambda b: b.name),
    summary=st.none() | st.integers(1, 150),
    inputs=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.integers(1, 300)), max_size=3),
    budget=st.integers(40, 2500),
    reserve=st.integers(0, 200),
    format=st.sampled_from(["openai", "anthropic", "responses"]),
    overflow=st.sampled_from(["truncate", "raise"]),
    cached=st.booleans(),
    breakpoints=st.booleans(),
    evicted=st.booleans(),
    template=st.booleans(),
)
def test_the_phases_match_on_every_parameter(
    pinned: int,
    script: list[tuple[Any, ...]],
    pending: bool,
    carry: int | None,
    blocks: list[BlockText],
    summary: int | None,
    inputs: list[tuple[str, int]],
    budget: int,
    reserve: int,
    format: str,
    overflow: str,
    cached: bool,
    breakpoints: bool,
    evicted: bool,
    template: bool,
) -> None:
    window = _window(pinned, script, pending, carry)
    summary_text = None
    if summary is not None:
        message = assembly.summary_message("earlier " * summary, 0, 3)
        summary_text = assembly.SummaryText("earlier " * summary, 0, 3, COUNTER.count_message(message), message)
    given_inputs = []
    for role, words in inputs:
        message = Message(role=role, content="input " + "ask " * words)  # type: ignore[arg-type]
        given_inputs.append((message, COUNTER.count_message(message)))
    params: dict[str, Any] = {
        "window": window,
        "counter": COUNTER,
        "budget": budget,
        "reserve": reserve,
        "format": format,
        "summary": summary_text,
        "blocks": blocks,
        "inputs": given_inputs,
        "on_overflow": overflow,
        "evicted": [LeftOut("archived", 4, 90, 0, 3, "evicted")] if evicted else [],
        "render_openai": to_openai if cached and window.unrendered == 0 else None,
        "cache_breakpoints": breakpoints,
    }
    if template:
        params["template"] = lambda bs: " | ".join(f"{b.name}: {b.text}" for b in bs)
    previous: dict[str, Any] = {}
    for turn in range(2):  # the second call measures its reuse against the first's layout
        if turn:
            params["inputs"] = given_inputs[:1]
        with contextlib.suppress(ContextOverflowError):
            _both(**params, previous=previous)
