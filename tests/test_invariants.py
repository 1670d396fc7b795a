"""DESIGN.md invariants 1-5 under random conversations, every strategy and many budgets."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import Memory, Message, ToolCall
from convmem.formats.openai import from_openai
from convmem.messages import ImagePart, TextPart
from convmem.tokens import counter_for

from ._quick import examples
from .fakes import FlakySummarizer, RecordingSummarizer
from .validators import validate_anthropic, validate_openai, validate_responses

COUNTER = counter_for("gpt-4o")
WORDS = st.sampled_from(["alpha", "beta", "tool", "result", "the", "quick", "fox", "42", "über", "日本", "\n"])
text = st.lists(WORDS, min_size=1, max_size=30).map(" ".join)
huge_text = st.integers(200, 3000).map(lambda n: "data row 17, value 3.14; " * n)

event = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("user"), huge_text),
    st.tuples(st.just("image"), text, st.integers(16, 512), st.integers(16, 512)),
    st.tuples(st.just("assistant"), text),
    st.tuples(st.just("system"), text),
    st.tuples(st.just("tools"), st.lists(st.one_of(text, huge_text), min_size=1, max_size=4)),
    st.tuples(st.just("tool_image"), text),  # a tool result with an image renders as two Chat messages
)

config = st.one_of(
    st.tuples(st.just("token_budget"), st.just({})),
    st.tuples(st.just("sliding_window"), st.integers(1, 12).map(lambda n: {"max_messages": n})),
    st.tuples(
        st.just("summary_buffer"), st.integers(80, 600).map(lambda n: {"max_tokens": n, "keep_recent_tokens": n // 2})
    ),
    st.tuples(st.just("compaction"), st.integers(80, 600).map(lambda n: {"max_tokens": n, "keep_turns": 1})),
)


def to_messages(events: list[tuple[Any, ...]]) -> list[list[Message]]:
    """Each event becomes the list of messages added one by one (tool units: call, then each result)."""
    steps: list[list[Message]] = []
    for index, ev in enumerate(events):
        kind = ev[0]
        if kind == "tools":
            calls = tuple(ToolCall(f"call_{index}_{k}", "search", '{"q": "x"}') for k in range(len(ev[1])))
            steps.append([Message(role="assistant", tool_calls=calls)])
            steps.extend(
                [Message(role="tool", tool_call_id=c.id, content=r)] for c, r in zip(calls, ev[1], strict=True)
            )
        elif kind == "tool_image":
            call = ToolCall(f"call_{index}_0", "screenshot", "{}")
            image = ImagePart(url="https://example.com/s.png", detail="low", width=64, height=64)
            steps.append([Message(role="assistant", tool_calls=(call,))])
            steps.append([Message(role="tool", tool_call_id=call.id, content=(TextPart(ev[1]), image))])
        elif kind == "image":
            image = ImagePart(url="https://example.com/a.png", detail="low", width=ev[2], height=ev[3])
            steps.append([Message(role="user", content=(TextPart(ev[1]), image))])
        else:
            steps.append([Message(role=kind, content=ev[1])])
    return steps


def make(config: tuple[str, dict[str, int]], budget: int, flaky: bool) -> Memory:
    name, options = config
    summarizer = None
    if name in ("summary_buffer", "compaction"):
        summarizer = FlakySummarizer({2, 3, 7}) if flaky else RecordingSummarizer()
    return Memory(
        max_tokens=budget,
        max_output_tokens=budget // 10,
        strategy=name,
        strategy_options=options,
        summarizer=summarizer,
    )


def independent_total(messages: list[dict[str, Any]]) -> int:
    return sum(COUNTER.count_message(from_openai(m)) for m in messages) + COUNTER.reply_priming


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(event, min_size=1, max_size=25).filter(lambda evs: sum(e[0] == "system" for e in evs) <= 3),
    config,
    st.integers(700, 6000),
    st.booleans(),
)
def test_invariants_hold_after_every_add(
    events: list[tuple[Any, ...]], cfg: tuple[str, dict[str, int]], budget: int, flaky: bool
) -> None:
    memory = make(cfg, budget, flaky)
    twin = make(cfg, budget, flaky)
    added: list[str] = []
    for step in to_messages(events):
        stored = memory.add_many(step)
        twin.add_many(step)
        added += [m.id or "" for m in stored]
        # 1. Nothing is lost: every message ever added is listed, in order, byte for byte.
        assert [m.id for m in memory.messages()] == added
        ctx = memory.context()
        # 2. Valid for the provider, in every format.
        validate_openai(ctx.messages)
        anthropic = memory.context(format="anthropic")
        validate_anthropic(anthropic.system, anthropic.messages)
        validate_responses(memory.context(format="responses").messages)
        # 3. Within budget, exactly: the model's counter agrees with the account.
        assert ctx.tokens == independent_total(ctx.messages)
        assert ctx.tokens + ctx.account.reserved_output <= budget
        # The window's count of messages without a cached Chat dict, kept as they come and go.
        window = memory._core.window
        assert window.unrendered == sum(r is None for r in window.rendered)
        # 5. Deterministic: the same inputs give the same context.
        assert twin.context().messages == ctx.messages
    stored_text = [m.content for m in memory.messages()]
    assert stored_text == [m.content for step in to_messages(events) for m in step]
