"""Provider-native objects: the blocks and items the Message model has no field for, kept verbatim.

What comes in: an Anthropic content block or a Responses item of a type the model does not describe
(server tools and their results, hosted-tool calls, compaction, search results, thinking, reasoning
...). What happens: the format's parser keeps it, unchanged, in its message's
``extra[fmt]["$layout"]`` (with its place among the message's parts and calls; see
:mod:`convmem.formats._common`), or, for a call the application answers (a Responses
``computer_call``, ``shell_call`` ...), in its ToolCall's and its result's ``extra[fmt]["$item"]``.
This module says, for each such type, what of it is text the model reads (:func:`texts`: counted
exactly, and the text that stands in for it where a format that cannot carry it may say it
faithfully: :func:`faithful_text`) and what is opaque (:func:`opaque_tokens`: counted by an estimate,
labelled so in the account). What goes out: those texts and estimates, and whether a message is a
provider's compaction (:func:`compaction_of`), the summary that stands for everything before it.

Opaque data the provider does not bill as input (a thinking ``signature``, ``redacted_thinking``
data, a reasoning item's ``encrypted_content``, a compaction's ``signature``) is not counted; opaque
content it does bill (encrypted search results, a Responses compaction, a generated image) is
estimated: one token per 4 characters of its encoding (base64 holds 3 bytes in 4 characters, and
text averages about 4 bytes a token, so the estimate errs high), an image at :data:`IMAGE_TOKENS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import InvalidMessageError

__all__ = [
    "ANTHROPIC_KEPT",
    "IMAGE_TOKENS",
    "ITEM",
    "RESPONSES_CALLS",
    "RESPONSES_KEPT",
    "RESPONSES_OUTPUTS",
    "check_kept",
    "compaction_of",
    "faithful_text",
    "kept_objects",
    "opaque_tokens",
    "texts",
]

ITEM = "$item"
#: The tokens an image costs at most by OpenAI's tile formula when its size is unknown.
IMAGE_TOKENS = 1445

#: Anthropic block types kept verbatim wherever they appear (assistant, user and tool_result content).
ANTHROPIC_KEPT = frozenset(
    {
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "advisor_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "mcp_tool_listing",
        "container_upload",
        "compaction",
        "tool_addition",
        "tool_removal",
        "fallback",
        "search_result",
        "tool_reference",
        "browser_state",
        "document",  # a document whose source is text or content blocks (the others are FileParts)
    }
)

#: Responses items the provider runs or the request directs, kept verbatim in their assistant run.
RESPONSES_KEPT = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "configuration_update",
        "item_reference",
        "compaction_trigger",
        "program",
        "program_output",
        "compaction",
    }
)

#: Responses calls the application answers, each with the key that names it and its output's type.
RESPONSES_CALLS: Mapping[str, tuple[str, str]] = {
    "computer_call": ("call_id", "computer_call_output"),
    "local_shell_call": ("call_id", "local_shell_call_output"),
    "shell_call": ("call_id", "shell_call_output"),
    "apply_patch_call": ("call_id", "apply_patch_call_output"),
    "mcp_approval_request": ("id", "mcp_approval_response"),
}
#: Their outputs, each with the key that names the call it answers.
RESPONSES_OUTPUTS: Mapping[str, str] = {
    "computer_call_output": "call_id",
    "local_shell_call_output": "id",
    "shell_call_output": "call_id",
    "apply_patch_call_output": "call_id",
    "mcp_approval_response": "approval_request_id",
}

# Keys that name, route or sign an object: sent, but not text the model reads.
_NOT_TEXT = frozenset(
    {
        "type",
        "id",
        "call_id",
        "tool_use_id",
        "approval_request_id",
        "status",
        "cache_control",
        "signature",
        "media_type",
        "file_id",
        "container_id",
        "fingerprint",
        "execution",
        "role",
        "caller",
        "citations",
        "page_age",
        "retrieved_at",
        "created_by",
        "background",
        "output_format",
        "quality",
        "size",
    }
)
# Opaque content the provider bills as input: estimated. (Reasoning and thinking data it does not: skipped.)
_ESTIMATED = frozenset({"encrypted_content", "encrypted_stdout"})
_SKIPPED = frozenset({"data"})  # redacted_thinking data; a document's base64 is a FilePart's, priced by the counter
_IMAGE_KEYS = frozenset({"result", "image_url"})  # a generated image; a screenshot sent back


def check_kept(obj: Mapping[str, Any]) -> None:
    """Check what convmem relies on in a kept object: the ids that pair a server tool use with its result.

    Everything else is the provider's to judge; the object is sent back as it came.

    Raises:
        InvalidMessageError: a pairing id is missing or not a string.
    """
    kind = obj.get("type")
    keys: tuple[str, ...] = ()
    if isinstance(kind, str) and kind.endswith("_tool_result"):
        keys = ("tool_use_id",)
    elif kind in ("server_tool_use", "mcp_tool_use"):
        keys = ("id", "name")
    for key in keys:
        if not isinstance(obj.get(key), str):
            raise InvalidMessageError("is required (a string)" if key not in obj else "must be a string", field=key)


def kept_objects(extra: Mapping[str, Any], fmt: str, *, item: bool = True) -> Iterator[Mapping[str, Any]]:
    """The objects kept verbatim in ``extra[fmt]``: its ``$layout`` entries that are objects, and its ``$item``."""
    ns = extra.get(fmt) if extra else None
    if not isinstance(ns, Mapping):
        return
    for entry in ns.get("$layout") or ():
        if isinstance(entry, Mapping):
            yield entry
    kept = ns.get(ITEM) if item else None
    if isinstance(kept, Mapping):
        yield kept


def texts(obj: Mapping[str, Any]) -> list[str]:
    """The text of a kept object the model reads: every string in it but names, ids, routing and opaque data.

    An object-valued ``input`` or ``arguments`` (a tool's input) counts as its JSON, as a tool call's does.
    """
    out: list[str] = []
    kind = obj.get("type")
    if kind == "document":
        text = faithful_text(obj)
        return [text] if text else []
    if kind in ("reasoning", "redacted_thinking", "compaction_trigger", "item_reference"):
        # A reasoning item is read as its summary and content texts; the rest routes or is opaque.
        for key in ("summary", "content") if kind == "reasoning" else ():
            for piece in obj.get(key) or ():
                if isinstance(piece, Mapping) and isinstance(piece.get("text"), str):
                    out.append(piece["text"])
        return out
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        key, value = stack.pop()
        if key in _NOT_TEXT or key in _ESTIMATED or key in _SKIPPED or key in _IMAGE_KEYS:
            continue
        if isinstance(value, str):
            out.append(value)
        elif key in ("input", "arguments") and isinstance(value, Mapping):
            out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        elif isinstance(value, Mapping):
            stack += [(k, v) for k, v in reversed(list(value.items()))]
        elif isinstance(value, list):
            stack += [(key if key in ("content", "summary") else "", v) for v in reversed(value)]
    return out


def opaque_tokens(obj: Mapping[str, Any], fmt: str) -> int:
    """The estimated tokens of a kept object's opaque content (see the module docstring)."""
    kind = obj.get("type")
    if kind in ("reasoning", "thinking", "redacted_thinking") or (kind == "compaction" and fmt == "anthropic"):
        return 0  # not billed as input (an Anthropic compaction is read as its text content; a failed one is a no-op)
    total = 0
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        key, value = stack.pop()
        if key in _ESTIMATED and isinstance(value, str):
            total += -(-len(value) // 4)
        elif (
            key in _IMAGE_KEYS and isinstance(value, str) and kind in ("image_generation_call", "computer_call_output")
        ):
            total += IMAGE_TOKENS
        elif isinstance(value, Mapping):
            stack += list(value.items())
        elif isinstance(value, list):
            stack += [(key, v) for v in value]
    return total


def faithful_text(obj: Mapping[str, Any]) -> str | None:
    """The text that says what a kept object says, for a format that cannot carry the object; None if none does.

    A compaction's summary, a search result (its title, source and text), a document of text (its title and
    text): each is text the model read, so the text is a faithful stand-in. Tool traffic, reasoning and
    opaque data are not.
    """
    kind = obj.get("type")
    summary = obj.get("content")
    if kind == "compaction" and isinstance(summary, str):
        return summary
    if kind == "search_result":
        body = _block_texts(obj.get("content"))
        head = " ".join(v for v in (obj.get("title"), obj.get("source")) if isinstance(v, str))
        return "\n".join(t for t in (head, body) if t) or None
    if kind == "document":
        source = obj.get("source")
        if not isinstance(source, Mapping):
            return None
        data = source.get("data")
        body = (
            (data if isinstance(data, str) else "")
            if source.get("type") == "text"
            else _block_texts(source.get("content"))
        )
        title = obj.get("title")
        text = "\n".join(t for t in (title if isinstance(title, str) else "", body) if t)
        return text or None
    return None


def _block_texts(content: object) -> str:
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "\n".join(b["text"] for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str))


def compaction_of(extra: Mapping[str, Any]) -> tuple[str, list[Mapping[str, Any]]] | None:
    """``(format, its objects)`` when ``extra`` is a provider compaction's: a layout of one compaction, or of a
    Responses compaction after the input messages ``responses.compact`` returns with it; else None."""
    for fmt in ("anthropic", "responses"):
        ns = extra.get(fmt) if extra else None
        layout = ns.get("$layout") if isinstance(ns, Mapping) else None
        if not isinstance(layout, list) or not layout:
            continue
        last = layout[-1]
        if (
            isinstance(last, Mapping)
            and last.get("type") == "compaction"
            and all(isinstance(e, Mapping) and (e is last or e.get("type") in (None, "message")) for e in layout)
        ):
            return fmt, list(layout)
    return None
