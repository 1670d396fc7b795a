"""Rows of the Redis store as read: the session hash (as a :class:`~convmem.stores._record.SessionRecord`)
and the message members, decoded.

Damaged data (a hash field that is not a number, a member that is not ``seq|tokens|idlen|id``
followed by a message's JSON, a state that does not decode) is a
:class:`~convmem.errors.StoreError` naming the backend, the session and the seq.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import StoreError
from ...messages import Message, StoredMessage
from ...session import SessionInfo
from .._record import SessionRecord, damaged_info, unscoped
from ..codec import READ_ERRORS, corrupt, dumps, encode_message, read_row

__all__ = ["BACKEND", "listed", "member", "pairs", "record", "row", "text"]

BACKEND = "redis"


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def record(key: str, fields: dict[bytes, bytes]) -> SessionRecord:
    """A session hash decoded (``key``: the scoped session id); a field that is not a number is a StoreError."""
    name = unscoped(key)

    def number(field: bytes) -> int:
        try:
            return int(fields.get(field, b"0"))
        except READ_ERRORS as exc:
            raise corrupt(BACKEND, name, None, f"its {field.decode()}: {exc}") from None

    user = fields.get(b"user", b"")
    if not user:
        raise corrupt(BACKEND, name, None, "its user is missing")
    parent = text(fields.get(b"parent"))
    return SessionRecord(
        BACKEND,
        key,
        name,
        None if user == b"-" else user[1:].decode(errors="surrogateescape"),
        fields.get(b"title"),
        fields.get(b"model"),
        fields.get(b"metadata", b""),
        fields.get(b"created", b""),
        fields.get(b"updated", b""),
        fields.get(b"state", b""),
        number(b"version"),
        number(b"next_seq"),
        number(b"count"),
        number(b"tokens"),
        parent,
        None if parent is None else unscoped(parent),
        None if b"fork_seq" not in fields else number(b"fork_seq"),
        number(b"base_count"),
        number(b"base_tokens"),
        fields.get(b"deleted") == b"1",
    )


def listed(key: str, fields: dict[bytes, bytes], user_id: str | None) -> SessionInfo:
    """The info ``list_sessions`` shows: a corrupt hash is listed as damaged, not raised."""
    try:
        return record(key, fields).listed()
    except StoreError as exc:
        return damaged_info(unscoped(key), user_id, exc)


def pairs(flat: Sequence[bytes] | dict[bytes, bytes]) -> dict[bytes, bytes]:
    if isinstance(flat, dict):
        return flat
    return dict(zip(flat[::2], flat[1::2], strict=True))


def member(message: Message, tokens: int) -> str:
    """A row as the scripts store it, minus its seq: ``tokens|idlen|id`` and the message JSON."""
    mid = message.id or ""
    return f"{tokens}|{len(mid.encode())}|{mid}{dumps(encode_message(message))}"


def row(raw: bytes, session_id: str) -> StoredMessage:
    """A stored row (``seq|tokens|idlen|id`` + JSON); damage is a StoreError naming the session and seq."""
    fields = raw.split(b"|", 3)
    try:
        seq, tokens, payload = int(fields[0]), int(fields[1]), fields[3][int(fields[2]) :]
    except READ_ERRORS as exc:
        raise corrupt(BACKEND, unscoped(session_id), None, exc) from None
    return read_row(BACKEND, unscoped(session_id), seq, payload, tokens)
