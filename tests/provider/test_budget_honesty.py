"""Budget honesty (issue 13): ``account.total`` is an independent count of exactly the request sent.

For Chat Completions the count is recomputed from the rendered dicts alone, by the published
formula applied to every field sent (refusal, function_call, names, moved tool images ...), and
must equal the account. For Anthropic and Responses, whose requests the counter prices by the
same formula on the messages, every text sent must fit in the account.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory, Message
from convmem.messages import ImagePart, TextPart
from convmem.tokens._vocab import load_encoding

from .._quick import examples

_ENC = load_encoding("o200k_base")
_LOW, _UNKNOWN_SIZE = 85, 1445  # a low-detail image; a high/auto one of unknown size (the tile formula's ceiling)


def n(text: str) -> int:
    return len(_ENC.encode_ordinary(text))


def chat_count(messages: list[dict[str, Any]]) -> int:
    """The OpenAI cookbook formula over every field of the rendered messages (no convmem code)."""
    total = 3  # reply priming
    for d in messages:
        total += 3 + n(d["role"])
        content = d.get("content")
        if isinstance(content, str):
            total += n(content)
        for part in content if isinstance(content, list) else ():
            if part["type"] in ("text", "refusal"):
                total += n(part[part["type"]])
            elif part["type"] == "image_url":
                total += _LOW if part["image_url"].get("detail") == "low" else _UNKNOWN_SIZE
            else:
                raise AssertionError(f"unexpected part {part['type']}")
        if "name" in d:
            total += n(d["name"]) + 1
        if "tool_call_id" in d:
            total += n(d["tool_call_id"])
        calls = d.get("tool_calls", [])
        total += sum(n(c["function"]["name"]) + n(c["function"]["arguments"]) + 5 for c in calls)
        total += 16 if len(calls) > 1 else 0
        if d.get("refusal"):
            total += n(d["refusal"])
        if "function_call" in d:
            total += n(d["function_call"]["name"]) + n(d["function_call"]["arguments"])
        unexpected = set(d) - {"role", "content", "name", "tool_call_id", "tool_calls", "refusal", "function_call"}
        assert not unexpected, f"sent but not priced by the formula: {unexpected}"
    return total


def sent_texts(value: Any) -> list[str]:
    """Every text a request carries (message text, refusals, thinking, summaries, call names and arguments)."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("text", "refusal", "thinking", "arguments", "name", "content", "output") and isinstance(
                item, str
            ):
                out.append(item)
            elif key == "input" and isinstance(item, dict):
                out.append(json.dumps(item))
            else:
                out += sent_texts(item)
    elif isinstance(value, list):
        for item in value:
            out += sent_texts(item)
    return out


_words = st.text(alphabet="abcdefgh ijk.,:0123456789é", min_size=0, max_size=30)
_ids = st.sampled_from(["c1", "functions.get_weather:0", "call_9"])


@st.composite
def histories(draw: st.DrawFn) -> list[list[Any]]:
    """Batches of provider dicts and Messages: text, names, images, refusals, legacy function calls,
    reply-only keys, parallel calls, and tool results with images."""
    batches: list[list[Any]] = []
    for turn in range(draw(st.integers(1, 5))):
        user: dict[str, Any] = {"role": "user", "content": draw(_words) or "?"}
        if draw(st.booleans()):
            user["name"] = "ada"
        if draw(st.booleans()):
            detail = draw(st.sampled_from([None, "low", "high", "original"]))
            image = {"url": "https://x.example/i.png", **({"detail": detail} if detail else {})}
            user["content"] = [{"type": "text", "text": draw(_words)}, {"type": "image_url", "image_url": image}]
        batches.append([user])
        kind = draw(st.sampled_from(["text", "refusal", "function_call", "calls"]))
        reply: dict[str, Any] = {"role": "assistant", "content": draw(_words)}
        if draw(st.booleans()):
            reply |= {"annotations": [], "refusal": None, "audio": None, "x_vendor": {"k": draw(_words)}}
        if kind == "refusal":
            reply |= {"content": None, "refusal": draw(_words) or "no"}
        elif kind == "function_call":
            reply |= {
                "content": None,
                "function_call": {"name": "lookup", "arguments": json.dumps({"q": draw(_words)})},
            }
        elif kind == "calls":
            ids = [f"{i}_{turn}" for i in draw(st.lists(_ids, min_size=1, max_size=3, unique=True))]
            reply["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": "w", "arguments": json.dumps({"a": draw(_words)})}}
                for i in ids
            ]
            results: list[Any] = []
            for i in ids:
                if draw(st.booleans()):
                    parts: tuple[Any, ...] = (ImagePart(url="https://x.example/r.png", detail="low"),)
                    if draw(st.booleans()):
                        parts = (TextPart(draw(_words)), *parts)
                    results.append(Message(role="tool", tool_call_id=i, content=parts))
                else:
                    results.append({"role": "tool", "tool_call_id": i, "content": draw(_words)})
            batches.append([reply])
            batches.append(results)
            continue
        batches.append([reply])
    return batches


@settings(max_examples=examples(60), deadline=None)
@given(histories())
def test_account_total_is_the_count_of_the_request_sent(batches: list[list[Any]]) -> None:
    memory = Memory("gpt-4o", max_tokens=100_000)
    for batch in batches:
        memory.add_many(batch)
    chat = memory.context(format="openai")
    assert chat.account.total == chat_count(chat.messages)
    for fmt in ("anthropic", "responses"):
        ctx = memory.context(format=fmt)
        sent = sum(n(t) for t in sent_texts([ctx.system, ctx.messages]))
        assert sent <= ctx.account.total, fmt


def test_the_issue_example_refusal_is_counted() -> None:
    memory = Memory("gpt-4o", max_tokens=10_000)
    memory.add({"role": "user", "content": "hi"})
    refusal = "no " * 2100
    memory.add({"role": "assistant", "content": None, "refusal": refusal})
    ctx = memory.context()
    assert ctx.messages[-1]["refusal"] == refusal
    assert ctx.account.total == chat_count(ctx.messages) > n(refusal)
