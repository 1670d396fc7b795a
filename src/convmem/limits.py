"""Limits on what a message may hold, checked without recursion so hostile input gets a named error.

Two kinds of limit:

* **Ceilings** hold for every message convmem builds, whatever the configuration: JSON nested at
  most :data:`DEPTH_CEILING` deep (deeper data would make reading it back depend on how deep the
  caller's stack already is), integers with ``abs(x) <= MAX_INT`` (2**53 - 1: JSON readers such
  as Redis' Lua and JavaScript keep no more; SQLite stops at 2**63), finite floats, and text
  without lone surrogates (UTF-8 cannot store them). ``Message`` checks them on construction.
* :class:`Limits` are checked at the door (``Memory.add``, ``add_many``, import): the nesting depth
  of metadata, ``extra`` and tool-call arguments (default 64) and the size of a message (default
  16 MiB of UTF-8 text). A user who needs more may raise them up to the ceilings.

Every violation is an :class:`~convmem.errors.InvalidMessageError` naming the field and the limit.

Times follow one rule wherever they enter (messages, facts and their queries, imports, what a store
reads back): a naive ``datetime`` is taken as UTC (:func:`as_utc`), the zone convmem writes its own
stamps in, so naive and aware times never meet in a comparison.

Ids follow one rule on every backend (:func:`check_id`, an :class:`~convmem.errors.InvalidIdError`
otherwise), checked at the door of every store method and of ``Memory``: a session or user id is a
non-empty string of at most :data:`MAX_ID_BYTES` bytes of UTF-8, without lone surrogates or control
characters (NUL included). A session id also names a directory or a key segment in some backends, so
it holds no ``/`` or ``\\`` and does not start with ``.`` (no ``.`` or ``..``); a user id may (the
backends encode it).

Every check walks its data with an explicit stack, so 100,000 levels of nesting cost a named error,
never a ``RecursionError``.

Example::

    from convmem import Memory
    from convmem.limits import Limits

    memory = Memory(model="gpt-4o", limits=Limits(max_depth=128))
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .errors import ConfigurationError, InvalidIdError, InvalidMessageError

__all__ = [
    "DEPTH_CEILING",
    "MAX_ID_BYTES",
    "MAX_INT",
    "SIZE_CEILING",
    "Limits",
    "as_utc",
    "check_id",
    "check_int",
    "check_json",
    "check_limits",
    "check_text",
    "json_text_depth",
    "limits_config",
    "saved_limits",
]

DEPTH_CEILING = 256
SIZE_CEILING = 32 * 2**20
MAX_INT = 2**53 - 1
#: The longest id, in UTF-8 bytes: what the strictest backend (a file name, with room for a suffix) holds.
MAX_ID_BYTES = 200
_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


@dataclass(frozen=True, slots=True)
class Limits:
    """What a message may hold at the door; see the module docstring.

    Attributes:
        max_depth: how deep metadata, ``extra`` and tool-call arguments may nest (``{}`` is depth 1).
        max_message_bytes: the UTF-8 size of a message's text, arguments, metadata and ``extra``.
    """

    max_depth: int = 64
    max_message_bytes: int = 16 * 2**20

    def __post_init__(self) -> None:
        for name, ceiling in (("max_depth", DEPTH_CEILING), ("max_message_bytes", SIZE_CEILING)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= ceiling:
                raise ConfigurationError(f"Limits.{name} must be an integer from 1 to {ceiling}, got {value!r}")


CEILINGS = Limits(DEPTH_CEILING, SIZE_CEILING)


def limits_config(limits: Limits) -> dict[str, int]:
    """``limits`` as saved with a session's options (JSON)."""
    return {"max_depth": limits.max_depth, "max_message_bytes": limits.max_message_bytes}


def saved_limits(value: object) -> Limits | None:
    """The :class:`Limits` a session's saved options hold (:func:`limits_config`), None when they hold none.

    Raises:
        ConfigurationError: the saved value is not such an object, or out of range.
    """
    if value is None or isinstance(value, Limits):
        return value
    if not isinstance(value, Mapping) or not set(value) <= {"max_depth", "max_message_bytes"}:
        raise ConfigurationError(f"saved limits must be an object of max_depth and max_message_bytes, got {value!r}")
    return Limits(**value)


def check_text(value: str, field: str) -> int:
    """The UTF-8 size of ``value``; a lone surrogate is an InvalidMessageError naming ``field``."""
    if value.isascii():
        return len(value)
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidMessageError(
            f"holds a lone surrogate {value[exc.start]!r} at character {exc.start}; UTF-8 cannot store it",
            field=field,
        ) from None


def as_utc(value: datetime) -> datetime:
    """``value`` with a zone: a naive datetime is taken as UTC (the rule of the module docstring)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def check_id(value: object, field: str = "session_id", *, session: bool = True) -> str:
    """``value`` if it is an id under the rule of the module docstring, else an InvalidIdError naming ``field``.

    ``session`` adds what a session id may not hold (separators, a leading dot).
    """
    if not isinstance(value, str):
        raise InvalidIdError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidIdError(field, "must not be empty")
    if not value.isascii():
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidIdError(field, f"holds a lone surrogate at character {exc.start}") from None
    else:
        size = len(value)
    if size > MAX_ID_BYTES:
        raise InvalidIdError(field, f"is {size} bytes of UTF-8; the limit is {MAX_ID_BYTES}")
    control = _ID_CONTROL.search(value)
    if control is not None:
        raise InvalidIdError(field, f"holds the control character {control.group()!r} at character {control.start()}")
    if session:
        for separator in ("/", "\\"):
            if separator in value:
                raise InvalidIdError(field, f"holds the separator {separator!r} at character {value.index(separator)}")
        if value.startswith("."):
            raise InvalidIdError(field, "must not start with '.'")
    return value


def check_int(value: object, field: str, *, low: int = 0, high: int = MAX_INT) -> int:
    """``value`` if it is an int (not a bool) in ``low..high``, else an InvalidMessageError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMessageError(f"must be an integer, got {type(value).__name__}", field=field)
    if not low <= value <= high:
        raise InvalidMessageError(f"must be from {low} to {high}, got {_short(value)}", field=field)
    return value


def _short(value: int) -> str:
    return str(value) if abs(value) < 10**30 else f"an integer of {value.bit_length()} bits"


def check_json(value: Any, field: str, max_depth: int = DEPTH_CEILING) -> int:
    """Check a JSON value (dicts with str keys, lists, tuples, scalars) iteratively; returns its size.

    Depth counts containers: ``{}`` is 1, ``{"a": [1]}`` is 2.
    """
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        if isinstance(item, str):
            size += check_text(item, field)
        elif isinstance(item, bool) or item is None:
            size += 4
        elif isinstance(item, int):
            if not -MAX_INT <= item <= MAX_INT:
                raise InvalidMessageError(
                    f"holds the integer {_short(item)}, outside the storable range -{MAX_INT}..{MAX_INT}", field=field
                )
            size += 8
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidMessageError(f"holds {item!r}; JSON has no NaN or infinity", field=field)
            size += 8
        elif isinstance(item, dict | list | tuple) or _is_mapping(item):
            if depth + 1 > max_depth:
                raise InvalidMessageError(f"nests deeper than the limit of {max_depth} levels", field=field)
            if isinstance(item, list | tuple):
                for child in item:
                    push((child, depth + 1))
            else:
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise InvalidMessageError(f"keys must be strings, got {key!r}", field=field)
                    size += check_text(key, field)
                    push((child, depth + 1))
        else:
            raise InvalidMessageError(f"must be JSON-serializable, got a {type(item).__name__}", field=field)
    return size


def _is_mapping(item: object) -> bool:
    return isinstance(item, Mapping)


def json_text_depth(text: str, field: str, max_depth: int = DEPTH_CEILING) -> None:
    """Refuse JSON text nested deeper than ``max_depth`` before anything parses it (parsers recurse)."""
    if text.count("[") + text.count("{") <= max_depth:
        return
    depth = 0
    for char in re.sub(r"[^\[\]{}]", "", _STRING.sub("", text)):
        depth = depth + 1 if char in "[{" else depth - 1
        if depth > max_depth:
            raise InvalidMessageError(f"nests deeper than the limit of {max_depth} levels", field=field)


def check_limits(message: Any, limits: Limits, index: int | None = None) -> None:
    """Check a built message against ``limits`` (the ceilings hold already); raises InvalidMessageError."""
    try:
        size = _message_size(message, limits)
    except InvalidMessageError as exc:
        raise exc.at(index) if index is not None else exc from None
    if size > limits.max_message_bytes:
        error = InvalidMessageError(
            f"holds {size} bytes of text and data, over the limit of {limits.max_message_bytes}", field="content"
        )
        raise error.at(index) if index is not None else error


def _message_size(message: Any, limits: Limits) -> int:
    depth = limits.max_depth
    content = message.content
    size = 0
    if isinstance(content, str):
        size += len(content) if content.isascii() else len(content.encode("utf-8"))
    elif content is not None:
        for i, part in enumerate(content):
            for name in part.__slots__:
                value = getattr(part, name)
                if name == "extra":
                    size += check_json(value, f"content[{i}].extra", depth) if value else 0
                elif isinstance(value, str):
                    size += len(value)
    for i, call in enumerate(message.tool_calls):
        if depth < DEPTH_CEILING:
            json_text_depth(call.arguments, f"tool_calls[{i}].arguments", depth)
        size += len(call.arguments) + len(call.id) + len(call.name)
        if call.extra:
            size += check_json(call.extra, f"tool_calls[{i}].extra", depth)
    for name in ("metadata", "extra"):
        value = getattr(message, name)
        if value:
            size += check_json(value, name, depth)
    return size
