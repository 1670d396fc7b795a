"""Test data for the conformance suite: messages with every field, random conversations, a summarizer.

Everything here is deterministic (or driven by hypothesis), so a failing
example reproduces.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

from ..messages import AudioPart, FilePart, ImagePart, Message, Role, TextPart, ToolCall

__all__ = ["EchoSummarizer", "conversations", "json_values", "messages", "numbered", "rich_messages"]

_T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def numbered(count: int, *, start: int = 0, prefix: str = "m", role: Role = "user") -> list[tuple[Message, int]]:
    """``count`` simple (message, tokens) pairs with ids ``<prefix><n>``."""
    return [
        (
            Message(
                role=role,
                content=f"{prefix} {n}",
                id=f"{prefix}{n}",
                created_at=_T0 + timedelta(seconds=n),
            ),
            5 + n % 7,
        )
        for n in range(start, start + count)
    ]


def rich_messages(prefix: str = "r") -> list[tuple[Message, int]]:
    """Messages that use every field the model has (parts, tool calls, metadata, extra, zones)."""
    paris = ZoneInfo("Europe/Paris")
    call = ToolCall("call_1", "get_weather", '{"city": "Zürich"}', extra={"openai": {"type": "function"}})
    return [
        (Message(role="system", content="You are terse.", id=f"{prefix}0", created_at=_T0), 9),
        (
            Message(
                role="user",
                content=(
                    TextPart("What is this?", extra={"cache": True}),
                    ImagePart(url="https://example.com/a.png", detail="low", width=64, height=48),
                    AudioPart(data="UklGRg==", format="wav"),
                    FilePart(file_id="file_9", filename="a.pdf", media_type="application/pdf"),
                ),
                name="ada",
                metadata={"source": "web", "tags": ["a", 1, None, 2.5]},
                id=f"{prefix}1",
                created_at=datetime(2024, 10, 27, 2, 30, 0, 123456, tzinfo=paris).replace(fold=1),
            ),
            120,
        ),
        (
            Message(
                role="assistant",
                tool_calls=(call,),
                id=f"{prefix}2",
                extra={"anthropic": {"x": [1]}},
                created_at=datetime(2024, 5, 1, 8, 0, 0, 1, tzinfo=timezone(timedelta(hours=-4))),
            ),
            30,
        ),
        (
            Message(
                role="tool",
                tool_call_id="call_1",
                content="21°C, ☀\n\u2028line",
                id=f"{prefix}3",
                created_at=datetime(2024, 5, 1, 12, 0, 1),
            ),
            12,
        ),  # naive on purpose
        (Message(role="assistant", content=(), id=f"{prefix}4", created_at=_T0), 3),
        (Message(role="developer", content="Be kind.", id=f"{prefix}5"), 4),
    ]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)  # the range every store keeps exactly (convmem.limits.MAX_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_maps = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
_zones = st.sampled_from(
    [
        None,
        timezone.utc,
        timezone(timedelta(hours=5, minutes=30)),
        timezone(timedelta(hours=-8)),
        ZoneInfo("America/New_York"),
        ZoneInfo("Asia/Tokyo"),
    ]
)
_when = st.one_of(
    st.none(),
    st.builds(
        lambda dt, tz, fold: dt.replace(tzinfo=tz, fold=fold),
        st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1)),
        _zones,
        st.integers(0, 1),
    ),
)
_text = st.text(max_size=40)
_ident = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
_parts = st.one_of(
    st.builds(TextPart, _text, _maps),
    st.builds(
        ImagePart,
        url=_ident,
        detail=st.sampled_from([None, "auto", "low", "high"]),
        width=st.none() | st.integers(1, 4096),
        height=st.none() | st.integers(1, 4096),
        extra=_maps,
    ),
    st.builds(ImagePart, data=_ident, media_type=st.none() | st.just("image/png")),
    st.builds(AudioPart, _ident, st.sampled_from(["wav", "mp3"]), _maps),
    st.builds(
        FilePart,
        data=st.none() | _ident,
        file_id=_ident,
        url=st.none() | _ident,
        filename=st.none() | _text,
        media_type=st.none() | _text,
        extra=_maps,
    ),
)
_calls = st.lists(
    st.builds(ToolCall, _ident, _ident, st.just('{"a": [1, 2]}'), _maps), max_size=3, unique_by=lambda c: c.id
).map(tuple)


def _message(
    kind: Role,
    content: Any,
    calls: tuple[ToolCall, ...],
    name: str | None,
    meta: dict[str, Any],
    when: datetime | None,
    ident: str | None,
    extra: dict[str, Any],
) -> Message:
    common: dict[str, Any] = {"name": name, "metadata": meta, "created_at": when, "id": ident, "extra": extra}
    if kind == "assistant":
        return Message(role="assistant", content=content, tool_calls=calls, **common)
    if kind == "tool":
        return Message(role="tool", content=content if isinstance(content, str) else "", tool_call_id="c1", **common)
    if kind == "user":
        return Message(role="user", content="" if content is None else content, **common)
    return Message(
        role=kind,
        content=content if isinstance(content, str) else "",
        **common,
    )


messages = st.builds(
    _message,
    st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    st.one_of(st.none(), _text, st.lists(_parts, max_size=3).map(tuple)),
    _calls,
    st.none() | _ident,
    _maps,
    _when,
    st.none() | _ident,
    _maps,
)

_words = st.sampled_from(["alpha", "beta", "tool", "fox", "42", "über", "日本", "the", "quick"])
_sentence = st.lists(_words, min_size=1, max_size=40).map(" ".join)
_event = st.one_of(
    st.tuples(st.just("user"), _sentence),
    st.tuples(st.just("assistant"), _sentence),
    st.tuples(st.just("system"), _sentence),
    st.tuples(st.just("tools"), st.lists(_sentence, min_size=1, max_size=3)),
)


def _steps(events: Sequence[tuple[Any, ...]]) -> list[list[dict[str, Any]]]:
    steps: list[list[dict[str, Any]]] = []
    for index, (kind, body) in enumerate(events):
        if kind == "tools":
            ids = [f"call_{index}_{k}" for k in range(len(body))]
            calls = [{"id": i, "type": "function", "function": {"name": "search", "arguments": "{}"}} for i in ids]
            steps.append([{"role": "assistant", "content": None, "tool_calls": calls}])
            steps.append(
                [{"role": "tool", "tool_call_id": i, "content": text} for i, text in zip(ids, body, strict=True)]
            )
        else:
            steps.append([{"role": kind, "content": body}])
    return steps


#: (steps of OpenAI-style messages, Memory options): each step is added with ``add_many``.
conversations = st.tuples(
    st.lists(_event, min_size=1, max_size=30).map(_steps),
    st.one_of(
        st.builds(lambda b: {"max_tokens": b, "strategy": "token_budget"}, st.integers(200, 600)),
        st.builds(
            lambda b, n: {"max_tokens": b, "strategy": "sliding_window", "strategy_options": {"max_messages": n}},
            st.integers(300, 3000),
            st.integers(1, 8),
        ),
        st.builds(
            lambda b, n: {
                "max_tokens": b,
                "strategy": "summary_buffer",
                "summarizer": EchoSummarizer(),
                "strategy_options": {"max_tokens": n, "keep_recent_tokens": n // 2},
            },
            st.integers(400, 1500),
            st.integers(60, 300),
        ),
    ),
)


class EchoSummarizer:
    """A deterministic summarizer: it keeps count and quotes the newest message."""

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        before = int(previous.split()[1]) if previous else 0
        return f"covers {before + len(messages)} messages; last: {messages[-1].text[:40]!r}"
