"""What is sealed of each row, and what stays in the clear for the store to do its work.

A message keeps in the clear only what the store's rules read: its role, id, ``created_at`` (retention),
the ids and names of its tool calls and its ``tool_call_id`` (a batch is checked as a conversation: every
result after its call). Everything else (content and parts, tool call arguments, name, metadata, extra) is
one sealed JSON value in ``content``, bound to the user, the session it was written to and the message id.
``created_at`` is left out of the sealed value because a retry may stamp it again: the stores compare a
retry's content with ``created_at`` aside, and the sealed bytes of equal content are equal (keys.seal).

A session state keeps its seqs and stats (the stores' fork and write rules read them); the summary's text
and a provider's compaction message are sealed in the summary's text, bound to the user and the session.
A fact keeps its ids, times and provenance (the fact book matches them); its text, subject, metadata and
invalidation reason are sealed in its text. A block keeps its name, version and settings; its value and
description are sealed in its value, bound to the user, the name and the version.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import DecryptionError
from ...longterm.blocks.store import BlockRecord
from ...longterm.facts.model import Fact
from ...messages import Message, ToolCall
from ...session import SessionState, SummaryRecord
from ..codec import decode_message, dumps, encode_datetime, encode_message, loads
from .keys import DataKey, aad, open_sealed, parse_sealed, seal

__all__ = [
    "key_of",
    "open_block",
    "open_fact",
    "open_message",
    "open_state",
    "seal_block",
    "seal_fact",
    "seal_message",
    "seal_state",
]

_CLEAR = ("role", "id", "created_at")


def key_of(value: object, what: str) -> str:
    """The id of the data key that sealed ``value`` (DecryptionError if it is not sealed)."""
    return parse_sealed(value, what)[0]


def _json(plain: bytes, what: str) -> Any:
    try:
        return loads(plain)
    except ValueError:  # authenticated, so written by a convmem that spoke another format
        raise DecryptionError(f"{what}: its decrypted value is not what this version reads") from None


# -- messages -----------------------------------------------------------------------------------------
def seal_message(key: DataKey, user_id: str | None, session_id: str, message: Message) -> Message:
    """The stored form of ``message`` (see the module docstring)."""
    sealed = {k: v for k, v in encode_message(message).items() if k not in _CLEAR}
    context = aad("message", user_id, message.id)
    return Message(
        role=message.role,
        content=seal(key, context, dumps(sealed).encode(), origin=session_id),
        tool_calls=tuple(ToolCall(c.id, c.name) for c in message.tool_calls),
        tool_call_id=message.tool_call_id,
        created_at=message.created_at,
        id=message.id,
    )


def open_message(key: DataKey, user_id: str | None, stored: Message) -> tuple[Message, str]:
    """(the message, the session it was written to) of a stored one; DecryptionError if it does not open."""
    what = f"message {stored.id!r}"
    plain, origin = open_sealed(key, aad("message", user_id, stored.id), stored.content, what)
    value = _json(plain, what)
    if not isinstance(value, dict):
        raise DecryptionError(f"{what}: its decrypted value is not what this version reads")
    value["role"], value["id"] = stored.role, stored.id
    if stored.created_at is not None:
        value["created_at"] = encode_datetime(stored.created_at)  # decoded with the rest: one Message built
    try:
        return decode_message(value), origin
    except ValueError:
        raise DecryptionError(f"{what}: its decrypted value is not what this version reads") from None


# -- session state -----------------------------------------------------------------------------------
def seal_state(key: DataKey, user_id: str | None, session_id: str, state: SessionState) -> SessionState:
    """``state`` with its summary's text and compaction message sealed."""
    summary = state.summary
    if summary is None:
        return state
    inner: dict[str, Any] = {"text": summary.text}
    if summary.message is not None:
        inner["message"] = encode_message(summary.message)
    text = seal(key, aad("summary", user_id), dumps(inner).encode(), origin=session_id)
    return replace(state, summary=replace(summary, text=text, message=None))


def open_state(key: DataKey, user_id: str | None, state: SessionState) -> tuple[SessionState, str | None]:
    """(the state, the session its summary was written in: None without one) of a stored state."""
    summary = state.summary
    if summary is None:
        return state, None
    plain, origin = open_sealed(key, aad("summary", user_id), summary.text, "the session's summary")
    value = _json(plain, "the session's summary")
    try:
        message = decode_message(value["message"]) if value.get("message") is not None else None
        record = SummaryRecord(value["text"], summary.first_seq, summary.last_seq, summary.tokens, summary.created_at)
    except (KeyError, TypeError, AttributeError, ValueError):
        raise DecryptionError("the session's summary: its decrypted value is not what this version reads") from None
    return replace(state, summary=replace(record, message=message)), origin


def sealed_key_of_state(state: SessionState) -> str | None:
    """The data key id of a stored state's summary (None: no summary)."""
    return None if state.summary is None else key_of(state.summary.text, "the session's summary")


# -- facts and blocks --------------------------------------------------------------------------------
def seal_fact(key: DataKey, fact: Fact) -> Fact:
    """``fact`` with its text, subject, metadata and invalidation reason sealed in its text."""
    inner: dict[str, Any] = {"text": fact.text}
    for name in ("subject", "invalid_reason"):
        if getattr(fact, name) is not None:
            inner[name] = getattr(fact, name)
    if fact.metadata:
        inner["metadata"] = dict(fact.metadata)
    text = seal(key, aad("fact", fact.user_id, fact.id), dumps(inner).encode())
    return replace(fact, text=text, subject=None, invalid_reason=None, metadata={})


def open_fact(key: DataKey, fact: Fact) -> Fact:
    what = f"fact {fact.id!r}"
    plain, _ = open_sealed(key, aad("fact", fact.user_id, fact.id), fact.text, what)
    value = _json(plain, what)
    try:
        return replace(
            fact,
            text=value["text"],
            subject=value.get("subject"),
            invalid_reason=value.get("invalid_reason"),
            metadata=value.get("metadata") or {},
        )
    except (KeyError, TypeError, AttributeError):
        raise DecryptionError(f"{what}: its decrypted value is not what this version reads") from None


def seal_block(key: DataKey, record: BlockRecord, version: int) -> BlockRecord:
    """``record`` as saved at ``version``, its value and description sealed in its value."""
    inner = {"value": record.value, "description": record.description}
    value = seal(key, aad("block", record.scope, record.name, version), dumps(inner).encode())
    return replace(record, value=value, description=None)


def open_block(key: DataKey, record: BlockRecord) -> BlockRecord:
    what = f"block {record.name!r}"
    plain, _ = open_sealed(key, aad("block", record.scope, record.name, record.version), record.value, what)
    value = _json(plain, what)
    try:
        return replace(record, value=value["value"], description=value.get("description"))
    except (KeyError, TypeError, AttributeError):
        raise DecryptionError(f"{what}: its decrypted value is not what this version reads") from None
