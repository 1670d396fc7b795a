"""Pure helpers every built-in store shares: ids, forks, and the JSONL export format.

Nothing here does I/O, so the memory, SQLite and file backends (and their
async twins) cannot disagree on what a prefix matches, what a fork's state
is, or what an export looks like.

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

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from ..errors import AmbiguousSessionError, InvalidMessageError, SessionNotFoundError, StoreError
from ..limits import CEILINGS, MAX_INT, Limits, check_int, check_json, check_limits, check_text
from ..messages import Message, StoredMessage
from ..session import SessionInfo, SessionState
from .codec import (
    READ_ERRORS,
    corrupt,
    decode_datetime,
    decode_message,
    decode_state,
    dumps,
    encode_datetime,
    encode_message,
    encode_state,
)
from .codec import loads as json_loads

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Imported",
    "Segment",
    "check_batch",
    "check_deletable",
    "damaged_info",
    "export_header",
    "export_line",
    "fork_state",
    "json_object",
    "new_session_id",
    "now",
    "parse_export",
    "pick",
    "segments",
]

FORMAT = "convmem.session"
FORMAT_VERSION = 1
_FOREVER = 2**62


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_session_id() -> str:
    return uuid.uuid4().hex


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def read_session_info(
    backend: str, name: str, row: Any, parent_id: str | None, decode_time: Callable[[Any], datetime]
) -> SessionInfo:
    """A session record's info (a row with the sessions table's columns); corrupt is a StoreError naming it."""
    try:
        metadata = json_loads(row.metadata)
        if not isinstance(metadata, dict):
            raise ValueError(f"metadata must be an object, got {type(metadata).__name__}")
        return SessionInfo(
            name,
            row.user_id,
            row.title,
            row.model,
            metadata,
            decode_time(row.created_at),
            decode_time(row.updated_at),
            row.base_count + row.message_count,
            row.base_tokens + row.tokens,
            parent_id,
            row.fork_seq,
        )
    except READ_ERRORS as exc:
        raise corrupt(backend, name, None, exc) from None


def damaged_info(session_id: str, user_id: str | None, error: StoreError) -> SessionInfo:
    """How ``list_sessions`` reports a session whose record cannot be read: listed, with the reason."""
    return SessionInfo(session_id, user_id, None, None, {}, EPOCH, EPOCH, 0, 0, damaged=str(error))


def pick(prefix: str, matches: Iterable[str]) -> str:
    """The one session id among ``matches`` (ids starting with ``prefix``, exact match first)."""
    found = sorted(set(matches))
    if prefix in found:
        return prefix
    if len(found) == 1 and prefix:
        return found[0]
    if len(found) > 1 and prefix:
        raise AmbiguousSessionError(prefix, found)
    raise SessionNotFoundError(prefix)


def check_batch(messages: Sequence[tuple[Message, int]]) -> None:
    """Every message carries a unique id and a non-negative token count."""
    seen: set[str] = set()
    for index, (message, tokens) in enumerate(messages):
        if message.id is None:
            raise InvalidMessageError("a stored message needs an id", field="id", index=index)
        if message.id in seen:
            raise InvalidMessageError(f"duplicate message id {message.id!r}", field="id", index=index)
        seen.add(message.id)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidMessageError(f"token count must be a non-negative integer, got {tokens!r}", index=index)


def json_object(value: Mapping[str, Any], what: str = "session metadata") -> dict[str, Any]:
    """A detached JSON copy of ``value``, as every backend will read it back."""
    try:
        copy: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be a JSON object: {exc}") from None
    return copy


def check_deletable(session_id: str, doomed: set[int], fork_seq: int | None, forks: list[tuple[str, int]]) -> None:
    """Only a session's own rows can be deleted, and only those no fork shares."""
    if fork_seq is not None and doomed and min(doomed) <= fork_seq:
        raise StoreError(
            f"session {session_id!r} shares seqs up to {fork_seq} with the session it was forked "
            "from; they cannot be deleted here"
        )
    for child, at in forks:
        if doomed and min(doomed) <= at:
            raise StoreError(f"fork {child!r} shares seqs up to {at} of session {session_id!r}; they cannot be deleted")


# -- forks -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Segment:
    """Rows ``lo..hi`` of a fork's history live under ``session_id``."""

    session_id: str
    lo: int
    hi: int

    def clip(self, lo: int, hi: int | None) -> tuple[int, int] | None:
        low, high = max(lo, self.lo), self.hi if hi is None else min(hi, self.hi)
        return (low, high) if low <= high else None


def segments(chain: Sequence[tuple[str, int | None]]) -> list[Segment]:
    """Where a session's history lives, oldest first.

    ``chain`` is ``(session_id, fork_seq)`` from the session itself up to the
    root of its fork tree (the root's ``fork_seq`` is None).
    """
    out = []
    cap = _FOREVER
    for session_id, fork_seq in chain:
        lo = 0 if fork_seq is None else fork_seq + 1
        if lo <= cap:
            out.append(Segment(session_id, lo, cap))
        if fork_seq is not None:
            cap = min(cap, fork_seq)
    return out[::-1]


_EVICTION_COUNTERS = ("evicted_messages", "evicted_tokens", "summarized_messages", "summarized_tokens")


def fork_state(state: SessionState, at_seq: int, *, messages: int) -> SessionState:
    """The state a fork at ``at_seq`` starts with (version 0).

    If the window still started at or before the fork point, the fork keeps
    the parent's window start, summary and stats. Otherwise the window had
    moved past the fork point and what it held then is unknown: the fork keeps
    the summary only if it ends before the fork point, and everything after it
    up to ``at_seq`` becomes the window, which the memory's strategy trims on
    its next turn. The memory's own counters (message count, last seq and, in
    the second case, the eviction counters) are rebased so the fork's stats
    describe the fork.
    """
    stats: dict[str, Any] = dict(state.stats)
    if "messages" in stats:
        stats["messages"] = messages
    if "last_seq" in stats:
        stats["last_seq"] = at_seq
    pinned_start = min(state.pinned_start, at_seq + 1)
    if state.window_start <= at_seq + 1:
        return SessionState(state.window_start, state.folded_to, pinned_start, state.summary, stats)
    summary = state.summary if state.summary is not None and state.folded_to <= at_seq else None
    for key in _EVICTION_COUNTERS:
        if key in stats:
            stats[key] = 0
    if summary is not None:
        folded_to = state.folded_to
        for kind in ("messages", "tokens"):
            if f"summarized_{kind}" in state.stats:
                stats[f"summarized_{kind}"] = stats[f"evicted_{kind}"] = state.stats[f"summarized_{kind}"]
    else:
        folded_to = -1
        if "first_evicted" in stats:
            stats["first_evicted"] = None
    return SessionState(folded_to + 1, folded_to, pinned_start, summary, stats)


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

    def info(self, user_id: str | None) -> SessionInfo:
        return SessionInfo(
            self.id,
            user_id,
            self.title,
            self.model,
            self.metadata,
            self.created_at,
            self.updated_at,
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
    if created.tzinfo is None or updated.tzinfo is None:
        raise ValueError("session timestamps need a UTC offset")
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
