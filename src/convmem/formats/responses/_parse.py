"""Responses input items (or a reply's output items) -> :class:`~convmem.messages.Message` lists.

What comes in: items in their order. What happens: a message item is a Message; an assistant *run*
(its message item, the function, custom and hosted-tool calls after it, and the items kept verbatim
in front of or among them: reasoning, web searches, MCP calls ...) is one assistant Message, so
parallel calls and the provider's tool traffic stay in one unit, with their order kept in
``extra["responses"]["$layout"]``; a ``compaction`` item is a Message of its own (the summary the
memory adopts); an output (``function_call_output``, ``custom_tool_call_output``,
``computer_call_output`` ...) is a tool Message answering its call. Ids escaped to a provider's rule
come back as they were (:mod:`convmem.formats._ids`). What goes out: Messages, or an
InvalidMessageError whose ``index`` is the item's position. The mapping is described in
:mod:`convmem.formats.responses`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from ...errors import InvalidMessageError
from ...messages import FilePart, Message, Part, TextPart, ToolCall
from .._common import (
    ABSENT,
    LAYOUT,
    audio_from,
    copy_json,
    each,
    fail,
    file_data_from,
    image_from_url,
    mapping,
    namespace,
    required_str,
    string,
    unknown,
    wrap,
)
from .._common import parts as content_parts
from .._ids import original_id
from .._native import ITEM, texts
from ._rules import (
    CUSTOM_CALL,
    CUSTOM_OUTPUT,
    FMT,
    KEPT_ITEMS,
    NATIVE_CALLS,
    NATIVE_OUTPUTS,
    ROLES,
    TEXT_TYPES,
    kind_of,
    text_type,
)

__all__ = ["from_responses"]

_RUN_ITEMS = frozenset({"function_call", CUSTOM_CALL, *NATIVE_CALLS, *KEPT_ITEMS}) - {"compaction"}


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
            kind = kind_of(d)
            if kind in (None, "message") and d.get("role") == "assistant":
                if run is not None and (run.message is not None or run.calls):
                    out.append(run.close())
                    run = None
                run = run or _Run(i)
                run.message = _message_from(d, "assistant")
                run.layout.append("m")
            elif kind in _RUN_ITEMS:
                run = run or _Run(i)
                if kind in KEPT_ITEMS:
                    run.layout.append(copy_json(d))
                else:
                    run.calls.append(_call_from(d, kind))
                    run.layout.append("t")
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


def compaction_message(items: Sequence[Mapping[str, Any]]) -> Message:
    """One Message holding ``items`` verbatim, in order: a compaction, or what ``responses.compact`` returned."""
    return Message(role="assistant", extra={FMT: {LAYOUT: [copy_json(mapping(i, "item")) for i in items]}})


def _item_from(d: Mapping[str, Any], kind: object) -> Message:
    if kind in (None, "message"):
        role = required_str(d, "role", "role")
        if role not in ROLES:
            fail(f"must be one of {sorted(ROLES)} in the Responses API, got {role!r}", "role")
        return _message_from(d, role)
    if kind == "compaction":
        required_str(d, "encrypted_content", "encrypted_content")
        return compaction_message([d])
    if kind in ("function_call_output", CUSTOM_OUTPUT):
        ns = unknown(d, ("type", "call_id", "output"))
        if kind == CUSTOM_OUTPUT:
            ns["type"] = CUSTOM_OUTPUT
        raw = d.get("output")
        output: str | tuple[Part, ...]
        output = raw if isinstance(raw, str) else tuple(each("output", content_parts(raw, "output"), _part_from))
        call_id = original_id(required_str(d, "call_id", "call_id"))
        return Message(role="tool", content=output, tool_call_id=call_id, extra=wrap(FMT, ns))
    if kind in NATIVE_OUTPUTS:
        key = NATIVE_OUTPUTS[kind]  # type: ignore[index]
        text = "\n".join(texts(d)) or str(kind)
        return Message(role="tool", content=text, tool_call_id=required_str(d, key, key), extra={FMT: {ITEM: d}})
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
        content = tuple(each("content", content_parts(raw, "content"), partial(_part_from, kind=text_type(role))))
    return Message(role=role, content=content, extra=wrap(FMT, ns))  # type: ignore[arg-type]  # validated


def _call_from(d: Mapping[str, Any], kind: str) -> ToolCall:
    if kind == "function_call":
        ns = unknown(d, ("type", "call_id", "name", "arguments"))
        call_id, name = original_id(required_str(d, "call_id", "call_id")), required_str(d, "name", "name")
        return ToolCall(call_id, name, required_str(d, "arguments", "arguments"), extra=wrap(FMT, ns))
    if kind == CUSTOM_CALL:
        # A custom tool takes free text; as a ToolCall its arguments are that text as a JSON string.
        ns = unknown(d, ("type", "call_id", "name", "input"))
        ns["type"] = CUSTOM_CALL
        call_id, name = original_id(required_str(d, "call_id", "call_id")), required_str(d, "name", "name")
        return ToolCall(call_id, name, json.dumps(required_str(d, "input", "input")), extra=wrap(FMT, ns))
    key = NATIVE_CALLS[kind][0]
    given = d.get("name")
    name = given if isinstance(given, str) else kind
    salient = {k: v for k, v in d.items() if k not in ("type", "id", "call_id", "status", "name")}
    arguments = json.dumps(salient, ensure_ascii=False, separators=(",", ":"))
    return ToolCall(required_str(d, key, key), name, arguments, extra={FMT: {ITEM: copy_json(d)}})


def _part_from(raw: object, kind: str = "input_text") -> Part:
    p = mapping(raw, "")
    ptype = p.get("type")
    if ptype in TEXT_TYPES:
        key = TEXT_TYPES[ptype]
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
