"""Anthropic prompt-cache breakpoints: ``cache_control`` on the last block of chosen messages and tools.

Anthropic caches a request's prefix (tools, then system, then messages) only up to blocks that carry
``cache_control``, at most :data:`MAX_BREAKPOINTS` per request: the caller's own marks (on its system
blocks, its messages, its tools) included, and the top-level automatic ``cache_control`` too, which
marks the request's last block. The assembly (:mod:`convmem.policy.prefix`) chooses the messages where
the stable parts of a context end; :func:`render` marks each one, and the last tool definition that is
not loaded lazily (``defer_loading``), and renders the request. A mark is an
``extra["anthropic"]["cache_control"]`` on the message's last rendered block (its last content part,
its last tool call, or its tool result), which the renderer emits verbatim like any other kept field,
so nothing here depends on how the renderer merges messages. A message or tool whose last block is
already marked (by the caller) keeps its mark and takes no new one.

Lifetimes: a mark's ``ttl`` is ``"5m"`` (the default) or ``"1h"``, and the API refuses a longer
lifetime after a shorter one (in the order tools, system, messages). Each of convmem's marks takes the
lifetime asked for, shortened to that of any earlier mark and lengthened to that of any later mark of
the caller's, so a request with the caller's own marks stays valid.

Example::

    request = render(messages, marks=[7, 2]).request   # end of message 7 first, then of message 2
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ...messages import FilePart, ImagePart, Message, TextPart
from .._common import LAYOUT
from ._render import AnthropicRequest, to_anthropic
from ._rules import FMT as _FMT

__all__ = ["EPHEMERAL", "MAX_BREAKPOINTS", "Marked", "count", "mark", "render"]

MAX_BREAKPOINTS = 4
EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
_KEY = "cache_control"
_OURS = "convmem:mark"  # tells convmem's marks from the caller's until their lifetimes are set; never sent
_TOOLS = -1  # the tools' mark among the message indexes, always the last of them in priority
_RANK = {"5m": 1, "1h": 2}


class Marked(NamedTuple):
    """A request rendered with its marks: the messages and system, the tools, the top-level ``cache_control``."""

    request: AnthropicRequest
    tools: list[Mapping[str, Any]]
    cache_control: dict[str, str] | None


def _ours() -> dict[str, Any]:
    return {**EPHEMERAL, _OURS: True}


def _with_mark(extra: Mapping[str, Any], value: Mapping[str, Any]) -> dict[str, Any] | None:
    ns = extra.get(_FMT) or {}
    if not isinstance(ns, Mapping) or _KEY in ns:
        return None
    return {**extra, _FMT: {**ns, _KEY: dict(value)}}


def mark(message: Message, value: Mapping[str, Any] = EPHEMERAL) -> Message | None:
    """``message`` with ``cache_control`` (``value``) on its last rendered block.

    None when that block is already marked, or when the message has no block that can carry a
    mark (empty content and no calls, an audio part, a custom block order).
    """
    if LAYOUT in (message.extra.get(_FMT) or {}):
        return None
    if message.role == "tool":
        extra = _with_mark(message.extra, value)
        return None if extra is None else message.replace(extra=extra)
    if message.tool_calls:
        call = message.tool_calls[-1]
        extra = _with_mark(call.extra, value)
        if extra is None:
            return None
        return message.replace(tool_calls=(*message.tool_calls[:-1], replace(call, extra=extra)))
    content = message.content
    if isinstance(content, str):
        if not content:
            return None
        return message.replace(content=(TextPart(content, extra={_FMT: {_KEY: dict(value)}}),))
    if not content:
        return None
    last = content[-1]
    if not isinstance(last, (TextPart, ImagePart, FilePart)):
        return None
    extra = _with_mark(last.extra, value)
    if extra is None:
        return None
    return message.replace(content=(*content[:-1], replace(last, extra=extra)))


def count(request: AnthropicRequest, tools: Sequence[Mapping[str, Any]] = ()) -> int:
    """The ``cache_control`` marks in a rendered request (tools, system blocks, message blocks, tool results)."""
    return sum(1 for _ in _marked_blocks(request, tools))


def render(
    messages: Sequence[Message],
    marks: Sequence[int],
    limit: int = MAX_BREAKPOINTS,
    *,
    drop_names: bool = False,
    tools: Sequence[Mapping[str, Any]] = (),
    mark_tools: bool = False,
    ttl: str | None = None,
    automatic: bool = False,
) -> Marked:
    """Render ``messages`` for Anthropic with a breakpoint after each message in ``marks``.

    ``marks`` are indexes into ``messages`` in priority order; with ``mark_tools`` the last tool that can
    carry one takes the lowest priority; with ``automatic`` the top-level ``cache_control`` takes one
    place of ``limit`` and the last message needs no mark of its own. When the caller's own marks and
    these exceed ``limit``, the last of these are left out (all of them, the automatic one included,
    if the caller's alone reach it). ``ttl`` is the lifetime asked for (None: the API's default).
    """
    chosen = list(dict.fromkeys(marks))
    if automatic:
        chosen = [index for index in chosen if index != len(messages) - 1]
    marked_tools = _mark_tools(tools) if mark_tools else None
    if marked_tools is not None:
        chosen.append(_TOOLS)
    while True:
        marked = list(messages)
        for index in chosen:
            copy = mark(marked[index], _ours()) if index != _TOOLS else None
            if copy is not None:
                marked[index] = copy
        request = to_anthropic(marked, drop_names=drop_names)
        sent = marked_tools if marked_tools is not None and _TOOLS in chosen else list(tools)
        total = count(request, sent) + automatic
        if not chosen or total <= limit:
            break
        chosen.pop()
    top = _lifetimes(request, sent, ttl, automatic and total <= limit)
    return Marked(request, sent, top)


def _mark_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
    """``tools`` with a mark on the last one loaded with the request; None when it has one, or none can."""
    for index in range(len(tools) - 1, -1, -1):
        tool = tools[index]
        if tool.get("defer_loading") is True:  # not in the prompt until the model asks for it
            continue
        if _KEY in tool:
            return None
        out = list(tools)
        out[index] = {**tool, _KEY: _ours()}  # a new dict: the rendered tools are reused between turns
        return out
    return None


def _marked_blocks(request: AnthropicRequest, tools: Sequence[Mapping[str, Any]]) -> Iterator[Any]:
    """Every block that carries a ``cache_control``, in the order the API reads them: tools, system, messages."""
    for tool in tools:
        if _KEY in tool:
            yield tool
    blocks: list[Any] = list(request.system) if isinstance(request.system, list) else []
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, list):
            blocks += content
    stack = list(reversed(blocks))
    while stack:
        block = stack.pop()
        if isinstance(block, Mapping):
            if _KEY in block:
                yield block
            inner = block.get("content")
            if isinstance(inner, list):
                stack += reversed(inner)


def _lifetimes(
    request: AnthropicRequest, tools: Sequence[Mapping[str, Any]], ttl: str | None, automatic: bool
) -> dict[str, str] | None:
    """Give convmem's marks their lifetimes (see the module docstring); the automatic mark's, if it is sent."""
    blocks = list(_marked_blocks(request, tools))
    wanted = _RANK.get(ttl or "5m", 1)
    ranks = [_rank(block[_KEY]) for block in blocks]
    later = [0] * (len(blocks) + 1)  # the longest lifetime among the caller's marks from each block on
    for index in range(len(blocks) - 1, -1, -1):
        later[index] = max(later[index + 1], ranks[index] or 0)
    shortest = 2
    for index, block in enumerate(blocks):
        rank = ranks[index]
        if rank is None:
            rank = min(shortest, max(wanted, later[index + 1]))
            block[_KEY] = _cache_control(rank, ttl)  # a block convmem just rendered, never the caller's
        shortest = min(shortest, rank)
    return _cache_control(min(shortest, wanted), ttl) if automatic else None


def _rank(value: Any) -> int | None:
    """A mark's lifetime (1: five minutes, 2: one hour), or None for one of convmem's own, not yet set."""
    if not isinstance(value, Mapping):
        return 1
    if value.get(_OURS):
        return None
    return _RANK.get(value.get("ttl", "5m"), 1)


def _cache_control(rank: int, asked: str | None) -> dict[str, str]:
    if rank == 2:
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral", "ttl": "5m"} if asked is not None else dict(EPHEMERAL)
