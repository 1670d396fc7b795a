"""The Messages API's rules that both directions keep: roles, alternation, the placeholder, what a block carries.

What comes in: message dicts and content blocks, as the parser reads them or the renderer builds them.
What happens: the API's constraints are stated once, as data (:data:`KEPT_BLOCKS`,
:data:`KEPT_KEYS`, :data:`SOURCE_KEYS` and the keys each block type takes) and as the functions
that apply them: only user and assistant messages, alternating, starting with a user
(:func:`append_alternating`, :func:`starting_with_user`, whose :data:`CONTINUATION_PLACEHOLDER`
:func:`is_continuation` recognizes on the way back); an assistant turn that opens with thinking keeps
it first (:func:`opens_with_thinking`: it is not merged after another assistant's blocks); tool
results first in their user message, right after the call; no empty text block next to others
(:func:`without_empty_text`).
What goes out: a request the API accepts, or an InvalidMessageError naming the rule broken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._common import fail
from .._native import ANTHROPIC_KEPT

__all__ = [
    "CACHE_KEYS",
    "CONTINUATION_PLACEHOLDER",
    "DOCUMENT_KEYS",
    "FMT",
    "IMAGE_KEYS",
    "KEPT_BLOCKS",
    "KEPT_KEYS",
    "SOURCE_KEYS",
    "TOOL_RESULT_KEYS",
    "TOOL_USE_KEYS",
    "append_alternating",
    "as_blocks",
    "is_continuation",
    "is_empty_text",
    "is_separator",
    "opens_with_thinking",
    "role_of",
    "starting_with_user",
    "without_empty_text",
    "without_merged_empty_text",
]

FMT = "anthropic"
CONTINUATION_PLACEHOLDER = "(continued)"
"""Content of the user message put in front of a list that would start with an assistant."""

#: Blocks with no Message field, kept verbatim with their place among the others (a message's or a result's).
KEPT_BLOCKS = ANTHROPIC_KEPT
#: What a kept block of these types may carry in a request: a reply's thinking holds no more.
KEPT_KEYS = {
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}
_THINKING = frozenset(KEPT_KEYS)
#: The keys of each source type of an image or a document.
SOURCE_KEYS = {"base64": ("type", "media_type", "data"), "url": ("type", "url"), "file": ("type", "file_id")}
#: The kept keys each request block type accepts beyond those rendered from the Message.
CACHE_KEYS = ("cache_control",)
IMAGE_KEYS = ("cache_control", "transformations")
TOOL_USE_KEYS = ("cache_control", "caller", "toolset_name")
TOOL_RESULT_KEYS = ("cache_control", "is_error", "toolset_name")
DOCUMENT_KEYS = ("cache_control", "citations", "context")


def role_of(message_role: str) -> str:
    """The Anthropic role a Message's role is sent with: only assistant stays; tool results are user content."""
    return "assistant" if message_role == "assistant" else "user"


def as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def opens_with_thinking(content: str | list[dict[str, Any]]) -> bool:
    """True when ``content`` starts with a thinking block: with thinking on, its turn must start with it."""
    return isinstance(content, list) and bool(content) and content[0].get("type") in _THINKING


def append_alternating(
    out: list[dict[str, Any]], role: str, content: str | list[dict[str, Any]], *, tool_result: bool = False
) -> None:
    """Append a message to ``out``, merged into the last one when it has the same role (the API alternates).

    A string content becomes a text block when merged. A ``tool_result`` must directly follow the
    assistant message that called it: merged into a user message, only other results may precede it.
    An assistant turn that opens with thinking is not merged after another assistant's blocks (an
    application's own note): a :data:`CONTINUATION_PLACEHOLDER` user message separates them, unless those
    blocks end with a compaction block, which the API itself returns in front of the thinking.
    """
    last = out[-1] if out else None
    if last is not None and last["role"] == role == "assistant" and opens_with_thinking(content):
        blocks = as_blocks(last["content"])
        if not blocks or blocks[-1].get("type") != "compaction":
            out.append({"role": "user", "content": CONTINUATION_PLACEHOLDER})
            last = out[-1]
    if last is None or last["role"] != role:
        # A message carries role and content only: id, model, stop_reason, type, usage of a reply stay in extra.
        out.append({"role": role, "content": content})
        return
    if tool_result and any(b.get("type") != "tool_result" for b in as_blocks(last["content"])):
        fail("a tool result must directly follow the assistant message that called it", "role")
    last["content"] = as_blocks(last["content"]) + as_blocks(content)


def is_empty_text(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and block.get("text") == ""


def without_empty_text(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``blocks`` without empty text blocks, which the API refuses, while something else remains."""
    kept = [b for b in blocks if not is_empty_text(b)]
    return kept if kept else blocks


def without_merged_empty_text(out: list[dict[str, Any]]) -> None:
    """Merging may have put an empty text block next to others: drop those, keeping one block of a message."""
    for d in out:
        content = d["content"]
        if isinstance(content, list) and len(content) > 1 and any(is_empty_text(b) for b in content):
            d["content"] = [b for b in content if not is_empty_text(b)] or content[:1]


def starting_with_user(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``out``, with a :data:`CONTINUATION_PLACEHOLDER` user message in front when it starts with an assistant."""
    if out and out[0]["role"] == "assistant":
        out.insert(0, {"role": "user", "content": CONTINUATION_PLACEHOLDER})
    return out


def is_continuation(messages: Sequence[Any]) -> bool:
    """True when ``messages`` begins with the placeholder :func:`starting_with_user` put before an assistant."""
    return (
        len(messages) > 1
        and messages[0] == {"role": "user", "content": CONTINUATION_PLACEHOLDER}
        and isinstance(messages[1], Mapping)
        and messages[1].get("role") == "assistant"
    )


def is_separator(messages: Sequence[Any], i: int) -> bool:
    """True when ``messages[i]`` is the placeholder :func:`append_alternating` put between an assistant message
    and an assistant turn that opens with thinking."""
    if not 0 < i < len(messages) - 1 or messages[i] != {"role": "user", "content": CONTINUATION_PLACEHOLDER}:
        return False
    before, after = messages[i - 1], messages[i + 1]
    return (
        isinstance(before, Mapping)
        and before.get("role") == "assistant"
        and isinstance(after, Mapping)
        and after.get("role") == "assistant"
        and isinstance(after.get("content"), list)
        and bool(after["content"])
        and isinstance(after["content"][0], Mapping)
        and after["content"][0].get("type") in _THINKING
    )
