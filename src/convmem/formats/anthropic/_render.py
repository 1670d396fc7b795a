"""Messages -> an Anthropic request (``system=`` and ``messages=``): each field rendered as its block.

What comes in: Messages, tool results directly after their calls. What happens: system and
developer messages become ``system`` (one string-content message stays a string, anything else text
blocks); every other Message becomes a user or assistant message whose content is its parts, its
tool calls as ``tool_use`` blocks (or, for a tool Message, one ``tool_result`` block), kept blocks
in their ``$layout`` order, and its ``extra["anthropic"]`` keys the request type accepts; the API's
rules (:mod:`._rules`) merge and order them. Tool-call ids are escaped to the API's pattern
(:mod:`convmem.formats._ids`). What goes out: an :class:`AnthropicRequest`, or an
InvalidMessageError naming the message's index and the field. The mapping both ways is described in
:mod:`convmem.formats.anthropic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import InvalidMessageError
from ...messages import PINNED_ROLES, AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall
from .._carry import Note, carry
from .._common import LAYOUT, apply_layout, arguments_object, check_name, each, emit, fail, namespace, no_path
from .._ids import RULES, SentIds
from ._rules import (
    CACHE_KEYS,
    DOCUMENT_KEYS,
    FMT,
    IMAGE_KEYS,
    KEPT_BLOCKS,
    KEPT_KEYS,
    TOOL_RESULT_KEYS,
    TOOL_USE_KEYS,
    append_alternating,
    is_empty_text,
    role_of,
    starting_with_user,
    without_empty_text,
    without_merged_empty_text,
)

__all__ = ["AnthropicRequest", "to_anthropic"]


@dataclass(frozen=True)
class AnthropicRequest:
    """The message part of a Messages API request.

    Attributes:
        system: the system prompt (a string, a list of text blocks) or None.
        messages: alternating user/assistant message dicts, starting with a user.
    """

    system: str | list[dict[str, Any]] | None
    messages: list[dict[str, Any]]

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``client.messages.create`` (``system`` only when set)."""
        if self.system is None:
            return {"messages": self.messages}
        return {"system": self.system, "messages": self.messages}


def to_anthropic(
    messages: Sequence[Message], *, drop_names: bool = False, notes: list[Note] | None = None
) -> AnthropicRequest:
    """Render Messages as an Anthropic request (the rules: :mod:`convmem.formats.anthropic`).

    Args:
        messages: the conversation, tool results directly after their calls.
        drop_names: leave ``name`` out instead of raising (Anthropic has no name field).
        notes: what Anthropic cannot carry (another format's kept objects and calls, custom tool calls) is
            replaced by its text or left out (:func:`convmem.formats._carry.carry`); its notes go here.

    Raises:
        InvalidMessageError: a message holds something Anthropic cannot express;
            ``index`` is its position in ``messages``.
    """
    system: list[Message] = []
    out: list[dict[str, Any]] = []
    ids = SentIds(RULES[FMT])  # unique in the request, in the API's pattern
    for i, m in enumerate(carry(messages, FMT, notes)):
        try:
            check_name(m, "Anthropic", drop_names)
            if m.role in PINNED_ROLES:
                if namespace(m.extra, FMT, ""):
                    fail("a system prompt has no object to carry it in Anthropic", f"extra.{FMT}")
                system.append(m)
                continue
            _append(out, m, ids)
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    without_merged_empty_text(out)
    return AnthropicRequest(_system(system), starting_with_user(out))


def _append(out: list[dict[str, Any]], m: Message, ids: SentIds) -> None:
    """Render ``m`` onto the end of ``out``, merged into the last message of its role."""
    if m.role == "tool":
        append_alternating(out, "user", [_tool_result(m, ids)], tool_result=True)
        return
    ns = namespace(m.extra, FMT, "")
    if isinstance(m.content, str) and not m.tool_calls and LAYOUT not in ns:
        append_alternating(out, role_of(m.role), m.content)
    else:
        append_alternating(out, role_of(m.role), _blocks(m, ns, ids))


def _system(messages: list[Message]) -> str | list[dict[str, Any]] | None:
    if not messages:
        return None
    if len(messages) == 1 and isinstance(messages[0].content, str):
        return messages[0].content
    blocks: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m.content, tuple):
            blocks += [b for b in each("content", m.content, _part) if not is_empty_text(b)]
        elif m.content:
            blocks.append({"type": "text", "text": m.content})
    return blocks or None


def _blocks(m: Message, ns: Mapping[str, Any], ids: SentIds) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        parts = [{"type": "text", "text": m.content}]
    else:
        parts = each("content", m.content or (), _part)
    calls = each("tool_calls", m.tool_calls, lambda call: _tool_use(call, ids))
    return without_empty_text(_laid_out(ns, parts, calls))  # e.g. "content": "" next to tool calls


def _laid_out(ns: Mapping[str, Any], parts: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks in the order of the namespace's ``$layout`` (kept blocks verbatim, a reply's thinking trimmed)."""
    layout = ns.get(LAYOUT)
    if layout is None:
        return parts + calls
    blocks = apply_layout(layout, {"p": parts, "t": calls}, KEPT_BLOCKS, f"extra.{FMT}.{LAYOUT}")
    return [{k: v for k, v in b.items() if k in KEPT_KEYS[b["type"]]} if b["type"] in KEPT_KEYS else b for b in blocks]


def _tool_result(m: Message, ids: SentIds) -> dict[str, Any]:
    ns = namespace(m.extra, FMT, "")
    content: Any = m.content
    if not isinstance(content, str):
        parts = each("content", content or (), _part)
        content = [b for b in _laid_out(ns, parts, []) if not is_empty_text(b)]
    block = {"type": "tool_result", "tool_use_id": ids.result(m.tool_call_id or ""), "content": content}
    emit(block, ns, FMT, "", allowed=TOOL_RESULT_KEYS)
    return block


def _tool_use(call: ToolCall, ids: SentIds) -> dict[str, Any]:
    block = {
        "type": "tool_use",
        "id": ids.call(call.id),
        "name": call.name,
        "input": arguments_object(call.arguments, "arguments"),
    }
    emit(block, namespace(call.extra, FMT, ""), FMT, "", allowed=TOOL_USE_KEYS)
    return block


def _part(part: Part) -> dict[str, Any]:
    ns = namespace(part.extra, FMT, "")
    if isinstance(part, TextPart):
        block: dict[str, Any] = {"type": "text", "text": part.text}
    elif isinstance(part, ImagePart):
        no_path(part.path, "Anthropic", "")
        if part.url is not None:
            source: dict[str, Any] = {"type": "url", "url": part.url}
        elif part.media_type is None:
            fail("is required for base64 image data", "media_type")
        else:
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        block = {"type": "image", "source": source}
    elif isinstance(part, AudioPart):
        fail("Anthropic does not accept audio input", "type")
    else:
        return _document(part, ns)
    emit(block, ns, FMT, "", handled=("source",), allowed=IMAGE_KEYS if block["type"] == "image" else CACHE_KEYS)
    return block


def _document(part: FilePart, ns: Mapping[str, Any]) -> dict[str, Any]:
    kind = ns.get("type", "document")
    given = [name for name in ("data", "url", "file_id") if getattr(part, name) is not None]
    if len(given) != 1:
        fail(f"an Anthropic source holds exactly one of data, url or file_id, got {given}", "file")
    if part.data is not None:
        if part.media_type is None:
            fail("is required for base64 document data", "media_type")
        source: dict[str, Any] = {"type": "base64", "media_type": part.media_type, "data": part.data}
    elif part.media_type is not None:
        fail("is only rendered with base64 data", "media_type")
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    else:
        source = {"type": "file", "file_id": part.file_id}
    if kind == "image" and (part.file_id is None or part.filename is not None):
        fail("an image block holds a file_id and no filename", f"extra.{FMT}.type")
    if kind not in ("document", "image"):
        fail(f"must be 'document' or 'image' for a file part, got {kind!r}", f"extra.{FMT}.type")
    block: dict[str, Any] = {"type": kind, "source": source}
    if part.filename is not None and kind == "document":
        block["title"] = part.filename
    allowed = DOCUMENT_KEYS if kind == "document" else CACHE_KEYS
    emit(block, ns, FMT, "", handled=("source", "type"), allowed=allowed)
    return block
