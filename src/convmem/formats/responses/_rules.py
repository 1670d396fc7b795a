"""What the Responses API takes, both directions: roles, text part types, the items of a run, the calls.

What comes in: input items, as the parser reads them or the renderer builds them. What happens: the
API's shapes are stated once, as data: the roles of a message item, the text part types and how each
is spelled in an assistant or another message, the items that join an assistant's *run* (its message,
its calls, and the items kept verbatim: reasoning and the provider's own tool traffic, see
:mod:`convmem.formats._native`), the keys a function call or an output may keep, and what a reply's
objects carry that a request does not (:func:`request_item`). What goes out: those tables, and the
kind of an item (:func:`kind_of`), which is where the parser and the renderer agree on what an item is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._native import RESPONSES_CALLS, RESPONSES_KEPT, RESPONSES_OUTPUTS

__all__ = [
    "CALL_KEYS",
    "CUSTOM_CALL",
    "CUSTOM_OUTPUT",
    "DETAILS",
    "FMT",
    "KEPT_ITEMS",
    "NATIVE_CALLS",
    "NATIVE_OUTPUTS",
    "ROLES",
    "TEXT_TYPES",
    "kind_of",
    "request_item",
    "text_type",
]

FMT = "responses"
ROLES = frozenset({"user", "system", "developer", "assistant"})
TEXT_TYPES = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
DETAILS = frozenset({"auto", "low", "high", "original"})
#: Items kept verbatim in their assistant run, in their place (:data:`convmem.formats._native.RESPONSES_KEPT`).
KEPT_ITEMS = RESPONSES_KEPT
#: Calls the application answers and their outputs, kept verbatim as a ToolCall's and a tool Message's ``$item``.
NATIVE_CALLS = RESPONSES_CALLS
NATIVE_OUTPUTS = RESPONSES_OUTPUTS
CUSTOM_CALL = "custom_tool_call"
CUSTOM_OUTPUT = "custom_tool_call_output"
#: What a function or custom call, and a function or custom output, keep beyond the modelled fields.
CALL_KEYS = ("id", "status", "caller", "namespace", "async")
#: Keys only a reply's objects carry (a request refuses them): dropped when a kept object is sent back.
_REPLY_ONLY = ("created_by",)
_REPLY_ONLY_BY_TYPE = {CUSTOM_OUTPUT: ("status",)}


def text_type(role: str) -> str:
    """The text part type of a message of ``role``: assistants write output text, every other role input."""
    return "output_text" if role == "assistant" else "input_text"


def kind_of(d: Mapping[str, Any]) -> str | None:
    """The item's type; an ``{"id": ...}`` with no type and no role is an ``item_reference`` (its type is optional)."""
    kind = d.get("type")
    if kind is None and "role" not in d and "id" in d and d.keys() <= {"id", "type"}:
        return "item_reference"
    return kind if isinstance(kind, str) or kind is None else str(kind)


def request_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A kept object as a request takes it: the keys only replies carry are left out."""
    drop = _REPLY_ONLY + _REPLY_ONLY_BY_TYPE.get(item.get("type"), ())  # type: ignore[arg-type]
    return {k: v for k, v in item.items() if k not in drop}
