"""How providers bill a request when its start repeats an earlier one: the model bench/cache.py measures with.

A request is turned into a token sequence the way a chat template lays it out:
each message is a role header, its text (content parts joined in order, tool
calls as JSON) and an end marker, tokenized with o200k_base (exact for OpenAI;
a stand-in for Claude, whose tokenizer is not available offline). Two
requests share a prefix up to the first differing token.

* **OpenAI** caches automatically: a prompt of 1,024 tokens or more is served
  from cache for the longest prefix it shares with a recent request, counted
  in steps of 128 tokens after the first 1,024; cached tokens cost the model's
  cached-input price.
* **Anthropic** caches at ``cache_control`` breakpoints: a request reads the
  longest prefix ending at one of its breakpoints that an earlier request
  wrote (10% of the input price), writes the rest up to its last breakpoint
  (125%), and pays the full price after it. Prefixes under 1,024 tokens are
  not cached. The 20-block lookback and the 5-minute lifetime are not
  modelled (a replay sends every request within seconds).
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convmem.tokens import counter_for

OPENAI_MIN, OPENAI_STEP = 1024, 128
ANTHROPIC_MIN = 1024


class Tokens:
    """o200k_base token ids of strings, memoised (requests repeat most of their text)."""

    def __init__(self) -> None:
        self.encoding = counter_for("gpt-4o").encoding  # type: ignore[attr-defined]
        self.cache: dict[str, tuple[int, ...]] = {}

    def of(self, text: str) -> tuple[int, ...]:
        ids = self.cache.get(text)
        if ids is None:
            ids = self.cache[text] = tuple(self.encoding.encode_ordinary(text))
        return ids


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out = []
    for part in content:
        if isinstance(part, Mapping):
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text"):
                out.append(str(part.get("text", "")))
            elif kind == "tool_result":
                out.append(_text(part.get("content")))
            elif kind == "tool_use":
                out.append(json.dumps({"name": part.get("name"), "input": part.get("input")}, sort_keys=True))
            else:
                out.append(json.dumps(part, sort_keys=True))
        else:
            out.append(str(part))
    return "".join(out)


@dataclass
class Request:
    """A request as segments of text; ``breaks`` holds the indexes of segments that end at a breakpoint."""

    segments: list[str] = field(default_factory=list)
    breaks: set[int] = field(default_factory=set)

    def add(self, text: str, breakpoint: bool = False) -> None:
        self.segments.append(text)
        if breakpoint:
            self.breaks.add(len(self.segments) - 1)


def openai_request(messages: Sequence[Mapping[str, Any]]) -> Request:
    """A Chat Completions ``messages`` list, laid out as its chat template would be."""
    request = Request()
    for m in messages:
        request.add(f"<|start|>{m.get('role')}\n")
        request.add(_text(m.get("content")))
        for call in m.get("tool_calls") or ():
            request.add(json.dumps(call.get("function"), sort_keys=True))
        if m.get("tool_call_id"):
            request.add(f"[{m['tool_call_id']}]")
        request.add("<|end|>")
    return request


def anthropic_request(system: Any, messages: Sequence[Mapping[str, Any]], *, last_breakpoint: bool = False) -> Request:
    """A Messages API request (system, then messages), with its ``cache_control`` breakpoints.

    ``last_breakpoint`` adds one at the end of the request and one at the end of the system prompt, the
    usual hand-placed setup of a memory that places none itself (it is how the peers are given a cache).
    """
    request = Request()
    if isinstance(system, str):
        request.add(system, last_breakpoint)
    elif system:
        for index, block in enumerate(system):
            at_end = last_breakpoint and index == len(system) - 1
            request.add(_text([block]), bool(block.get("cache_control")) or at_end)
    for m in messages:
        request.add(f"<|start|>{m.get('role')}\n")
        content = m.get("content")
        if isinstance(content, str):
            request.add(content)
        else:
            for block in content or ():
                request.add(_text([block]), bool(block.get("cache_control")))
        request.add("<|end|>")
    if last_breakpoint and request.segments:
        request.breaks.add(len(request.segments) - 1)
    return request


@dataclass(frozen=True)
class Bill:
    tokens: int  # the whole request
    reused: int  # tokens shared with the previous request (the prefix)
    openai_cached: int
    openai_usd: float
    anthropic_read: int
    anthropic_written: int
    anthropic_usd: float


@dataclass(frozen=True)
class Prices:
    """USD per million input tokens."""

    openai_input: float
    openai_cached: float
    anthropic_input: float
    anthropic_read: float
    anthropic_write: float


class Biller:
    """Bills a stream of requests of one conversation, in order."""

    def __init__(self, tokens: Tokens, prices: Prices) -> None:
        self.tokens = tokens
        self.prices = prices
        self.previous: tuple[int, ...] = ()
        self.written: set[bytes] = set()

    def _ids(self, request: Request) -> tuple[tuple[int, ...], list[int]]:
        ids: list[int] = []
        ends = []
        for index, text in enumerate(request.segments):
            ids.extend(self.tokens.of(text))
            if index in request.breaks:
                ends.append(len(ids))
        return tuple(ids), ends

    def bill(self, openai: Request, anthropic: Request) -> Bill:
        ids, _ = self._ids(openai)
        shared = _common_prefix(self.previous, ids)
        self.previous = ids
        cached = 0 if shared < OPENAI_MIN else OPENAI_MIN + (shared - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP
        p = self.prices
        openai_usd = ((len(ids) - cached) * p.openai_input + cached * p.openai_cached) / 1e6
        a_ids, ends = self._ids(anthropic)
        ends = [e for e in ends if e >= ANTHROPIC_MIN]
        raw = array("I", a_ids).tobytes()
        digests = {e: hashlib.blake2b(raw[: 4 * e], digest_size=16).digest() for e in ends}
        read = max((e for e in ends if digests[e] in self.written), default=0)
        last = max(ends, default=0)
        written = max(0, last - read)
        self.written.update(digests.values())
        full = len(a_ids) - read - written
        anthropic_usd = (read * p.anthropic_read + written * p.anthropic_write + full * p.anthropic_input) / 1e6
        return Bill(len(ids), shared, cached, openai_usd, read, written, anthropic_usd)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
