"""Which provider format a dict is in, judged by the markers only one format has.

What comes in: a message dict (or a Responses item) in any of the three formats. What happens:
each marker narrows the formats it can belong to (``tool_calls`` -> openai, ``tool_use`` blocks ->
anthropic, ``function_call`` items -> responses, ``type`` on a message, a part's type, a ``tool``
or a pinned role ...). What goes out: the formats still possible (:func:`candidates`), the
preferred one among them (:func:`first`, in the order of :data:`FORMATS`), or the only one
(:func:`detect_format`). A dict such as ``{"role": "user", "content": "hi"}`` is valid in every
format: it is parsed as OpenAI, the first of :data:`FORMATS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias, get_args

from ..errors import InvalidMessageError
from ..messages import PINNED_ROLES
from ._native import ANTHROPIC_KEPT

__all__ = ["ALL", "FORMATS", "RESPONSES_ONLY", "Format", "candidates", "detect_format", "first"]

Format: TypeAlias = Literal["openai", "anthropic", "responses"]
FORMATS: tuple[Format, ...] = get_args(Format)

ALL: frozenset[str] = frozenset(FORMATS)
RESPONSES_ONLY = frozenset({"responses"})
_OPENAI = frozenset({"openai"})
_NOT_ANTHROPIC = frozenset({"openai", "responses"})
_OPENAI_KEYS = ("tool_calls", "tool_call_id", "name", "refusal", "audio", "function_call")
_PART_FORMATS: dict[str, frozenset[str]] = {
    "text": frozenset({"openai", "anthropic"}),
    "image_url": _OPENAI,
    "file": _OPENAI,
    "input_audio": _NOT_ANTHROPIC,
    "refusal": _NOT_ANTHROPIC,
    **dict.fromkeys(("input_text", "output_text", "input_image", "input_file"), frozenset({"responses"})),
    **dict.fromkeys(("image", "document", "tool_use", "tool_result", *ANTHROPIC_KEPT), frozenset({"anthropic"})),
}


def candidates(item: Mapping[str, Any], *, pinned_any: bool = False) -> frozenset[str]:
    """The formats ``item`` can belong to, judged by the markers it carries."""
    if not isinstance(item, Mapping):
        raise InvalidMessageError(
            f"must be a dict, a Message or an SDK message object (with model_dump), got {type(item).__name__}",
            field="message",
        )
    kind = item.get("type")
    if kind is not None and kind != "message":
        return frozenset({"responses"})
    if kind is None and "role" not in item and "id" in item and item.keys() <= {"id", "type"}:
        return frozenset({"responses"})  # an item_reference, whose type is optional
    found = ALL if kind is None else frozenset({"anthropic", "responses"})
    role = item.get("role")
    if not isinstance(role, str):
        role = None  # not a role of any format (a list would not even hash): the parser names the field
    if role in ("tool", "function"):
        found &= _OPENAI
    elif role in PINNED_ROLES and not pinned_any:
        found &= _NOT_ANTHROPIC
    if any(key in item for key in _OPENAI_KEYS):
        found &= _OPENAI
    content = item.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("type"), str):
                found &= _PART_FORMATS.get(part["type"], ALL)
    if kind == "message" and "responses" in found:
        # Anthropic only writes "type": "message" on response objects, whose blocks give them away.
        return frozenset({"responses"})
    return found


def first(found: Iterable[str]) -> Format:
    return next((fmt for fmt in FORMATS if fmt in found), "openai")


def detect_format(item: Mapping[str, Any]) -> Format | None:
    """Return the only format ``item`` can belong to, or None when several (or none) fit.

    Raises:
        InvalidMessageError: ``item`` is not a mapping.
    """
    found = candidates(item)
    return first(found) if len(found) == 1 else None
