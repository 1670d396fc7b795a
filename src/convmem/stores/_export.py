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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidMessageError, StoreError
from ..limits import CEILINGS, MAX_INT, Limits, as_utc, check_int, check_json, check_limits, check_text
from ..messages import StoredMessage
from ..session import SessionInfo, SessionState
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
        "state": encode_state(state, with_version=True),
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


def parse_export(data: bytes | str, limits: Limits = CEILINGS) -> Imported:
    """Parse and check a whole export; raises StoreError naming the first bad line.

    Every field of every line is checked before anything is written: the types and ranges of
    seqs, token counts and the state, and each message against ``limits`` (by default the
    ceilings, so anything a memory could store can be imported back).
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
    except (ValueError, KeyError, TypeError, AttributeError, InvalidMessageError) as exc:
        reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise StoreError(f"import: line {number}: {reason}; nothing was imported") from None
    if head.state.stats.get("last_seq") is not None and head.state.stats["last_seq"] >= head.next_seq:
        raise StoreError(
            f"import: line 1: stats.last_seq {head.state.stats['last_seq']} is not below next_seq {head.next_seq};"
            " nothing was imported"
        )
    return replace(head, rows=rows)
