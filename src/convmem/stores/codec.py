"""Lossless JSON for messages, session state and timestamps.

Every store writes messages through this one codec, so a message read back
from SQLite, from a JSONL file or from an export is equal to the one that was
added, and encoding it again gives the same bytes.

* Fields at their default (``None``, empty mapping, no tool calls) are left
  out, so lines stay short and greppable; decoding restores the defaults.
* ``content`` keeps its three shapes apart: a string, a list of parts (even
  an empty one), or absent for ``None``.
* Timestamps are ISO 8601 with microseconds and the UTC offset. A
  ``zoneinfo`` zone is kept by name, RFC 9557 style:
  ``2024-03-10T01:30:00.000000-05:00[America/New_York]``. A naive timestamp
  stays naive.
* Metadata and ``extra`` are JSON already (``Message`` checks that); note
  that JSON has no tuples, so a tuple inside metadata comes back as a list.

The JSON text itself is compact, keeps non-ASCII characters readable, and
never contains a raw newline, so one message is one line.

Example::

    line = dumps(encode_message(message))
    assert decode_message(loads(line)) == message
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidMessageError, StoreError
from ..limits import MAX_INT, check_json
from ..messages import AudioPart, FilePart, ImagePart, Message, Part, StoredMessage, TextPart, ToolCall, located
from ..session import SessionState, SummaryRecord

__all__ = [
    "decode_datetime",
    "decode_message",
    "decode_state",
    "dumps",
    "encode_datetime",
    "encode_message",
    "encode_state",
    "loads",
    "read_row",
    "read_state",
]

_IMAGE_FIELDS = ("url", "path", "data", "media_type", "detail", "width", "height")
_FILE_FIELDS = ("data", "file_id", "url", "filename", "media_type")
_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "name", "metadata", "created_at", "id", "extra"}
)


def dumps(value: Any) -> str:
    """Compact, deterministic JSON on one line (key order is the order the encoders build)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def loads(text: str | bytes) -> Any:
    """Parse JSON text (the inverse of :func:`dumps`); raises ValueError on anything else.

    Bytes that are not UTF-8 and nesting too deep to parse are ValueErrors too, so a reader
    turns every kind of damage into one named error.
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# -- timestamps ------------------------------------------------------------------------------
def encode_datetime(value: datetime) -> str:
    """ISO 8601 with microseconds; a ``ZoneInfo`` zone's name is appended in brackets."""
    text = value.isoformat(timespec="microseconds")
    if isinstance(value.tzinfo, ZoneInfo):
        text += f"[{value.tzinfo.key}]"
    return text


def decode_datetime(text: object) -> datetime:
    """The inverse of :func:`encode_datetime`; raises ValueError on anything else."""
    if not isinstance(text, str):
        raise ValueError(f"a timestamp must be a string, got {type(text).__name__}")
    zone = None
    if text.endswith("]") and "[" in text:
        text, _, name = text[:-1].partition("[")
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {name!r}") from exc
    value = datetime.fromisoformat(text)
    if zone is None:
        return value
    if value.tzinfo is None:
        raise ValueError(f"time zone {zone.key!r} given without a UTC offset")
    # Keep the recorded wall time and pick the fold whose offset is the recorded one: this
    # restores ambiguous and even skipped (nonexistent) local times exactly.
    wall = value.replace(tzinfo=None)
    for fold in (0, 1):
        candidate = wall.replace(tzinfo=zone, fold=fold)
        if candidate.utcoffset() == value.utcoffset():
            return candidate
    return value.astimezone(zone)  # the zone's rules changed since: keep the instant


# -- messages --------------------------------------------------------------------------------
def _with_extra(out: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    if extra:
        out["extra"] = dict(extra)
    return out


def _encode_part(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return _with_extra({"type": "text", "text": part.text}, part.extra)
    if isinstance(part, ImagePart):
        out: dict[str, Any] = {"type": "image"}
        out.update((name, getattr(part, name)) for name in _IMAGE_FIELDS if getattr(part, name) is not None)
        return _with_extra(out, part.extra)
    if isinstance(part, AudioPart):
        return _with_extra({"type": "audio", "data": part.data, "format": part.format}, part.extra)
    out = {"type": "file"}
    out.update((name, getattr(part, name)) for name in _FILE_FIELDS if getattr(part, name) is not None)
    return _with_extra(out, part.extra)


def _decode_part(value: Any) -> Part:
    if not isinstance(value, dict):
        raise InvalidMessageError(f"a part must be an object, got {type(value).__name__}", field="content")
    fields = dict(value)
    kind = fields.pop("type", None)
    try:
        if kind == "text":
            return TextPart(**fields)
        if kind == "image":
            return ImagePart(**fields)
        if kind == "audio":
            return AudioPart(**fields)
        if kind == "file":
            return FilePart(**fields)
    except TypeError as exc:  # an unknown or missing field
        raise InvalidMessageError(str(exc), field=f"content[{kind}]") from None
    raise InvalidMessageError(f"unknown part type {kind!r}", field="content")


def encode_message(message: Message) -> dict[str, Any]:
    """A JSON-ready dict holding every field of ``message``."""
    out: dict[str, Any] = {"role": message.role}
    content = message.content
    if isinstance(content, str):
        out["content"] = content
    elif content is not None:
        out["content"] = [_encode_part(part) for part in content]
    if message.tool_calls:
        out["tool_calls"] = [
            _with_extra({"id": c.id, "name": c.name, "arguments": c.arguments}, c.extra) for c in message.tool_calls
        ]
    for name in ("tool_call_id", "name"):
        if getattr(message, name) is not None:
            out[name] = getattr(message, name)
    if message.metadata:
        out["metadata"] = dict(message.metadata)
    if message.created_at is not None:
        out["created_at"] = encode_datetime(message.created_at)
    if message.id is not None:
        out["id"] = message.id
    return _with_extra(out, message.extra)


def _decode_call(index: int, call: Any) -> ToolCall:
    try:
        return ToolCall(**call)
    except TypeError as exc:
        raise InvalidMessageError(str(exc), field=f"tool_calls[{index}]") from None
    except InvalidMessageError as exc:
        raise located(exc, f"tool_calls[{index}]") from None


def decode_message(value: Any) -> Message:
    """The inverse of :func:`encode_message`; raises InvalidMessageError naming the bad field."""
    if not isinstance(value, dict):
        raise InvalidMessageError(f"a message must be an object, got {type(value).__name__}")
    unknown = set(value) - _MESSAGE_KEYS
    if unknown:
        raise InvalidMessageError(f"unknown field(s) {sorted(unknown)}")
    content = value.get("content")
    if isinstance(content, list):
        content = tuple(_decode_part(part) for part in content)
    calls = value.get("tool_calls", ())
    if not isinstance(calls, list | tuple):
        raise InvalidMessageError("must be a list", field="tool_calls")
    tool_calls = tuple(_decode_call(i, call) for i, call in enumerate(calls))
    created_at = value.get("created_at")
    try:
        when = decode_datetime(created_at) if created_at is not None else None
    except ValueError as exc:
        raise InvalidMessageError(str(exc), field="created_at") from None
    return Message(
        role=value.get("role"),  # type: ignore[arg-type]  # Message validates the role
        content=content,
        tool_calls=tool_calls,
        tool_call_id=value.get("tool_call_id"),
        name=value.get("name"),
        metadata=value.get("metadata") or {},
        created_at=when,
        id=value.get("id"),
        extra=value.get("extra") or {},
    )


# -- session state ---------------------------------------------------------------------------
def encode_state(state: SessionState, *, with_version: bool = False) -> dict[str, Any]:
    """A JSON-ready dict of ``state``; the version is included only on request (SQL keeps it in a column)."""
    out: dict[str, Any] = {
        "window_start": state.window_start,
        "folded_to": state.folded_to,
        "pinned_start": state.pinned_start,
    }
    summary = state.summary
    if summary is not None:
        out["summary"] = {
            "text": summary.text,
            "first_seq": summary.first_seq,
            "last_seq": summary.last_seq,
            "tokens": summary.tokens,
            "created_at": encode_datetime(summary.created_at),
        }
        if summary.message is not None:  # a provider's compaction, re-sent as it is
            out["summary"]["message"] = encode_message(summary.message)
    out["stats"] = dict(state.stats)
    if with_version:
        out["version"] = state.version
    return out


def decode_state(value: Any, *, version: int | None = None) -> SessionState:
    """The inverse of :func:`encode_state`; raises ValueError (or KeyError/TypeError) on bad input."""
    if not isinstance(value, dict):
        raise ValueError(f"a session state must be an object, got {type(value).__name__}")
    summary = value.get("summary")
    record = None
    if summary is not None:
        record = SummaryRecord(
            _typed(summary["text"], str),
            _typed(summary["first_seq"]),
            _typed(summary["last_seq"]),
            _typed(summary["tokens"]),
            decode_datetime(summary["created_at"]),
            decode_message(summary["message"]) if summary.get("message") is not None else None,
        )
    stats = value.get("stats", {})
    if not isinstance(stats, dict):
        raise ValueError("stats must be an object")
    _check_stats(stats)
    return SessionState(
        window_start=_typed(value.get("window_start", 0)),
        folded_to=_typed(value.get("folded_to", -1)),
        pinned_start=_typed(value.get("pinned_start", 0)),
        summary=record,
        stats=stats,
        version=_typed(value.get("version", 0) if version is None else version),
    )


def _typed(value: Any, kind: type = int) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"expected {kind.__name__}, got {_clip(value)}")
    if isinstance(value, int) and not -1 <= value <= MAX_INT:
        raise ValueError(f"expected an integer from -1 to {MAX_INT}, got {_clip(value)}")
    return value


def _clip(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"{value.bit_length()}-bit int"
    return text if len(text) <= 60 else text[:57] + "..."


_COUNTERS = (
    "messages",
    "evicted_messages",
    "evicted_tokens",
    "summarized_messages",
    "summarized_tokens",
    "summaries",
    "summary_failures",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
)


def _check_stats(stats: dict[str, Any]) -> None:
    """The memory's stats as it reads them: counters, seqs, cost and warnings of the right types and ranges."""
    try:
        check_json(stats, "stats")
    except InvalidMessageError as exc:
        raise ValueError(str(exc)) from None
    for key in _COUNTERS:
        if key in stats and (isinstance(stats[key], bool) or not isinstance(stats[key], int) or stats[key] < 0):
            raise ValueError(f"stats.{key} must be a non-negative integer, got {_clip(stats[key])}")
    for key in ("last_seq", "first_evicted"):
        if stats.get(key) is not None and (isinstance(stats[key], bool) or not isinstance(stats[key], int)):
            raise ValueError(f"stats.{key} must be an integer or null, got {_clip(stats[key])}")
        if stats.get(key) is not None and stats[key] < 0:
            raise ValueError(f"stats.{key} must not be negative, got {stats[key]}")
    cost = stats.get("cost_usd", 0.0)
    if isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0:
        raise ValueError(f"stats.cost_usd must be a non-negative number, got {_clip(cost)}")
    warnings = stats.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise ValueError("stats.warnings must be a list of strings")
    for key in ("config", "calibration"):
        if stats.get(key) is not None and not isinstance(stats[key], dict):
            raise ValueError(f"stats.{key} must be an object, got {_clip(stats[key])}")


# -- reading what a store holds ------------------------------------------------------------
#: What decoding damaged data raises (UnicodeDecodeError and InvalidMessageError are ValueErrors).
READ_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError)


def corrupt(backend: str, session_id: str, seq: int | None, exc: BaseException | str) -> StoreError:
    """The error for damaged stored data: the backend, the session and the seq, never a raw exception."""
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    if len(reason) > 200:
        reason = reason[:197] + "..."
    where = f"session {session_id!r}" + (f", seq {seq}" if seq is not None else "")
    return StoreError(f"{backend}: {where}: the stored data is corrupt ({reason}); other sessions are not affected")


def read_row(backend: str, session_id: str, seq: Any, payload: Any, tokens: Any) -> StoredMessage:
    """A stored message row decoded, or a StoreError naming the backend, session and seq."""
    try:
        if isinstance(payload, bytes | bytearray | memoryview):
            payload = bytes(payload)
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_INT:
            raise ValueError(f"seq {_clip(seq)} is not a valid seq")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_INT:
            raise ValueError(f"token count {_clip(tokens)} is not a non-negative integer")
        return StoredMessage(seq, decode_message(loads(payload)), tokens)
    except READ_ERRORS as exc:
        raise corrupt(backend, session_id, seq if isinstance(seq, int) else None, exc) from None


def read_state(backend: str, session_id: str, payload: Any, *, version: Any = None) -> SessionState:
    """A stored session state decoded (JSON text or an already parsed object), or a StoreError."""
    try:
        value = loads(payload) if isinstance(payload, str | bytes) else payload
        if version is not None:
            _typed(version)
        return decode_state(value, version=version)
    except READ_ERRORS as exc:
        raise corrupt(backend, session_id, None, f"its state: {type(exc).__name__}: {exc}") from None
