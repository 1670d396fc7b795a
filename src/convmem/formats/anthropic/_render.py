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

from ...errors import InvalidMessageError
from ...messages import PINNED_ROLES, AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall
from .._common import LAYOUT, apply_layout, arguments_object, check_name, each, emit, fail, namespace, no_path
from .._ids import to_anthropic_id
from ._parse import CONTINUATION_PLACEHOLDER, FMT, OPAQUE_BLOCKS, from_anthropic

__all__ = ["CONTINUATION_PLACEHOLDER", "AnthropicRequest", "from_anthropic", "to_anthropic"]

_CACHE = ("cache_control",)
# What a kept thinking block may carry in a request (ThinkingBlockParam, RedactedThinkingBlockParam).
_OPAQUE_KEYS = {
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}


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
    for d in out:  # merging may have put an empty text block next to others
        content = d["content"]
        if isinstance(content, list) and len(content) > 1 and any(_empty_text(b) for b in content):
            d["content"] = [b for b in content if not _empty_text(b)] or content[:1]
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
        # A message carries role and content only: id, model, stop_reason, type, usage of a reply stay in extra.
        out.append({"role": role, "content": content})
        return
    if m.role == "tool" and any(b.get("type") != "tool_result" for b in _as_blocks(last["content"])):
        fail("a tool result must directly follow the assistant message that called it", "role")
    last["content"] = _as_blocks(last["content"]) + _as_blocks(content)


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
            blocks += [b for b in each("content", m.content, _part) if not _empty_text(b)]
        elif m.content:
            blocks.append({"type": "text", "text": m.content})
    return blocks or None


def _blocks(m: Message, ns: Mapping[str, Any]) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        parts = [{"type": "text", "text": m.content}]
    else:
        parts = each("content", m.content or (), _part)
    calls = each("tool_calls", m.tool_calls, _tool_use)
    layout = ns.get(LAYOUT)
    if layout is None:
        blocks = parts + calls
    else:
        blocks = apply_layout(layout, {"p": parts, "t": calls}, OPAQUE_BLOCKS, f"extra.{FMT}.{LAYOUT}")
        blocks = [
            {k: v for k, v in b.items() if k in _OPAQUE_KEYS[b["type"]]} if b["type"] in _OPAQUE_KEYS else b
            for b in blocks
        ]
    # Anthropic refuses empty text blocks ("content": "" next to tool calls): leave them out while
    # something else remains.
    kept = [b for b in blocks if not _empty_text(b)]
    return kept if kept else blocks


def _empty_text(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and block.get("text") == ""


def _tool_result(m: Message) -> dict[str, Any]:
    content: Any = m.content if isinstance(m.content, str) else each("content", m.content or (), _part)
    if isinstance(content, list):
        content = [b for b in content if not _empty_text(b)]
    block = {"type": "tool_result", "tool_use_id": to_anthropic_id(m.tool_call_id or ""), "content": content}
    emit(block, namespace(m.extra, FMT, ""), FMT, "", allowed=("cache_control", "is_error"))
    return block


def _tool_use(call: ToolCall) -> dict[str, Any]:
    block = {
        "type": "tool_use",
        "id": to_anthropic_id(call.id),
        "name": call.name,
        "input": arguments_object(call.arguments, "arguments"),
    }
    emit(block, namespace(call.extra, FMT, ""), FMT, "", allowed=_CACHE)
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
    emit(block, ns, FMT, "", handled=("source",), allowed=_CACHE)
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
    allowed = ("cache_control", "citations", "context") if kind == "document" else _CACHE
    emit(block, ns, FMT, "", handled=("source", "type"), allowed=allowed)
    return block
