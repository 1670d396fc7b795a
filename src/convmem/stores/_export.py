"""The JSONL export format every built-in store writes and reads (``export_jsonl`` / ``import_jsonl``).

Nothing here does I/O, so no two backends (or their async twins) can
disagree on what an export looks like or which imports are refused.

Export format, version 1 (one JSON object per line, UTF-8, ``\\n`` ends every line)::

    {"format":"convmem.session","version":1,"session":{...},"state":{...},"messages":N}
    {"seq":0,"tokens":12,"message":{"role":"system","content":"...","id":"..."}}
    ...

The header holds the session's id, title, model, metadata, timestamps and
next seq, and its state with the version. It holds no ``user_id``: the user is
the namespace the file is imported into. A fork is exported with the history
it shares, so the file stands alone. Importing parses and checks every line
before anything is written; the first bad line is reported by number.

An import obeys the rules of ``add``: each message keeps the session's own
:class:`~convmem.limits.Limits` (saved with its options; the defaults when none
are), the messages in seq order make a valid conversation (every tool result
follows the call it answers, no call is left unanswered before the next message;
only the newest may still await results), the state's window starts at a unit,
and a stored summary message is a provider's compaction (an assistant message),
never a system one. The token counts an export carries are not believed: the
marker that says which counter made them (``counted_by``) is dropped, so a memory
opening the session recounts what it sends (:mod:`convmem.memory._resume`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from ..errors import ConfigurationError, InvalidMessageError, StoreError
from ..formats._native import compaction_of
from ..limits import MAX_INT, Limits, as_utc, check_int, check_json, check_limits, check_text, saved_limits
from ..messages import PINNED_ROLES, StoredMessage
from ..policy.units import Window
from ..session import COUNTED_KEY, SessionInfo, SessionState
from ._record import SessionRecord
from .codec import (
    decode_datetime,
    decode_message,
    decode_state,
    dumps,
    encode_datetime,
    encode_message,
    encode_state,
)
from .codec import loads as json_loads

__all__ = ["FORMAT", "FORMAT_VERSION", "Imported", "export_header", "export_line", "export_session", "parse_export"]

FORMAT = "convmem.session"
FORMAT_VERSION = 1


# -- export / import -------------------------------------------------------------------------
def export_header(info: SessionInfo, state: SessionState, next_seq: int) -> bytes:
    session = {
        "id": info.id,
        "title": info.title,
        "model": info.model,
        "metadata": dict(info.metadata),
        "created_at": encode_datetime(info.created_at),
        "updated_at": encode_datetime(info.updated_at),
        "next_seq": next_seq,
    }
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "session": session,
        "state": encode_state(_uncounted(state), with_version=True),
        "messages": info.message_count,
    }
    return (dumps(header) + "\n").encode()


def export_session(record: SessionRecord, rows: Iterable[StoredMessage]) -> bytes:
    """A whole export: the header from the session's record, then its history's lines."""
    return b"".join([export_header(record.info(), record.state(), record.next_seq), *map(export_line, rows)])


def export_line(stored: StoredMessage) -> bytes:
    """One message line; the file backend stores exactly these lines."""
    return (
        dumps({"seq": stored.seq, "tokens": stored.tokens, "message": encode_message(stored.message)}) + "\n"
    ).encode()


def parse_line(line: bytes) -> StoredMessage:
    """The inverse of :func:`export_line` (without the newline); raises ValueError/InvalidMessageError."""
    value = json_loads(line)
    if not isinstance(value, dict) or set(value) != {"seq", "tokens", "message"}:
        raise ValueError('expected an object with exactly "seq", "tokens" and "message"')
    seq, tokens = value["seq"], value["tokens"]
    for name, number in (("seq", seq), ("tokens", tokens)):
        check_int(number, name)
    return StoredMessage(seq, decode_message(value["message"]), tokens)


@dataclass(frozen=True, slots=True)
class Imported:
    """A parsed, fully checked export, ready to be written in one transaction."""

    id: str
    title: str | None
    model: str | None
    metadata: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime
    next_seq: int
    state: SessionState
    rows: list[StoredMessage]

    def record(self, backend: str, key: str, user_id: str | None) -> SessionRecord:
        """The session this import creates, keyed by the backend as ``key``."""
        return SessionRecord(
            backend,
            key,
            self.id,
            user_id,
            self.title,
            self.model,
            self.metadata,
            self.created_at,
            self.updated_at,
            self.state,
            self.state.version,
            self.next_seq,
            len(self.rows),
            sum(r.tokens for r in self.rows),
        )


def _header(line: bytes) -> tuple[Imported, int]:
    """The parsed header and the number of message lines it announces."""
    value = json_loads(line)
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise ValueError(f"not a convmem session export (expected a header with format {FORMAT!r})")
    if value.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"unsupported export version {value.get('version')!r}; this convmem reads version {FORMAT_VERSION}"
        )
    session = value["session"]
    session_id, next_seq = session["id"], session["next_seq"]
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session id must be a non-empty string")
    check_text(session_id, "session.id")
    check_int(next_seq, "session.next_seq")
    for name in ("title", "model"):
        if session.get(name) is not None and not isinstance(session[name], str):
            raise ValueError(f"session {name} must be a string")
        if session.get(name) is not None:
            check_text(session[name], f"session.{name}")
    metadata = session.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("session metadata must be an object")
    check_json(metadata, "session.metadata")
    created, updated = (decode_datetime(session[k]) for k in ("created_at", "updated_at"))
    created, updated = as_utc(created), as_utc(updated)  # naive is UTC, as everywhere a time enters
    count = value["messages"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"messages must be a non-negative integer, got {count!r}")
    state = decode_state(value["state"])
    return Imported(
        session_id,
        session.get("title"),
        session.get("model"),
        metadata,
        created.astimezone(timezone.utc),
        updated.astimezone(timezone.utc),
        next_seq,
        state,
        [],
    ), count


def parse_export(data: bytes | str, limits: Limits | None = None) -> Imported:
    """Parse and check a whole export; raises StoreError naming the first bad line.

    Every field of every line is checked before anything is written: the types and ranges of
    seqs, token counts and the state, each message against ``limits`` (by default the session's
    own, saved with its options, else the defaults: what its ``add`` would take), and the
    messages as a conversation (see the module docstring).
    """
    raw = data.encode() if isinstance(data, str) else data
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise StoreError("import: the data is empty; nothing was imported")
    number = 1
    try:
        head, expected = _header(lines[0])
        limits = limits or _session_limits(head.state)
        rows: list[StoredMessage] = []
        ids: set[str] = set()
        for number, line in enumerate(lines[1:], start=2):  # noqa: B007 - number names the bad line
            stored = parse_line(line)
            check_limits(stored.message, limits)
            if rows and stored.seq <= rows[-1].seq:
                raise ValueError(f"seq {stored.seq} does not follow seq {rows[-1].seq}")
            if stored.seq >= head.next_seq:
                raise ValueError(f"seq {stored.seq} is not below the header's next_seq {head.next_seq}")
            if stored.message.id is None or stored.message.id in ids:
                raise ValueError(f"message id {stored.message.id!r} is missing or repeated")
            ids.add(stored.message.id)
            rows.append(stored)
        number = len(lines) + 1
        if sum(r.tokens for r in rows) > MAX_INT:
            raise ValueError(f"the token counts add up to more than {MAX_INT}")
        if len(rows) != expected:
            raise ValueError(f"the header announces {expected} messages but the data holds {len(rows)} (truncated?)")
        try:
            Window().check_batch([r.message for r in rows])  # the order add keeps, pairing and roles
        except InvalidMessageError as exc:
            number = (exc.index or 0) + 2
            raise ValueError(exc.reason) from None
        number = 1
        _check_state(head.state, rows, head.next_seq)
    except (ValueError, KeyError, TypeError, AttributeError, InvalidMessageError) as exc:
        reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise StoreError(f"import: line {number}: {reason}; nothing was imported") from None
    if head.state.stats.get("last_seq") is not None and head.state.stats["last_seq"] >= head.next_seq:
        raise StoreError(
            f"import: line 1: stats.last_seq {head.state.stats['last_seq']} is not below next_seq {head.next_seq};"
            " nothing was imported"
        )
    return replace(head, rows=rows, state=_uncounted(head.state))  # its counts are not believed


def _uncounted(state: SessionState) -> SessionState:
    """``state`` without the name of the counter its counts are believed to be (:data:`COUNTED_KEY`).

    An export never carries it (so export, import, export is byte for byte) and an import drops it: whoever wrote
    the file, its counts are not a memory's own, and the memory that opens the session recounts what it sends.
    """
    if COUNTED_KEY not in state.stats:
        return state
    return replace(state, stats={k: v for k, v in state.stats.items() if k != COUNTED_KEY})


def _session_limits(state: SessionState) -> Limits:
    """The limits the session's saved options name (the defaults when they name none)."""
    config = state.stats.get("config")
    try:
        return saved_limits(config.get("limits") if isinstance(config, Mapping) else None) or Limits()
    except ConfigurationError as exc:
        raise ValueError(f"state.stats.config.limits: {exc}") from None


def _check_state(state: SessionState, rows: list[StoredMessage], next_seq: int) -> None:
    """The state's positions fit the rows: ranges, a window that starts at a unit, a compaction as the summary."""
    for name, value in (("window_start", state.window_start), ("pinned_start", state.pinned_start)):
        if not 0 <= value <= next_seq:
            raise ValueError(f"state.{name} {value} is outside 0..next_seq {next_seq}")
    first = next((r for r in rows if r.seq >= state.window_start and r.message.role not in PINNED_ROLES), None)
    if first is not None and first.message.role == "tool":
        raise ValueError(
            f"state.window_start {state.window_start} starts the window at a tool result (seq {first.seq}),"
            " inside the unit of its call"
        )
    summary = state.summary
    if summary is not None and summary.message is not None:
        message = summary.message
        if message.role != "assistant" or not message.extra or not compaction_of(message.extra):
            raise ValueError("state.summary.message must be a provider's compaction (an assistant message)")
