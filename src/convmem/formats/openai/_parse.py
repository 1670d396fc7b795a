"""A Chat Completions message dict -> :class:`~convmem.messages.Message`, losslessly.

What comes in: one message of a request (or a reply's ``choices[0].message``). What happens: its
content parts become the model's parts, its tool calls ToolCalls (a ``custom`` call's free-text input as a
JSON string, the call marked custom), the legacy ``function`` role a user Message that says so, and every
key the model does not carry (``refusal``, ``audio``, ``annotations``, DeepSeek's ``reasoning_content``,
Gemini's ``extra_content`` on a call ...) stays verbatim in ``extra["openai"]`` (the scheme of
:mod:`convmem.formats._common`). What goes out: the Message, or an InvalidMessageError naming the field.
The mapping both ways is described in :mod:`convmem.formats.openai`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

from ...messages import FilePart, Message, Part, Role, TextPart, ToolCall
from .._common import (
    audio_from,
    batch,
    each,
    fail,
    file_data_from,
    image_from_url,
    keep_nested,
    listing,
    mapping,
    required_str,
    string,
    unknown,
    wrap,
)
from .._common import parts as content_parts

__all__ = ["FMT", "FUNCTION_ROLE", "from_openai", "from_openai_messages"]

FMT = "openai"
#: ``extra["openai"]["role"]`` of a user Message that is a legacy ``function`` message (a function's result).
FUNCTION_ROLE = "function"
_PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})


def from_openai(d: Mapping[str, Any]) -> Message:
    """Parse one Chat Completions message dict.

    Args:
        d: a message such as ``{"role": "user", "content": "hi"}``.

    Returns:
        The equivalent Message; unmodelled keys are kept in ``extra["openai"]``.

    Raises:
        InvalidMessageError: the dict is not a valid message; ``field`` names the key.
    """
    # Fast path: the plain text message that makes up most of every conversation.
    if type(d) is dict and len(d) == 2:
        text = d.get("content")
        role = d.get("role")
        if type(text) is str and type(role) is str and role in _PLAIN_ROLES:  # a list role does not hash
            return Message(role=cast(Role, role), content=text)
    d = mapping(d, "message")
    role = required_str(d, "role", "role")
    raw = d.get("content")
    content: str | tuple[Part, ...] | None
    if raw is None or isinstance(raw, str):
        content = raw
    else:
        content = tuple(each("content", content_parts(raw, "content"), _part_from))
    ns = unknown(d, _MESSAGE_KEYS)
    if role == FUNCTION_ROLE:
        # The legacy function result: a user Message (its own unit, as the legacy call is no ToolCall).
        ns["role"] = FUNCTION_ROLE
        role = "user"
        if content is None:
            content, ns["content"] = "", None
    raw_calls = d.get("tool_calls")
    calls: tuple[ToolCall, ...] = ()
    if raw_calls is not None:
        calls = tuple(each("tool_calls", listing(raw_calls, "tool_calls"), _call_from))
        if not calls:
            ns["tool_calls"] = []
    return Message(
        role=role,  # type: ignore[arg-type]  # Message validates the role
        content=content,
        tool_calls=calls,
        tool_call_id=string(d, "tool_call_id", "tool_call_id", required=role == "tool"),
        name=string(d, "name", "name", required=ns.get("role") == FUNCTION_ROLE),
        extra=wrap(FMT, ns),
    )


def _part_from(p: object) -> Part:
    p = mapping(p, "")
    kind = p.get("type")
    if kind == "text":
        return TextPart(required_str(p, "text", "text"), extra=wrap(FMT, unknown(p, ("type", "text"))))
    if kind == "refusal":
        ns = unknown(p, ("type", "refusal"))
        ns["type"] = "refusal"
        return TextPart(required_str(p, "refusal", "refusal"), extra=wrap(FMT, ns))
    if kind == "image_url":
        inner = mapping(p.get("image_url"), "image_url")
        url = required_str(inner, "url", "image_url.url")
        ns = unknown(p, ("type", "image_url"))
        keep_nested(ns, "image_url", inner, ("url", "detail"))
        detail = string(inner, "detail", "image_url.detail", required=False)
        return image_from_url(url, detail, wrap(FMT, ns))
    if kind == "input_audio":
        return audio_from(p, FMT)
    if kind == "file":
        inner = mapping(p.get("file"), "file")
        ns = unknown(p, ("type", "file"))
        keep_nested(ns, "file", inner, ("file_data", "file_id", "filename"))
        data, media_type = file_data_from(string(inner, "file_data", "file.file_data", required=False))
        return FilePart(
            data=data,
            media_type=media_type,
            file_id=string(inner, "file_id", "file.file_id", required=False),
            filename=string(inner, "filename", "file.filename", required=False),
            extra=wrap(FMT, ns),
        )
    return fail(f"unknown content part type {kind!r}", "type")


def _call_from(c: object) -> ToolCall:
    c = mapping(c, "")
    kind = c.get("type")
    if kind == "custom":
        # A custom tool takes free text; as a ToolCall its arguments are that text as a JSON string.
        inner = mapping(c.get("custom"), "custom")
        ns = unknown(c, ("id", "type", "custom"))
        keep_nested(ns, "custom", inner, ("name", "input"))
        ns["type"] = "custom"
        arguments = json.dumps(required_str(inner, "input", "custom.input"))
        return ToolCall(
            required_str(c, "id", "id"), required_str(inner, "name", "custom.name"), arguments, wrap(FMT, ns)
        )
    if kind != "function":
        fail(f"must be 'function' or 'custom', got {kind!r}", "type")
    fn = mapping(c.get("function"), "function")
    ns = unknown(c, ("id", "type", "function"))
    keep_nested(ns, "function", fn, ("name", "arguments"))
    return ToolCall(
        required_str(c, "id", "id"),
        required_str(fn, "name", "function.name"),
        required_str(fn, "arguments", "function.arguments"),
        extra=wrap(FMT, ns),
    )


def from_openai_messages(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Parse a list of Chat Completions messages; errors carry the item index."""
    return batch(items, from_openai)
