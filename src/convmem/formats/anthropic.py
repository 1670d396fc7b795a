"""Anthropic Messages API requests <-> :class:`~convmem.messages.Message` lists.

Anthropic keeps the system prompt outside the message list, has only user and
assistant messages, and requires them to alternate starting with a user. So:

* system and developer messages go to ``system``: one string-content message stays
  a string, anything else becomes a list of text blocks (in message order).
* tool calls become ``tool_use`` blocks; tool results become ``tool_result`` blocks
  in a user message, first in that message, in the order given.
* consecutive messages of the same Anthropic role are merged into one (content
  concatenated; a string content becomes a text block).
* a list that would start with an assistant message gets a user message whose
  content is :data:`CONTINUATION_PLACEHOLDER` in front; parsing drops it again.

Round trips. ``to_anthropic(from_anthropic(msgs, system))`` gives back the same
request for every request that already alternates. ``from_anthropic(to_anthropic(ms))``
preserves every piece of content in order, and is the identity when no two messages
merge and each content is already in its Anthropic form; it is *not* the identity for
message boundaries (merged messages come back as one, a user text after tool results
comes back as its own user message), for ``developer`` (comes back as ``system``),
for system messages placed after others (hoisted), for a string content that was
merged (comes back as a text part) and for tool-call ``arguments`` text (re-encoded
compactly from the ``input`` object; the decoded JSON is equal).

``extra["anthropic"]`` follows ``convmem.formats._common``: on a tool Message it holds
the unknown keys of its ``tool_result`` block (``is_error``, ``cache_control``); on
other Messages the unknown keys of the message dict. ``thinking`` and
``redacted_thinking`` blocks of an assistant message are kept verbatim, with the
order of all blocks, in ``extra["anthropic"]["$layout"]`` (``"p"`` = next part,
``"t"`` = next tool call, an object = a kept block), stored only when the order is
not parts-then-calls. Other unknown block types raise InvalidMessageError, as do
audio parts, names (unless ``drop_names=True``), local image paths, tool-call
arguments that are not a JSON object, and text placed before tool results.
Image ``detail``, ``width`` and ``height`` are hints for OpenAI's counter and are
not rendered.

Example::

    request = to_anthropic([Message(role="system", content="Be brief."),
                            Message(role="user", content="hi")])
    client.messages.create(model=..., max_tokens=..., **request.kwargs())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidMessageError
from ..messages import PINNED_ROLES, AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall
from ._common import (
    ABSENT,
    LAYOUT,
    apply_layout,
    arguments_object,
    check_name,
    copy_json,
    each,
    emit,
    fail,
    listing,
    mapping,
    namespace,
    nested,
    no_path,
    object_arguments,
    relocate,
    required_str,
    string,
    unknown,
    wrap,
)

__all__ = ["CONTINUATION_PLACEHOLDER", "AnthropicRequest", "from_anthropic", "to_anthropic"]

FMT = "anthropic"
CONTINUATION_PLACEHOLDER = "(continued)"
"""Content of the user message put in front of a list that would start with an assistant."""

_OPAQUE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_SOURCE_KEYS = {"base64": ("type", "media_type", "data"), "url": ("type", "url"), "file": ("type", "file_id")}


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


# --- Messages -> request -----------------------------------------------------------------------


def to_anthropic(messages: Sequence[Message], *, drop_names: bool = False) -> AnthropicRequest:
    """Render Messages as an Anthropic request (see the module docstring for the rules).

    Args:
        messages: the conversation, tool results directly after their calls.
        drop_names: leave ``name`` out instead of raising (Anthropic has no name field).

    Raises:
        InvalidMessageError: a message holds something Anthropic cannot express;
            ``index`` is its position in ``messages``.
    """
    system: list[Message] = []
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        try:
            check_name(m, "Anthropic", drop_names)
            if m.role in PINNED_ROLES:
                if namespace(m.extra, FMT, ""):
                    fail("a system prompt has no object to carry it in Anthropic", f"extra.{FMT}")
                system.append(m)
                continue
            _append(out, m)
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    if out and out[0]["role"] == "assistant":
        out.insert(0, {"role": "user", "content": CONTINUATION_PLACEHOLDER})
    return AnthropicRequest(_system(system), out)


def _append(out: list[dict[str, Any]], m: Message) -> None:
    """Render ``m`` onto the end of ``out``, merging it into the last message of its role."""
    role = "assistant" if m.role == "assistant" else "user"
    if m.role == "tool":
        ns: Mapping[str, Any] = {}
        content: str | list[dict[str, Any]] = [_tool_result(m)]
    else:
        ns = namespace(m.extra, FMT, "")
        if isinstance(m.content, str) and not m.tool_calls and LAYOUT not in ns:
            content = m.content
        else:
            content = _blocks(m, ns)
    last = out[-1] if out else None
    if last is None or last["role"] != role:
        d: dict[str, Any] = {"role": role, "content": content}
        emit(d, ns, FMT, "")
        out.append(d)
        return
    if m.role == "tool" and any(b.get("type") != "tool_result" for b in _as_blocks(last["content"])):
        fail("a tool result must directly follow the assistant message that called it", "role")
    last["content"] = _as_blocks(last["content"]) + _as_blocks(content)
    keys: dict[str, Any] = {}
    emit(keys, ns, FMT, "")
    for key, value in keys.items():
        if last.get(key, value) != value:
            fail(f"conflicts with the {key!r} of the message it is merged into", f"extra.{FMT}.{key}")
        last[key] = value


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _system(messages: list[Message]) -> str | list[dict[str, Any]] | None:
    if not messages:
        return None
    if len(messages) == 1 and isinstance(messages[0].content, str):
        return messages[0].content
    blocks: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m.content, tuple):
            blocks += each("content", m.content, _part)
        else:
            blocks.append({"type": "text", "text": m.content or ""})
    return blocks


def _blocks(m: Message, ns: Mapping[str, Any]) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        parts = [{"type": "text", "text": m.content}]
    else:
        parts = each("content", m.content or (), _part)
    calls = each("tool_calls", m.tool_calls, _tool_use)
    layout = ns.get(LAYOUT)
    if layout is None:
        return parts + calls
    return apply_layout(layout, {"p": parts, "t": calls}, _OPAQUE_BLOCKS, f"extra.{FMT}.{LAYOUT}")


def _tool_result(m: Message) -> dict[str, Any]:
    content: Any = m.content if isinstance(m.content, str) else each("content", m.content or (), _part)
    block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}
    emit(block, namespace(m.extra, FMT, ""), FMT, "")
    return block


def _tool_use(call: ToolCall) -> dict[str, Any]:
    block = {
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": arguments_object(call.arguments, "arguments"),
    }
    emit(block, namespace(call.extra, FMT, ""), FMT, "")
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
    if "source" in block:
        emit(block["source"], nested(ns, "source", FMT, ""), FMT, "source.")
    emit(block, ns, FMT, "", handled=("source",))
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
    emit(source, nested(ns, "source", FMT, ""), FMT, "source.")
    block: dict[str, Any] = {"type": kind, "source": source}
    if part.filename is not None:
        block["title"] = part.filename
    emit(block, ns, FMT, "", handled=("source", "type"))
    return block


# --- request -> Messages -----------------------------------------------------------------------


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
        :data:`CONTINUATION_PLACEHOLDER` user message is dropped.

    Raises:
        InvalidMessageError: ``index`` is the position in ``messages`` (None for ``system``).
    """
    out: list[Message] = []
    if isinstance(system, str):
        out.append(Message(role="system", content=system))
    elif system is not None:
        parts = each("system", listing(list(system) if isinstance(system, tuple) else system, "system"), _text_block)
        out.append(Message(role="system", content=tuple(parts)))
    start = 0
    if (
        len(messages) > 1
        and messages[0] == {"role": "user", "content": CONTINUATION_PLACEHOLDER}
        and isinstance(messages[1], Mapping)
        and messages[1].get("role") == "assistant"
    ):
        start = 1
    for i in range(start, len(messages)):
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
    blocks = listing(content, "content")
    if role == "assistant":
        return [_assistant_from(blocks, ns)]
    results: list[Message] = []
    parts: list[Part] = []
    for i, raw in enumerate(blocks):
        try:
            b = mapping(raw, "")
            if b.get("type") == "tool_result":
                if parts:
                    fail("tool_result blocks must come before any other block of a user message", "type")
                results.append(_tool_message(b))
            else:
                parts.append(_part_from(b))
        except InvalidMessageError as exc:
            raise relocate(exc, f"content[{i}]") from None
    if results and ns:
        fail("a user message holding tool_result blocks cannot keep unknown keys", next(iter(ns)))
    if not results or parts:
        results.append(Message(role="user", content=tuple(parts), extra=wrap(FMT, ns)))
    return results


def _assistant_from(blocks: list[Any], ns: dict[str, Any]) -> Message:
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
            elif kind in _OPAQUE_BLOCKS:
                layout.append(copy_json(b))
            else:
                parts.append(_part_from(b))
                layout.append("p")
        except InvalidMessageError as exc:
            raise relocate(exc, f"content[{i}]") from None
    if layout != ["p"] * len(parts) + ["t"] * len(calls):
        ns[LAYOUT] = layout
    content = tuple(parts) if parts or not calls else None
    return Message(role="assistant", content=content, tool_calls=tuple(calls), extra=wrap(FMT, ns))


def _call_from(b: Mapping[str, Any]) -> ToolCall:
    value = b.get("input")
    if not isinstance(value, Mapping):
        fail(f"must be an object, got {type(value).__name__}", "input")
    ns = unknown(b, ("type", "id", "name", "input"))
    return ToolCall(
        required_str(b, "id", "id"), required_str(b, "name", "name"), object_arguments(value), wrap(FMT, ns)
    )


def _tool_message(b: Mapping[str, Any]) -> Message:
    ns = unknown(b, ("type", "tool_use_id", "content"))
    raw = b.get("content", "")
    if "content" not in b:
        ns[ABSENT] = ["content"]
    content: str | tuple[Part, ...]
    if isinstance(raw, str):
        content = raw
    else:
        content = tuple(each("content", listing(raw, "content"), _part_from))
    call_id = required_str(b, "tool_use_id", "tool_use_id")
    return Message(role="tool", content=content, tool_call_id=call_id, extra=wrap(FMT, ns))


def _part_from(b: Mapping[str, Any]) -> Part:
    kind = b.get("type")
    if kind == "text":
        return TextPart(required_str(b, "text", "text"), extra=wrap(FMT, unknown(b, ("type", "text"))))
    if kind not in ("image", "document"):
        fail(f"unknown or misplaced content block type {kind!r}", "type")
    source = mapping(b.get("source"), "source")
    source_type = string(source, "type", "source.type")
    if source_type not in _SOURCE_KEYS:
        fail(f"unsupported {kind} source type {source_type!r}", "source.type")
    ns = unknown(b, ("type", "source", "title") if kind == "document" else ("type", "source"))
    source_ns = unknown(source, _SOURCE_KEYS[source_type])
    if source_ns:
        ns["source"] = source_ns
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
