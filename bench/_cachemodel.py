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
* **OpenAI with paid writes** (the GPT-5.6 family and later, which bill cache writes at 1.25x the input
  price): each request writes its prefix at its implicit breakpoint (taken as its end) and at its
  latest three explicit ``prompt_cache_breakpoint`` parts, and reads the longest prefix that ends at
  one of the latest 80 breakpoints written before (a request that only shares a start with an earlier
  one reads nothing where they part: these models no longer cache in 128-token steps); what it does
  not read it writes, at the write price, once it is 1,024 tokens or more.
* **Anthropic** caches at ``cache_control`` breakpoints: a request reads the
  longest prefix ending at one of its breakpoints that an earlier request
  wrote (10% of the input price), writes the rest up to its last breakpoint
  (125%), and pays the full price after it. A breakpoint also reads a prefix
  written earlier that ends at one of the 20 content blocks before it (the
  API's lookback). Prefixes under 1,024 tokens are not cached. The 5-minute
  lifetime is not modelled (a replay sends every request within seconds).
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
LOOKBACK = 20  # content blocks a breakpoint looks back over for an earlier write
OPENAI_BREAKPOINTS = 80  # the latest breakpoints an OpenAI request with paid writes is matched against
OPENAI_EXPLICIT = 3  # explicit breakpoints one request writes beside the implicit one


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
            else:  # an image or a file, as its JSON (a breakpoint marks where a prefix ends: it is not sent text)
                out.append(
                    json.dumps({k: v for k, v in part.items() if k != "prompt_cache_breakpoint"}, sort_keys=True)
                )
        else:
            out.append(str(part))
    return "".join(out)


@dataclass
class Request:
    """A request as segments of text; ``breaks`` holds the indexes of segments that end at a breakpoint,
    ``blocks`` those that end a content block (where the lookback looks)."""

    segments: list[str] = field(default_factory=list)
    breaks: set[int] = field(default_factory=set)
    blocks: set[int] = field(default_factory=set)

    def add(self, text: str, breakpoint: bool = False, block: bool = False) -> None:
        self.segments.append(text)
        if breakpoint:
            self.breaks.add(len(self.segments) - 1)
        if block or breakpoint:
            self.blocks.add(len(self.segments) - 1)


def openai_request(messages: Sequence[Mapping[str, Any]]) -> Request:
    """A Chat Completions ``messages`` list, laid out as its chat template would be."""
    request = Request()
    for m in messages:
        request.add(f"<|start|>{m.get('role')}\n")
        content = m.get("content")
        marked = isinstance(content, list) and any("prompt_cache_breakpoint" in p for p in content)
        request.add(_text(content), breakpoint=marked)
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
        request.add(system, last_breakpoint, block=True)
    elif system:
        for index, block in enumerate(system):
            at_end = last_breakpoint and index == len(system) - 1
            request.add(_text([block]), bool(block.get("cache_control")) or at_end, block=True)
    for m in messages:
        request.add(f"<|start|>{m.get('role')}\n")
        content = m.get("content")
        if isinstance(content, str):
            request.add(content, block=True)
        else:
            for block in content or ():
                request.add(_text([block]), bool(block.get("cache_control")), block=True)
        request.add("<|end|>")
    if last_breakpoint and request.segments:
        last_block = max(request.blocks, default=len(request.segments) - 1)
        request.breaks.add(last_block)
    return request


@dataclass(frozen=True)
class Bill:
    tokens: int  # the whole request
    reused: int  # tokens shared with the previous request (the prefix)
    openai_cached: int
    openai_usd: float
    openai_writes_read: int  # OpenAI with paid writes: tokens read, and the cost with the writes billed
    openai_writes_usd: float
    anthropic_read: int
    anthropic_written: int
    anthropic_usd: float


@dataclass(frozen=True)
class Prices:
    """USD per million input tokens."""

    openai_input: float
    openai_cached: float
    writes_input: float  # an OpenAI model that bills cache writes (GPT-5.6 and later)
    writes_cached: float
    writes_write: float
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
        self.breakpoints: list[bytes] = []  # the prefixes written at breakpoints, latest last (paid writes)

    def _ids(self, request: Request) -> tuple[int, ...]:
        ids: list[int] = []
        for text in request.segments:
            ids.extend(self.tokens.of(text))
        return tuple(ids)

    def _boundaries(self, request: Request, *, every: bool = False) -> list[tuple[int, int, bytes, bool]]:
        """(segment index, tokens so far, digest of the prefix, is a breakpoint) at every block end
        (with ``every``, at every segment end)."""
        out = []
        digest = hashlib.blake2b(digest_size=16)
        tokens = 0
        for index, text in enumerate(request.segments):
            ids = self.tokens.of(text)
            tokens += len(ids)
            digest.update(array("I", ids).tobytes())
            if every or index in request.blocks:
                out.append((index, tokens, digest.copy().digest(), index in request.breaks))
        return out

    def _paid_writes(self, request: Request, total: int) -> tuple[int, int]:
        """OpenAI with paid writes: the tokens read at a breakpoint written before, and those written now."""
        ends = self._boundaries(request, every=True)
        recent = set(self.breakpoints)
        hit = max((t for _, t, d, _ in ends if t >= OPENAI_MIN and d in recent), default=0)
        explicit = [d for _, _, d, is_break in ends if is_break][-OPENAI_EXPLICIT:]
        self.breakpoints = [*self.breakpoints, *explicit, *(ends[-1][2:3] if ends else ())][-OPENAI_BREAKPOINTS:]
        return hit, (total - hit if total >= OPENAI_MIN else 0)

    def bill(self, openai: Request, anthropic: Request) -> Bill:
        ids = self._ids(openai)
        shared = _common_prefix(self.previous, ids)
        self.previous = ids
        cached = 0 if shared < OPENAI_MIN else OPENAI_MIN + (shared - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP
        p = self.prices
        openai_usd = ((len(ids) - cached) * p.openai_input + cached * p.openai_cached) / 1e6
        hit, paid = self._paid_writes(openai, len(ids))
        fresh = len(ids) - hit - paid
        writes_usd = (fresh * p.writes_input + hit * p.writes_cached + paid * p.writes_write) / 1e6
        bounds = self._boundaries(anthropic)
        total = bounds[-1][1] if bounds else 0
        total = max(total, len(self._ids(anthropic)))
        read = 0
        for k, (_, _, _, is_break) in enumerate(bounds):
            if not is_break:
                continue
            for _, tokens, digest, _ in bounds[max(0, k - LOOKBACK) : k + 1]:
                if tokens >= ANTHROPIC_MIN and tokens > read and digest in self.written:
                    read = tokens
        breaks = [(tokens, digest) for _, tokens, digest, is_break in bounds if is_break and tokens >= ANTHROPIC_MIN]
        last = max((tokens for tokens, _ in breaks), default=0)
        written = max(0, last - read)
        self.written.update(digest for _, digest in breaks)
        full = total - read - written
        anthropic_usd = (read * p.anthropic_read + written * p.anthropic_write + full * p.anthropic_input) / 1e6
        return Bill(len(ids), shared, cached, openai_usd, hit, writes_usd, read, written, anthropic_usd)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
