"""Independent checks of the rules the providers enforce on a request.

These read only the rendered dicts, never convmem's units, so they catch an
assembly bug instead of repeating it.
"""

from __future__ import annotations

from typing import Any


class ProviderRuleError(AssertionError):
    pass


def validate_openai(messages: list[dict[str, Any]]) -> None:
    """Chat Completions: system first; every tool result follows its call; every call answered."""
    seen_other = False
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message["role"]
        if role in ("system", "developer"):
            if seen_other:
                raise ProviderRuleError(f"message {i}: {role} message after the conversation started")
            continue
        seen_other = True
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in open_calls:
                raise ProviderRuleError(f"message {i}: tool result {call_id!r} does not answer an open call")
            open_calls.discard(call_id)
            continue
        if open_calls:
            raise ProviderRuleError(f"message {i}: calls {sorted(open_calls)} unanswered before a {role} message")
        if role == "assistant" and message.get("tool_calls"):
            open_calls = {call["id"] for call in message["tool_calls"]}
        elif role not in ("user", "assistant"):
            raise ProviderRuleError(f"message {i}: unknown role {role!r}")
    if open_calls:
        raise ProviderRuleError(f"calls {sorted(open_calls)} unanswered at the end")


def validate_anthropic(system: Any, messages: list[dict[str, Any]]) -> None:
    """Anthropic Messages: user first, strict alternation, tool_use answered in the very next user turn."""
    if not messages:
        return
    expected = "user"
    previous_uses: set[str] = set()
    for i, message in enumerate(messages):
        role = message["role"]
        if role != expected:
            raise ProviderRuleError(f"message {i}: expected {expected}, got {role} (alternation)")
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not blocks:
            raise ProviderRuleError(f"message {i}: empty content")
        if role == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            ids = {b["tool_use_id"] for b in results}
            if ids != previous_uses:
                raise ProviderRuleError(f"message {i}: tool results {sorted(ids)} != tool uses {sorted(previous_uses)}")
            first_other = next((k for k, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks))
            if any(b.get("type") == "tool_result" for b in blocks[first_other:]):
                raise ProviderRuleError(f"message {i}: tool_result blocks must come first")
            previous_uses = set()
            expected = "assistant"
        else:
            previous_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            expected = "user"
    if previous_uses:
        raise ProviderRuleError(f"tool uses {sorted(previous_uses)} unanswered at the end")


def validate_responses(items: list[dict[str, Any]]) -> None:
    """Responses input: every function_call_output answers an earlier call; every call is answered."""
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in calls or item["call_id"] in answered:
                raise ProviderRuleError(f"item {i}: output for unknown or answered call {item['call_id']!r}")
            answered.add(item["call_id"])
    if calls - answered:
        raise ProviderRuleError(f"calls {sorted(calls - answered)} unanswered")


def validate_context(context: Any) -> None:
    """Check a convmem ``Context`` by the rules of the format it was rendered in."""
    if context.format == "openai":
        validate_openai(context.messages)
    elif context.format == "anthropic":
        validate_anthropic(context.system, context.messages)
    else:
        validate_responses(context.messages)
