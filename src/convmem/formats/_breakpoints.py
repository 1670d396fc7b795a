"""OpenAI's explicit prompt-cache breakpoints: ``prompt_cache_breakpoint`` on rendered Chat and Responses items.

The GPT-5.6 family and later take ``"prompt_cache_breakpoint": {"mode": "explicit"}`` on a content part
(Chat ``text``, ``image_url``, ``input_audio`` and ``file`` parts; Responses ``input_text``,
``input_image`` and ``input_file``): it marks the exact end of a prefix to cache. One request writes
at most four (three beside OpenAI's own implicit breakpoint, ``prompt_cache_options.mode`` ``"implicit"``,
the default), the caller's own included. What comes in: the rendered items and, in priority order, the
items whose end should be marked. What happens: :func:`place` marks the last part of each item, turning
a string content (or a tool output) into one text part that carries the mark, and stops when the limit
is reached; an item that cannot carry a mark (an assistant message of Responses, which takes only
output parts; a function call) gives its mark to the nearest earlier item that can. Marked items are
copies: the rendered items of the window are reused between turns. What goes out: the items, marked.

Example::

    place(messages, ends=[5, 0], limit=3, format="openai")   # the end of item 5, then of item 0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BREAKPOINT", "KEY", "count", "place"]

KEY = "prompt_cache_breakpoint"
BREAKPOINT: Mapping[str, str] = {"mode": "explicit"}
_CHAT_PARTS = frozenset({"text", "image_url", "input_audio", "file"})
_RESPONSES_PARTS = frozenset({"input_text", "input_image", "input_file"})
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def count(items: Sequence[Mapping[str, Any]]) -> int:
    """The breakpoints already in ``items`` (the caller's own, in content parts and tool outputs)."""
    total = 0
    for item in items:
        for parts in (item.get("content"), item.get("output")):
            if isinstance(parts, list):
                total += sum(1 for part in parts if isinstance(part, Mapping) and KEY in part)
    return total


def place(items: list[dict[str, Any]], ends: Sequence[int], limit: int, format: str) -> list[dict[str, Any]]:
    """``items`` with a breakpoint at the end of each item of ``ends`` (priority order), at most ``limit`` in all."""
    room = limit - count(items)
    out = items
    for end in dict.fromkeys(ends):
        if room <= 0:
            break
        for index in range(min(end, len(out) - 1), -1, -1):
            if _marked(out[index]):
                break  # that end is marked already (by the caller, or by a mark of higher priority)
            copy = _with_breakpoint(out[index], format)
            if copy is not None:
                out = out if out is not items else list(items)
                out[index] = copy
                room -= 1
                break
    return out


def _marked(item: Mapping[str, Any]) -> bool:
    parts = item.get("output") if item.get("type") in _OUTPUTS else item.get("content")
    return isinstance(parts, list) and bool(parts) and isinstance(parts[-1], Mapping) and KEY in parts[-1]


def _with_breakpoint(item: Mapping[str, Any], format: str) -> dict[str, Any] | None:
    """A copy of ``item`` whose last part carries a breakpoint, or None when it has no part that can."""
    if format == "openai":
        if item.get("role") == "function":
            return None
        return _on_parts(item, "content", "text", _CHAT_PARTS)
    kind = item.get("type")
    if kind in _OUTPUTS:
        return _on_parts(item, "output", "input_text", _RESPONSES_PARTS)
    if kind not in (None, "message") or item.get("role") == "assistant":
        return None  # a call, a reasoning item; an assistant message takes output parts only
    return _on_parts(item, "content", "input_text", _RESPONSES_PARTS)


def _on_parts(item: Mapping[str, Any], key: str, text_type: str, carriers: frozenset[str]) -> dict[str, Any] | None:
    value = item.get(key)
    if isinstance(value, str):
        if not value:
            return None
        return {**item, key: [{"type": text_type, "text": value, KEY: dict(BREAKPOINT)}]}
    if not isinstance(value, list) or not value:
        return None
    last = value[-1]
    if not isinstance(last, Mapping) or last.get("type") not in carriers:
        return None
    return {**item, key: [*value[:-1], {**last, KEY: dict(BREAKPOINT)}]}
