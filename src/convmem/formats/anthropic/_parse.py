"""An Anthropic request (``messages=`` and ``system=``) -> :class:`~convmem.messages.Message` lists.

What comes in: the request's message dicts and its system prompt, as the API takes them. What
happens: each block becomes its Message field (text, image and document parts, ``tool_use`` calls,
each ``tool_result`` a tool Message of its own), kept blocks go to ``$layout``, unknown keys to
``extra["anthropic"]``, and the placeholder of a list that started with an assistant is dropped
(:mod:`._rules`); ids escaped to the API's pattern come back as they were (:mod:`convmem.formats._ids`).
What goes out: Messages, or an InvalidMessageError naming the item's index and the field. The
mapping both ways is described in :mod:`convmem.formats.anthropic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import InvalidMessageError
from ...messages import FilePart, ImagePart, Message, Part, TextPart, ToolCall
from .._common import (
    ABSENT,
    LAYOUT,
    copy_json,
    each,
    fail,
    keep_nested,
    listing,
    mapping,
    object_arguments,
    relocate,
    required_str,
    string,
    unknown,
    wrap,
)
from .._common import parts as content_parts
from .._ids import from_anthropic_id
from .._native import ANTHROPIC_KEPT, check_kept
from ._rules import FMT, SOURCE_KEYS, is_continuation, is_separator

__all__ = ["from_anthropic", "is_kept"]


def from_anthropic(
    messages: Sequence[Mapping[str, Any]], system: str | Sequence[Mapping[str, Any]] | None = None
) -> list[Message]:
    """Parse an Anthropic request into Messages (system first).

    Args:
        messages: the request's ``messages``.
        system: the request's ``system`` (a string or a list of text blocks).

    Returns:
        One Message per message dict, except that a user message holding
        ``tool_result`` blocks becomes one tool Message per block, followed by a user
        Message for its other blocks, if any. A leading
        :data:`~convmem.formats.anthropic.CONTINUATION_PLACEHOLDER` user message is dropped.

    Raises:
        InvalidMessageError: ``index`` is the position in ``messages`` (None for ``system``).
    """
    out: list[Message] = []
    if isinstance(system, str):
        out.append(Message(role="system", content=system))
    elif system is not None:
        parts = each("system", listing(list(system) if isinstance(system, tuple) else system, "system"), _text_block)
        out.append(Message(role="system", content=tuple(parts)))
    for i in range(1 if is_continuation(messages) else 0, len(messages)):
        if is_separator(messages, i):
            continue
        try:
            out += _message_from(mapping(messages[i], "message"))
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    return out


def _text_block(b: object) -> TextPart:
    b = mapping(b, "")
    if b.get("type") != "text":
        fail(f"the system prompt holds only text blocks, got {b.get('type')!r}", "type")
    return TextPart(required_str(b, "text", "text"), extra=wrap(FMT, unknown(b, ("type", "text"))))


def _message_from(d: Mapping[str, Any]) -> list[Message]:
    role = required_str(d, "role", "role")
    if role not in ("user", "assistant"):
        fail(f"Anthropic messages are 'user' or 'assistant' (pass system separately), got {role!r}", "role")
    content = d.get("content")
    ns = unknown(d, ("role", "content"))
    if isinstance(content, str):
        return [Message(role=role, content=content, extra=wrap(FMT, ns))]  # type: ignore[arg-type]
    blocks = content_parts(content, "content")
    if role == "assistant":
        return _assistant_from(blocks, ns)
    results: list[Message] = []
    parts: list[Part] = []
    layout: list[Any] = []
    for i, raw in enumerate(blocks):
        try:
            b = mapping(raw, "")
            if b.get("type") == "tool_result":
                if layout:
                    fail("tool_result blocks must come before any other block of a user message", "type")
                results.append(_tool_message(b))
            else:
                layout.append(_part_or_kept(b, parts))
        except InvalidMessageError as exc:
            raise relocate(exc, f"content[{i}]") from None
    if results and ns:
        fail("a user message holding tool_result blocks cannot keep unknown keys", next(iter(ns)))
    if layout != ["p"] * len(parts):
        ns[LAYOUT] = layout
    if not results or layout:
        results.append(Message(role="user", content=tuple(parts), extra=wrap(FMT, ns)))
    return results


def is_kept(b: Mapping[str, Any]) -> bool:
    """A block kept verbatim (:data:`~convmem.formats._native.ANTHROPIC_KEPT`): a document only when its
    source is text or content blocks, which no FilePart holds."""
    kind = b.get("type")
    if kind == "document":
        source = b.get("source")
        return isinstance(source, Mapping) and source.get("type") in ("text", "content")
    return kind in ANTHROPIC_KEPT


def _part_or_kept(b: Mapping[str, Any], parts: list[Part]) -> Any:
    """Append ``b`` to ``parts`` (its layout entry is ``"p"``), or return it kept verbatim."""
    if is_kept(b):
        check_kept(b)
        return copy_json(b)
    parts.append(_part_from(b))
    return "p"


def _assistant_from(blocks: list[Any], ns: dict[str, Any]) -> list[Message]:
    """An assistant message; a compaction block stands alone, between what precedes and what follows it.

    The API ignores every block before a compaction block, and the memory archives what the compaction
    stands for, so the compaction is a Message of its own (merged back on the way out: the same request).
    """
    at = next((i for i, b in enumerate(blocks) if isinstance(b, Mapping) and b.get("type") == "compaction"), None)
    if at is None:
        return [_assistant(blocks, ns, 0)]
    out = [_assistant(blocks[:at], {}, 0)] if at else []
    rest = blocks[at + 1 :]
    out.append(_assistant(blocks[at : at + 1], {} if rest else ns, at))
    return out + ([_assistant(rest, ns, at + 1)] if rest else [])


def _assistant(blocks: list[Any], ns: dict[str, Any], offset: int) -> Message:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    layout: list[Any] = []
    for i, raw in enumerate(blocks):
        try:
            b = mapping(raw, "")
            kind = b.get("type")
            if kind == "tool_use":
                calls.append(_call_from(b))
                layout.append("t")
            elif is_kept(b):
                check_kept(b)
                layout.append(copy_json(b))
            else:
                parts.append(_part_from(b))
                layout.append("p")
        except InvalidMessageError as exc:
            raise relocate(exc, f"content[{offset + i}]") from None
    if layout != ["p"] * len(parts) + ["t"] * len(calls):
        ns[LAYOUT] = layout
    content = tuple(parts) if parts or not calls else None
    return Message(role="assistant", content=content, tool_calls=tuple(calls), extra=wrap(FMT, ns))


def _call_from(b: Mapping[str, Any]) -> ToolCall:
    value = b.get("input")
    if not isinstance(value, Mapping):
        fail(f"must be an object, got {type(value).__name__}", "input")
    ns = unknown(b, ("type", "id", "name", "input"))
    call_id = from_anthropic_id(required_str(b, "id", "id"))
    return ToolCall(call_id, required_str(b, "name", "name"), object_arguments(value), wrap(FMT, ns))


def _tool_message(b: Mapping[str, Any]) -> Message:
    ns = unknown(b, ("type", "tool_use_id", "content"))
    raw = b.get("content", "")
    if "content" not in b:
        ns[ABSENT] = ["content"]
    content: str | tuple[Part, ...]
    if isinstance(raw, str):
        content = raw
    else:
        parts: list[Part] = []
        layout = each("content", content_parts(raw, "content"), lambda c: _part_or_kept(mapping(c, ""), parts))
        if layout != ["p"] * len(parts):
            ns[LAYOUT] = layout
        content = tuple(parts)
    call_id = from_anthropic_id(required_str(b, "tool_use_id", "tool_use_id"))
    return Message(role="tool", content=content, tool_call_id=call_id, extra=wrap(FMT, ns))


def _part_from(b: Mapping[str, Any]) -> Part:
    kind = b.get("type")
    if kind == "text":
        return TextPart(required_str(b, "text", "text"), extra=wrap(FMT, unknown(b, ("type", "text"))))
    if kind not in ("image", "document"):
        fail(f"unknown or misplaced content block type {kind!r}", "type")
    source = mapping(b.get("source"), "source")
    source_type = string(source, "type", "source.type")
    if source_type not in SOURCE_KEYS:
        fail(f"unsupported {kind} source type {source_type!r}", "source.type")
    ns = unknown(b, ("type", "source", "title") if kind == "document" else ("type", "source"))
    keep_nested(ns, "source", source, SOURCE_KEYS[source_type])
    data = media_type = url = file_id = None
    if source_type == "base64":
        data = required_str(source, "data", "source.data")
        media_type = required_str(source, "media_type", "source.media_type")
    elif source_type == "url":
        url = required_str(source, "url", "source.url")
    else:
        file_id = required_str(source, "file_id", "source.file_id")
    if kind == "image" and file_id is None:
        return ImagePart(url=url, data=data, media_type=media_type, extra=wrap(FMT, ns))
    if kind == "image":
        ns["type"] = "image"
    title = string(b, "title", "title", required=False)
    return FilePart(data=data, file_id=file_id, url=url, filename=title, media_type=media_type, extra=wrap(FMT, ns))
