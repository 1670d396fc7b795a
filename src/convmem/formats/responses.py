"""OpenAI Responses API input items <-> :class:`~convmem.messages.Message` lists.

Items map to Messages like this:

* a ``message`` item (or an "easy" ``{"role": ..., "content": ...}`` without
  ``type``) is a Message. A string content is rendered in the easy form (no
  ``type``), so a plain text message is the same dict in all three formats; a list
  content is rendered with ``"type": "message"``. Text parts are ``output_text`` in
  assistant messages and ``input_text`` elsewhere; any other text type
  (``refusal`` included) is kept in the part's ``extra["responses"]["type"]``.
* consecutive ``function_call`` items, together with a directly preceding assistant
  ``message`` item, are ONE assistant Message with several tool calls, so parallel
  calls stay one unit. ``reasoning`` items inside or in front of such a run belong to
  it too: they are kept verbatim, with the order of the run, in
  ``extra["responses"]["$layout"]`` (``"m"`` = the message item, ``"t"`` = the next
  call, an object = a kept item), stored only when the order is not message-then-calls.
* a ``function_call_output`` item is a tool Message.
* ``input_image`` -> ImagePart (``image_url`` split like a data URL when it is one),
  or FilePart with ``extra["responses"]["type"] == "input_image"`` when the image is
  given by ``file_id``; ``input_file`` -> FilePart; ``input_audio`` -> AudioPart.

Unknown keys (``id``, ``status``, ``annotations``, ``logprobs`` ...) are kept in
``extra["responses"]`` as described in ``convmem.formats._common``. Unknown item or
part types, roles other than user/system/developer/assistant, a name (unless
``drop_names=True``) and local image paths raise InvalidMessageError.

Round trips: ``to_responses(from_responses(items)) == items`` for valid items, and
``from_responses(to_responses([m])) == [m]`` for every expressible Message. For
lists, an assistant message directly followed by a content-less assistant message
with tool calls (or a reasoning-only one) comes back merged with it.

Example::

    items = to_responses([Message(role="user", content="hi")])
    client.responses.create(model=..., input=items)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from ..errors import InvalidMessageError
from ..messages import AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall
from ._common import (
    ABSENT,
    LAYOUT,
    apply_layout,
    audio_from,
    check_name,
    copy_json,
    each,
    emit,
    fail,
    file_data_from,
    file_data_to,
    image_from_url,
    image_url_to,
    mapping,
    namespace,
    required_str,
    string,
    unknown,
    wrap,
)
from ._common import parts as content_parts

__all__ = ["from_responses", "to_responses"]

FMT = "responses"
_ROLES = frozenset({"user", "system", "developer", "assistant"})
_TEXT_TYPES = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_OPAQUE_ITEMS = frozenset({"reasoning"})
_DETAILS = frozenset({"auto", "low", "high", "original"})


def _text_type(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


# --- Messages -> items -------------------------------------------------------------------------


def to_responses(messages: Iterable[Message], *, drop_names: bool = False) -> list[dict[str, Any]]:
    """Render Messages as Responses API input items.

    Args:
        messages: the conversation.
        drop_names: leave ``name`` out instead of raising (Responses has no name field).

    Raises:
        InvalidMessageError: a message holds something the Responses API cannot
            express; ``index`` is its position in ``messages``.
    """
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        try:
            check_name(m, "Responses", drop_names)
            out += _items(m)
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    return out


_REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content", "status"})
_CALL_KEYS = ("id", "status")


def _items(m: Message) -> list[dict[str, Any]]:
    ns = namespace(m.extra, FMT, "")
    if m.role == "tool":
        output: Any = m.content if isinstance(m.content, str) else each("content", m.content or (), _part)
        item = {"type": "function_call_output", "call_id": m.tool_call_id, "output": output}
        emit(item, ns, FMT, "", allowed=_CALL_KEYS)
        return [item]
    message: dict[str, Any] | None = None
    if m.role == "assistant":
        message = _assistant(m, ns)
    elif isinstance(m.content, str):
        message = {"role": m.role, "content": m.content}
        emit(message, ns, FMT, "", allowed=("type",))  # both spellings of an easy message are valid
    elif m.content is not None:
        message = {"type": "message", "role": m.role, "content": each("content", m.content, _part)}
        emit(message, ns, FMT, "", allowed=())  # $absent: the easy spelling, without "type"
    calls = each("tool_calls", m.tool_calls, _call)
    layout = ns.get(LAYOUT)
    if layout is None:
        if message is None and not calls:
            fail("an assistant message needs content or tool calls in the Responses API", "content")
        return ([message] if message is not None else []) + calls
    slots = {"m": [message] if message is not None else [], "t": calls}
    items = apply_layout(layout, slots, _OPAQUE_ITEMS, f"extra.{FMT}.{LAYOUT}")
    return [{k: v for k, v in i.items() if k in _REASONING_KEYS} if i.get("type") == "reasoning" else i for i in items]


def _assistant(m: Message, ns: Mapping[str, Any]) -> dict[str, Any] | None:
    """An assistant message as an input item: the easy form for plain text, else an output message.

    Input messages (``input_text``) are for user, system and developer roles; assistant text is
    an easy message with string content, or an output message (``output_text`` parts, with an
    ``id``, a ``status`` and ``annotations``). The output message keeps the id the API gave
    (reasoning items are matched to the items that follow them by id); one without an id gets a
    stable id derived from its text. Annotations (citations) are kept in ``extra`` but sent as
    ``[]``: they describe the reply, the model does not read them.
    """
    content = m.content
    if content is None and not m.tool_calls and LAYOUT not in ns:
        refusal = namespace(m.extra, "openai", "").get("refusal")  # a Chat refusal: sent as one here too
        if isinstance(refusal, str) and refusal:
            content = (TextPart(refusal, extra={FMT: {"type": "refusal"}}),)
        else:
            return {"role": "assistant", "content": ""}
    if content is None or (not content and m.tool_calls):  # no empty message in front of the calls
        return None
    api_id = ns.get("id")
    if isinstance(content, str) and not isinstance(api_id, str):
        easy = {"role": "assistant", "content": content}
        emit(easy, ns, FMT, "", allowed=("type",))
        return easy
    parts: tuple[Part, ...] = (TextPart(content),) if isinstance(content, str) else content
    kinds = [namespace(p.extra, FMT, "").get("type") if isinstance(p, TextPart) else p.type for p in parts]
    if not isinstance(api_id, str) and len(parts) == 1 and kinds[0] in (None, "output_text", "input_text"):
        return {"role": "assistant", "content": content if isinstance(content, str) else parts[0].text}  # type: ignore[union-attr]
    rendered = each("content", parts, _output_part)
    if not isinstance(api_id, str):
        digest = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()[:32]
        api_id = f"msg_{digest}"
    status = ns.get("status")
    status = status if status in ("in_progress", "completed", "incomplete") else "completed"
    return {"type": "message", "id": api_id, "role": "assistant", "status": status, "content": rendered}


def _output_part(part: Part) -> dict[str, Any]:
    if not isinstance(part, TextPart):
        fail(f"the Responses API takes no {part.type} part in an assistant message", "type")
    kind = namespace(part.extra, FMT, "").get("type", "output_text")
    if kind == "refusal":
        return {"type": "refusal", "refusal": part.text}
    return {"type": "output_text", "text": part.text, "annotations": []}


def _call(call: ToolCall) -> dict[str, Any]:
    item = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments}
    emit(item, namespace(call.extra, FMT, ""), FMT, "", allowed=_CALL_KEYS)
    return item


def _part(part: Part) -> dict[str, Any]:
    ns = namespace(part.extra, FMT, "")
    out: dict[str, Any]
    if isinstance(part, TextPart):
        kind = ns.get("type", "input_text")
        if kind not in _TEXT_TYPES:
            fail(f"must be one of {sorted(_TEXT_TYPES)} for a text part, got {kind!r}", f"extra.{FMT}.type")
        return {"type": "input_text", "text": part.text}  # only assistant messages hold output text
    if isinstance(part, ImagePart):
        url = image_url_to(part, "the Responses API")
        return {"type": "input_image", "image_url": url, "detail": part.detail or "auto"}
    if isinstance(part, AudioPart):
        fail("the Responses API takes no audio in input messages", "type")
    if ns.get("type") == "input_image":
        if part.file_id is None or part.data or part.url or part.filename or part.media_type:
            fail("an input_image file part holds only a file_id", f"extra.{FMT}.type")
        detail = ns.get("detail")
        return {"type": "input_image", "file_id": part.file_id, "detail": detail if detail in _DETAILS else "auto"}
    out = {"type": "input_file"}
    data = file_data_to(part)
    if data is not None:
        out["file_data"] = data
    for key, value in (("file_id", part.file_id), ("file_url", part.url), ("filename", part.filename)):
        if value is not None:
            out[key] = value
    return out


# --- items -> Messages -------------------------------------------------------------------------


class _Run:
    """An assistant run being collected: an optional message item, calls and kept items."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.message: Message | None = None
        self.calls: list[ToolCall] = []
        self.layout: list[Any] = []

    def close(self) -> Message:
        canonical = (["m"] if self.message is not None else []) + ["t"] * len(self.calls)
        base = self.message or Message(role="assistant")
        ns = dict(namespace(base.extra, FMT, ""))
        if self.layout != canonical:
            ns[LAYOUT] = self.layout
        try:
            return base.replace(tool_calls=tuple(self.calls), extra=wrap(FMT, ns))
        except InvalidMessageError as exc:
            raise exc.at(self.index) from None


def from_responses(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Parse Responses API input items into Messages (see the module docstring).

    Raises:
        InvalidMessageError: ``index`` is the position of the offending item.
    """
    out: list[Message] = []
    run: _Run | None = None
    for i, raw in enumerate(items):
        try:
            d = mapping(raw, "item")
            kind = d.get("type")
            if kind in (None, "message") and d.get("role") == "assistant":
                if run is not None and (run.message is not None or run.calls):
                    out.append(run.close())
                    run = None
                run = run or _Run(i)
                run.message = _message_from(d, "assistant")
                run.layout.append("m")
            elif kind in ("function_call", *_OPAQUE_ITEMS):
                run = run or _Run(i)
                if kind == "function_call":
                    run.calls.append(_call_from(d))
                    run.layout.append("t")
                else:
                    run.layout.append(copy_json(d))
            else:
                if run is not None:
                    out.append(run.close())
                    run = None
                out.append(_item_from(d, kind))
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    if run is not None:
        out.append(run.close())
    return out


def _item_from(d: Mapping[str, Any], kind: object) -> Message:
    if kind in (None, "message"):
        role = required_str(d, "role", "role")
        if role not in _ROLES:
            fail(f"must be one of {sorted(_ROLES)} in the Responses API, got {role!r}", "role")
        return _message_from(d, role)
    if kind == "function_call_output":
        ns = unknown(d, ("type", "call_id", "output"))
        raw = d.get("output")
        output: str | tuple[Part, ...]
        output = raw if isinstance(raw, str) else tuple(each("output", content_parts(raw, "output"), _part_from))
        call_id = required_str(d, "call_id", "call_id")
        return Message(role="tool", content=output, tool_call_id=call_id, extra=wrap(FMT, ns))
    return fail(f"unsupported item type {kind!r}", "type")


def _message_from(d: Mapping[str, Any], role: str) -> Message:
    raw = d.get("content")
    if isinstance(raw, str):
        ns = unknown(d, ("role", "content"))
        content: str | tuple[Part, ...] = raw
    else:
        ns = unknown(d, ("type", "role", "content"))
        if "type" not in d:
            ns[ABSENT] = ["type"]
        content = tuple(each("content", content_parts(raw, "content"), partial(_part_from, kind=_text_type(role))))
    return Message(role=role, content=content, extra=wrap(FMT, ns))  # type: ignore[arg-type]  # validated


def _call_from(d: Mapping[str, Any]) -> ToolCall:
    ns = unknown(d, ("type", "call_id", "name", "arguments"))
    return ToolCall(
        required_str(d, "call_id", "call_id"),
        required_str(d, "name", "name"),
        required_str(d, "arguments", "arguments"),
        extra=wrap(FMT, ns),
    )


def _part_from(raw: object, kind: str = "input_text") -> Part:
    p = mapping(raw, "")
    ptype = p.get("type")
    if ptype in _TEXT_TYPES:
        key = _TEXT_TYPES[ptype]
        ns = unknown(p, ("type", key))
        if ptype != kind:
            ns["type"] = ptype
        return TextPart(required_str(p, key, key), extra=wrap(FMT, ns))
    if ptype == "input_image":
        url = string(p, "image_url", "image_url", required=False)
        if url is None:
            ns = unknown(p, ("type", "file_id"))
            ns["type"] = "input_image"
            return FilePart(file_id=required_str(p, "file_id", "file_id"), extra=wrap(FMT, ns))
        ns = unknown(p, ("type", "image_url", "detail"))
        detail = string(p, "detail", "detail", required=False)
        return image_from_url(url, detail, wrap(FMT, ns))
    if ptype == "input_file":
        ns = unknown(p, ("type", "file_data", "file_id", "file_url", "filename"))
        data, media_type = file_data_from(string(p, "file_data", "file_data", required=False))
        return FilePart(
            data=data,
            media_type=media_type,
            file_id=string(p, "file_id", "file_id", required=False),
            url=string(p, "file_url", "file_url", required=False),
            filename=string(p, "filename", "filename", required=False),
            extra=wrap(FMT, ns),
        )
    if ptype == "input_audio":
        return audio_from(p, FMT)
    return fail(f"unknown content part type {ptype!r}", "type")
