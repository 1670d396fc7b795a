"""Anthropic prompt-cache breakpoints: ``cache_control`` on the last block of chosen messages.

Anthropic caches a request's prefix only up to blocks that carry ``cache_control``
(at most :data:`MAX_BREAKPOINTS` per request, the caller's own included). The
assembly (:mod:`convmem.policy.prefix`) chooses the messages where the stable
parts of a context end; :func:`render` marks each one and renders the request.
A mark is an ``extra["anthropic"]["cache_control"]`` on the message's last
rendered block (its last content part, its last tool call, or its tool result),
which the renderer emits verbatim like any other kept field, so nothing here
depends on how the renderer merges messages. A message whose last block is
already marked (by the caller) keeps its mark and takes no new one.

Example::

    request = render(messages, marks=[7, 2])   # end of message 7 first, then of message 2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...messages import FilePart, ImagePart, Message, TextPart
from .._common import LAYOUT
from ._render import AnthropicRequest, to_anthropic
from ._rules import FMT as _FMT

__all__ = ["EPHEMERAL", "MAX_BREAKPOINTS", "count", "mark", "render"]

MAX_BREAKPOINTS = 4
EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
_KEY = "cache_control"


def _with_mark(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    ns = extra.get(_FMT) or {}
    if not isinstance(ns, Mapping) or _KEY in ns:
        return None
    return {**extra, _FMT: {**ns, _KEY: dict(EPHEMERAL)}}


def mark(message: Message) -> Message | None:
    """``message`` with ``cache_control`` on its last rendered block.

    None when that block is already marked, or when the message has no block that can carry a
    mark (empty content and no calls, an audio part, a custom block order).
    """
    if LAYOUT in (message.extra.get(_FMT) or {}):
        return None
    if message.role == "tool":
        extra = _with_mark(message.extra)
        return None if extra is None else message.replace(extra=extra)
    if message.tool_calls:
        call = message.tool_calls[-1]
        extra = _with_mark(call.extra)
        if extra is None:
            return None
        return message.replace(tool_calls=(*message.tool_calls[:-1], replace(call, extra=extra)))
    content = message.content
    if isinstance(content, str):
        if not content:
            return None
        return message.replace(content=(TextPart(content, extra={_FMT: {_KEY: dict(EPHEMERAL)}}),))
    if not content:
        return None
    last = content[-1]
    if not isinstance(last, (TextPart, ImagePart, FilePart)):
        return None
    extra = _with_mark(last.extra)
    if extra is None:
        return None
    return message.replace(content=(*content[:-1], replace(last, extra=extra)))


def count(request: AnthropicRequest) -> int:
    """The ``cache_control`` marks in a rendered request (system blocks, message blocks, tool result content)."""
    total = 0
    blocks: list[Any] = list(request.system) if isinstance(request.system, list) else []
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, list):
            blocks += content
    while blocks:
        block = blocks.pop()
        if isinstance(block, Mapping):
            total += _KEY in block
            inner = block.get("content")
            if isinstance(inner, list):
                blocks += inner
    return total


def render(
    messages: Sequence[Message], marks: Sequence[int], limit: int = MAX_BREAKPOINTS, *, drop_names: bool = False
) -> AnthropicRequest:
    """Render ``messages`` for Anthropic with a breakpoint after each message in ``marks``.

    ``marks`` are indexes into ``messages`` in priority order: when the caller's own marks and these
    exceed ``limit``, the last of these are left out (all of them if the caller's alone reach it).
    """
    chosen = list(dict.fromkeys(marks))
    while True:
        marked = list(messages)
        for index in chosen:
            copy = mark(marked[index])
            if copy is not None:
                marked[index] = copy
        request = to_anthropic(marked, drop_names=drop_names)
        if not chosen or count(request) <= limit:
            return request
        chosen.pop()
