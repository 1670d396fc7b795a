"""The providers' rules a request must keep beyond its types: what the APIs refuse although the types admit it.

Each check raises :class:`RuleError` naming the rule: Chat Completions, every call answered and every result
answering a call; Anthropic, two roles alternating from a user, no empty content or text block, tool ids in
the API's pattern and unique in the request, each ``tool_use`` answered first in the next user message, a
turn with thinking opening with it; Responses, call ids of at most 64 characters and unique, each call
answered, each output after its call, a ``compaction_trigger`` only last.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["RuleError", "check"]

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_THINKING = ("thinking", "redacted_thinking")


class RuleError(AssertionError):
    pass


def check(fmt: str, messages: list[dict[str, Any]], system: Any = None) -> None:
    """Raise RuleError for the first rule of ``fmt`` the request breaks."""
    {"openai": _chat, "anthropic": _anthropic, "responses": _responses}[fmt](messages)


def _chat(messages: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m["tool_call_id"] not in open_calls:
                raise RuleError(f"messages[{i}]: a result of no open call {m['tool_call_id']!r}")
            open_calls.discard(m["tool_call_id"])
            continue
        if open_calls and not (m["role"] == "user" and _moved_images(messages, i)):
            raise RuleError(f"messages[{i}]: calls {sorted(open_calls)} are unanswered")
        open_calls = {c["id"] for c in m.get("tool_calls") or ()}
    if open_calls:
        raise RuleError(f"calls {sorted(open_calls)} are unanswered at the end")


def _moved_images(messages: list[dict[str, Any]], i: int) -> bool:
    content = messages[i].get("content")
    return isinstance(content, list) and bool(content) and str(content[0].get("text", "")).startswith("[image(s)")


def _anthropic(messages: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for i, m in enumerate(messages):
        expected = "user" if i % 2 == 0 else "assistant"
        if m["role"] != expected:
            raise RuleError(f"messages[{i}]: {m['role']} where the roles alternate from a user")
        content = m["content"]
        if content in ("", []):
            raise RuleError(f"messages[{i}]: empty content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if len(blocks) > 1 and any(b.get("type") == "text" and b.get("text") == "" for b in blocks):
            raise RuleError(f"messages[{i}]: an empty text block")
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        for call_id in uses:
            if not _ANTHROPIC_ID.fullmatch(call_id) or call_id in seen:
                raise RuleError(f"messages[{i}]: tool_use id {call_id!r} (pattern, or not unique)")
            seen.add(call_id)
        kinds = [b.get("type") for b in blocks if b.get("type") != "compaction"]
        if any(k in _THINKING for k in kinds) and kinds[0] not in _THINKING:
            raise RuleError(f"messages[{i}]: a turn with thinking does not open with it")
        if uses:
            answer = messages[i + 1]["content"] if i + 1 < len(messages) else []
            blocks = answer if isinstance(answer, list) else []
            results = [b.get("tool_use_id") for b in blocks if isinstance(b, Mapping)]
            if results[: len(uses)] != uses and sorted(results[: len(uses)]) != sorted(uses):
                raise RuleError(f"messages[{i}]: calls {uses} are not answered first in the next message")


def _responses(items: list[dict[str, Any]]) -> None:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind == "compaction_trigger" and i != len(items) - 1:
            raise RuleError(f"input[{i}]: compaction_trigger before the last item")
        if kind in ("function_call", "custom_tool_call"):
            call_id = item["call_id"]
            if len(call_id) > 64 or call_id in calls:
                raise RuleError(f"input[{i}]: call_id {call_id!r} (over 64 characters, or not unique)")
            calls[call_id] = i
        if kind in ("function_call_output", "custom_tool_call_output"):
            if item["call_id"] not in calls:
                raise RuleError(f"input[{i}]: an output of no earlier call {item['call_id']!r}")
            answered.add(item["call_id"])
    missing = sorted(set(calls) - answered)
    if missing:
        raise RuleError(f"calls {missing} are unanswered")
