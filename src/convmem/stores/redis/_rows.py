"""Rows of the Redis store as read: the session hash and the message members, decoded.

Damaged data (a hash field that is not a number, a member that is not ``seq|tokens|idlen|id``
followed by a message's JSON, a state that does not decode) is a
:class:`~convmem.errors.StoreError` naming the backend, the session and the seq.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import StoreError
from ...messages import Message, StoredMessage
from ...session import SessionInfo, SessionState
from .._common import damaged_info
from .._writes import unscoped
from ..codec import READ_ERRORS, corrupt, decode_datetime, dumps, encode_message, read_row, read_state
from ..codec import loads as json_loads

__all__ = ["BACKEND", "Session", "member", "pairs", "row", "text"]

BACKEND = "redis"


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


@dataclass(frozen=True, slots=True)
class Session:
    """A session hash, decoded; ``id`` is its scoped key, ``name`` the session id."""

    id: str
    fields: dict[bytes, bytes]

    @property
    def name(self) -> str:
        return unscoped(self.id)

    def _int(self, name: str) -> int:
        try:
            return int(self.fields.get(name.encode(), b"0"))
        except READ_ERRORS as exc:
            raise corrupt(BACKEND, self.name, None, f"its {name}: {exc}") from None

    @property
    def next_seq(self) -> int:
        return self._int("next_seq")

    @property
    def parent_id(self) -> str | None:
        return text(self.fields.get(b"parent"))

    @property
    def fork_seq(self) -> int | None:
        return None if b"fork_seq" not in self.fields else self._int("fork_seq")

    def info(self) -> SessionInfo:
        """The session's info; a corrupt record is a StoreError naming the session."""
        f = self.fields
        try:
            user = f[b"user"].decode()
            parent = self.parent_id
            metadata = json_loads(f[b"metadata"])
            if not isinstance(metadata, dict):
                raise ValueError(f"metadata must be an object, got {type(metadata).__name__}")
            return SessionInfo(
                self.name,
                None if user == "-" else user[1:],
                text(f.get(b"title")),
                text(f.get(b"model")),
                metadata,
                decode_datetime(f[b"created"].decode()),
                decode_datetime(f[b"updated"].decode()),
                self._int("base_count") + self._int("count"),
                self._int("base_tokens") + self._int("tokens"),
                None if parent is None else unscoped(parent),
                self.fork_seq,
            )
        except READ_ERRORS as exc:
            raise corrupt(BACKEND, self.name, None, exc) from None

    def listed(self, user_id: str | None) -> SessionInfo:
        """The info ``list_sessions`` shows: a corrupt record is listed as damaged, not raised."""
        try:
            return self.info()
        except StoreError as exc:
            return damaged_info(self.name, user_id, exc)

    def state(self) -> SessionState:
        return read_state(BACKEND, self.name, self.fields.get(b"state", b""), version=self._int("version"))


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
