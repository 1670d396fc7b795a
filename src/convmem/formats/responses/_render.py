"""Messages -> Responses input items: each Message as its message item, its calls and its kept items.

What comes in: Messages, tool results after their calls. What happens: a user, system or developer
Message becomes a message item (the easy form for a string content); an assistant Message becomes its
message item (easy, or an output message with an id) and its calls (``function_call``,
``custom_tool_call``, or the hosted call kept verbatim), in its ``$layout`` order among the items kept
verbatim; a tool Message becomes the output its call takes. Call ids are spelled as the API takes them
(at most 64 characters, none twice in a request: :mod:`convmem.formats._ids`). What goes out: the
items, or an InvalidMessageError naming the message's index and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import InvalidMessageError
from ...messages import AudioPart, ImagePart, Message, Part, TextPart, ToolCall
from .._carry import Note, carry
from .._common import (
    LAYOUT,
    apply_layout,
    check_name,
    custom_input,
    each,
    emit,
    fail,
    file_data_to,
    image_url_to,
    namespace,
)
from .._ids import RULES, SentIds
from .._native import ITEM
from ._rules import CALL_KEYS, CUSTOM_CALL, CUSTOM_OUTPUT, DETAILS, FMT, KEPT_ITEMS, TEXT_TYPES, request_item

__all__ = ["to_responses"]

_REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content", "status"})
_EASY_KEYS = ("type", "phase")
_LAID_OUT = KEPT_ITEMS | {"message", None}  # None: an item_reference, whose type is optional
#: What a function or custom output keeps beyond the modelled fields (FunctionCallOutput, its custom twin).
_OUTPUT_KEYS = {
    "function_call_output": ("id", "status", "caller", "name", "namespace"),
    CUSTOM_OUTPUT: ("id", "caller"),
}


def to_responses(
    messages: Iterable[Message], *, drop_names: bool = False, notes: list[Note] | None = None
) -> list[dict[str, Any]]:
    """Render Messages as Responses API input items.

    Args:
        messages: the conversation.
        drop_names: leave ``name`` out instead of raising (Responses has no name field).
        notes: what Responses cannot carry (another format's kept objects and calls) is replaced by its
            text or left out (:func:`convmem.formats._carry.carry`); its notes go here.

    Raises:
        InvalidMessageError: a message holds something the Responses API cannot
            express; ``index`` is its position in ``messages``.
    """
    out: list[dict[str, Any]] = []
    walk = _Walk(SentIds(RULES[FMT]))
    for i, m in enumerate(carry(list(messages), FMT, notes)):
        try:
            check_name(m, "Responses", drop_names)
            out += walk.items(m)
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    return out


def _answer(kind: str, call_id: str, text: str) -> dict[str, Any] | None:
    """A text result (a repaired call's placeholder) as the output a call the application answers takes."""
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": text}
    if kind == "shell_call":
        outcome = {"stdout": "", "stderr": text, "outcome": {"type": "exit", "exit_code": 1}}
        return {"type": "shell_call_output", "call_id": call_id, "output": [outcome]}
    if kind == "apply_patch_call":
        return {"type": "apply_patch_call_output", "call_id": call_id, "status": "failed", "output": text}
    if kind == "mcp_approval_request":
        return {"type": "mcp_approval_response", "approval_request_id": call_id, "approve": False, "reason": text}
    return None  # a computer call takes a screenshot: no text answers it


class _Walk:
    """The request so far: the ids sent, which calls are custom (their outputs are custom outputs), and the
    kind of each call the application answers (a result given as text is rendered as its output)."""

    def __init__(self, ids: SentIds) -> None:
        self.ids = ids
        self.custom: set[str] = set()
        self.native: dict[str, str] = {}

    def items(self, m: Message) -> list[dict[str, Any]]:
        ns = namespace(m.extra, FMT, "")
        if m.role == "tool":
            return [self.output(m, ns)]
        message: dict[str, Any] | None = None
        if m.role == "assistant":
            message = _assistant(m, ns)
        elif isinstance(m.content, str):
            message = {"role": m.role, "content": m.content}
            emit(message, ns, FMT, "", allowed=("type",))  # both spellings of an easy message are valid
        elif m.content is not None:
            message = {"type": "message", "role": m.role, "content": each("content", m.content, _part)}
            emit(message, ns, FMT, "", allowed=("status",))  # $absent: the easy spelling, without "type"
        calls = each("tool_calls", m.tool_calls, self.call)
        layout = ns.get(LAYOUT)
        if layout is None:
            if message is None and not calls:
                fail("an assistant message needs content or tool calls in the Responses API", "content")
            return ([message] if message is not None else []) + calls
        slots = {"m": [message] if message is not None else [], "t": calls}
        items = apply_layout(layout, slots, _LAID_OUT, f"extra.{FMT}.{LAYOUT}")
        return [_kept(i) for i in items]

    def call(self, call: ToolCall) -> dict[str, Any]:
        ns = namespace(call.extra, FMT, "")
        item = ns.get(ITEM)
        if isinstance(item, Mapping):
            self.native[call.id] = str(item.get("type"))
            return request_item(item)
        text = custom_input(call)
        if text is not None:
            self.custom.add(call.id)
            out = {"type": CUSTOM_CALL, "call_id": self.ids.call(call.id), "name": call.name, "input": text}
        else:
            out = {"type": "function_call", "call_id": self.ids.call(call.id), "name": call.name}
            out["arguments"] = call.arguments
        emit(out, ns, FMT, "", handled=("type",), allowed=CALL_KEYS)
        return out

    def output(self, m: Message, ns: Mapping[str, Any]) -> dict[str, Any]:
        item = ns.get(ITEM)
        if isinstance(item, Mapping):
            return request_item(item)
        content: Any = m.content if isinstance(m.content, str) else each("content", m.content or (), _part)
        call_id = m.tool_call_id or ""
        if call_id in self.native:
            answer = _answer(self.native[call_id], call_id, m.text)
            if answer is None:
                fail(f"a {self.native[call_id]} is answered by its output item, not by text", "content")
            return answer
        kind = CUSTOM_OUTPUT if call_id in self.custom or ns.get("type") == CUSTOM_OUTPUT else "function_call_output"
        out = {"type": kind, "call_id": self.ids.result(call_id), "output": content}
        emit(out, ns, FMT, "", handled=("type",), allowed=_OUTPUT_KEYS[kind])
        return out


def _kept(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "reasoning":
        return {k: v for k, v in item.items() if k in _REASONING_KEYS}
    return request_item(item)


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
        return {"role": "assistant", "content": ""}
    if content is None or (not content and m.tool_calls):  # no empty message in front of the calls
        return None
    api_id = ns.get("id")
    if isinstance(content, str) and not isinstance(api_id, str):
        easy = {"role": "assistant", "content": content}
        emit(easy, ns, FMT, "", allowed=_EASY_KEYS)
        return easy
    parts: tuple[Part, ...] = (TextPart(content),) if isinstance(content, str) else content
    kinds = [namespace(p.extra, FMT, "").get("type") if isinstance(p, TextPart) else p.type for p in parts]
    if not isinstance(api_id, str) and len(parts) == 1 and kinds[0] in (None, "output_text", "input_text"):
        easy = {"role": "assistant", "content": content if isinstance(content, str) else parts[0].text}  # type: ignore[union-attr]
        emit(easy, ns, FMT, "", allowed=("phase",))
        return easy
    rendered = each("content", parts, _output_part)
    if not isinstance(api_id, str):
        digest = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()[:32]
        api_id = f"msg_{digest}"
    status = ns.get("status")
    status = status if status in ("in_progress", "completed", "incomplete") else "completed"
    out = {"type": "message", "id": api_id, "role": "assistant", "status": status, "content": rendered}
    if isinstance(ns.get("phase"), str):
        out["phase"] = ns["phase"]
    return out


def _output_part(part: Part) -> dict[str, Any]:
    if not isinstance(part, TextPart):
        fail(f"the Responses API takes no {part.type} part in an assistant message", "type")
    kind = namespace(part.extra, FMT, "").get("type", "output_text")
    if kind == "refusal":
        return {"type": "refusal", "refusal": part.text}
    return {"type": "output_text", "text": part.text, "annotations": []}


def _part(part: Part) -> dict[str, Any]:
    ns = namespace(part.extra, FMT, "")
    out: dict[str, Any]
    if isinstance(part, TextPart):
        kind = ns.get("type", "input_text")
        if kind not in TEXT_TYPES:
            fail(f"must be one of {sorted(TEXT_TYPES)} for a text part, got {kind!r}", f"extra.{FMT}.type")
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
        return {"type": "input_image", "file_id": part.file_id, "detail": detail if detail in DETAILS else "auto"}
    out = {"type": "input_file"}
    data = file_data_to(part)
    if data is not None:
        out["file_data"] = data
    for key, value in (("file_id", part.file_id), ("file_url", part.url), ("filename", part.filename)):
        if value is not None:
            out[key] = value
    return out
