"""One decoded session record: what every backend reads its stored session row into.

Each backend keeps a session in its own shape (a SQL row, a Redis hash, a
``session.json``, a Python object); each decodes it into a
:class:`SessionRecord`, and everything a store answers about a session is
built from the record here, once: its :class:`~convmem.session.SessionInfo`
(:meth:`SessionRecord.info`), how ``list_sessions`` shows a damaged one
(:meth:`SessionRecord.listed`, :func:`damaged_info`), its state
(:meth:`SessionRecord.state`), the writer's view the write rules check
(:meth:`SessionRecord.view`) and what opening it returns
(:meth:`SessionRecord.loaded`)::

    stored row --backend's decoder--> SessionRecord --info()/state()/loaded()--> what the contract returns

The counters, keys and flags are decoded at once (they are typed columns).
The descriptive fields (title, model, metadata, timestamps) and the state
may stay as the backend stored them (JSON text, bytes) and are decoded when
asked for, so an append, which reads only the counters, never parses a
state it does not need, and a damaged record still lists as damaged. A
corrupt field is a :class:`~convmem.errors.StoreError` naming the backend and
the session, never a raw exception.

Session ids are scoped by user: a store that keeps every user's sessions in
one namespace (a table, a key space) keys them by :func:`scoped`, which is
injective and keeps prefixes, so a prefix lookup is a prefix match on the key.
A fork reads its parent's rows up to ``fork_seq``: :func:`segments` says
which session holds which seqs of a history, from the chain of records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, TypeAlias

from ..errors import StoreError
from ..messages import StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState
from .codec import READ_ERRORS, corrupt, decode_datetime, dumps, read_state
from .codec import loads as json_loads

__all__ = [
    "EPOCH",
    "Segment",
    "SessionRecord",
    "damaged_info",
    "encoded_json",
    "from_columns",
    "plain_record",
    "scoped",
    "segments",
    "unscoped",
    "user_prefix",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
Encoded: TypeAlias = str | bytes  # a field as the backend stored it, decoded on demand
_FOREVER = 2**62


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A stored session, decoded (see the module docstring for which fields wait to be decoded).

    ``id`` is the session id the user sees; ``key`` is how the backend keys it (the id scoped by
    user, :func:`scoped`, or the id itself where the backend keeps each
    user apart by other means); ``parent_key``/``parent_id`` likewise for a fork's parent.
    ``message_count`` and ``tokens`` count the session's own rows, ``base_count``/``base_tokens``
    the history it shares with its parent. A ``deleted`` session is hidden while forks read it.
    """

    backend: str
    key: str
    id: str
    user_id: str | None
    title: str | Encoded | None
    model: str | Encoded | None
    metadata: Mapping[str, Any] | Encoded
    created_at: datetime | Encoded
    updated_at: datetime | Encoded
    stored_state: SessionState | Encoded
    version: int = 0
    next_seq: int = 0
    message_count: int = 0
    tokens: int = 0
    parent_key: str | None = None
    parent_id: str | None = None
    fork_seq: int | None = None
    base_count: int = 0
    base_tokens: int = 0
    deleted: bool = False

    def view(self) -> tuple[int, int] | None:
        """The session as a writer's view is checked against: (next seq, state version); None when hidden."""
        return None if self.deleted else (self.next_seq, self.version)

    def state(self) -> SessionState:
        """The session's state (with its version); a corrupt one is a StoreError naming the session."""
        if isinstance(self.stored_state, SessionState):
            return self.stored_state
        return read_state(self.backend, self.id, self.stored_state, version=self.version)

    def info(self) -> SessionInfo:
        """The session's info; a corrupt record is a StoreError naming the session."""
        try:
            metadata = json_loads(self.metadata) if isinstance(self.metadata, str | bytes) else dict(self.metadata)
            if not isinstance(metadata, dict):
                raise ValueError(f"metadata must be an object, got {type(metadata).__name__}")
            return SessionInfo(
                self.id,
                self.user_id,
                _text(self.title),
                _text(self.model),
                metadata,
                _time(self.created_at),
                _time(self.updated_at),
                self.base_count + self.message_count,
                self.base_tokens + self.tokens,
                self.parent_id,
                self.fork_seq,
                view=self.view(),
            )
        except READ_ERRORS as exc:
            raise corrupt(self.backend, self.id, None, exc) from None

    def listed(self) -> SessionInfo:
        """The info ``list_sessions`` shows: a corrupt record is listed as damaged, not raised."""
        try:
            return self.info()
        except StoreError as exc:
            return damaged_info(self.id, self.user_id, exc)

    def loaded(
        self,
        state: SessionState,
        pinned: Sequence[StoredMessage],
        window: Sequence[StoredMessage],
        unfolded: Sequence[StoredMessage] = (),
    ) -> LoadedSession:
        """What opening the session returns: its info and ``state`` with the rows read under it."""
        return LoadedSession(self.info(), state, pinned, window, unfolded, self.next_seq)


# -- how a session is keyed --------------------------------------------------------------------------------------
def user_prefix(user_id: str | None) -> str:
    """The part of a scoped key that names the user: ``-:`` for no user, else ``<length>=<user id>:``."""
    return "-:" if user_id is None else f"{len(user_id)}={user_id}:"


def scoped(user_id: str | None, session_id: str) -> str:
    """The store-wide key of ``user_id``'s session ``session_id``.

    Injective (the user id's length comes first, so no user id or session id
    can be mistaken for the other), and ``scoped(u, p)`` is a prefix of
    ``scoped(u, i)`` exactly when ``p`` is a prefix of ``i``.
    """
    return user_prefix(user_id) + session_id


def unscoped(key: str) -> str:
    """The session id inside a key made by :func:`scoped`."""
    if key.startswith("-:"):
        return key[2:]
    length, _, rest = key.partition("=")
    return rest[int(length) + 1 :]


# -- where a session's history lives ------------------------------------------------------------
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


class PlainSession(Protocol):
    """A session kept as decoded objects (the in-memory store's, the file store's ``session.json``)."""

    id: str
    user_id: str | None
    title: str | None
    model: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    state: SessionState
    next_seq: int
    tokens: int
    parent_id: str | None
    fork_seq: int | None
    base_count: int
    base_tokens: int
    deleted: bool


def plain_record(backend: str, session: PlainSession, message_count: int) -> SessionRecord:
    """The record of a session kept as decoded objects, keyed by its plain id (the backend keeps users apart)."""
    s = session
    return SessionRecord(
        backend,
        s.id,
        s.id,
        s.user_id,
        s.title,
        s.model,
        s.metadata,
        s.created_at,
        s.updated_at,
        s.state,
        s.state.version,
        s.next_seq,
        message_count,
        s.tokens,
        s.parent_id,
        s.parent_id,
        s.fork_seq,
        s.base_count,
        s.base_tokens,
        s.deleted,
    )


def from_columns(backend: str, row: Sequence[Any], *, utc: bool = False) -> SessionRecord:
    """A ``sessions`` table row decoded (SQLite and PostgreSQL share its columns: ``SESSION_COLUMNS``).

    ``id`` and ``parent_id`` are keys scoped by user (:func:`scoped`);
    ``utc`` converts timestamps the driver gave as datetimes to UTC.
    """
    (key, user_id, title, model, metadata, created, updated, parent, fork_seq) = row[:9]
    base_count, base_tokens, message_count, tokens, next_seq, state, version, deleted = row[9:]
    if utc:
        created, updated = created.astimezone(timezone.utc), updated.astimezone(timezone.utc)
    return SessionRecord(
        backend,
        key,
        unscoped(key),
        user_id,
        title,
        model,
        metadata,
        created,
        updated,
        state,
        version,
        next_seq,
        message_count,
        tokens,
        parent,
        None if parent is None else unscoped(parent),
        fork_seq,
        base_count,
        base_tokens,
        bool(deleted),
    )


def damaged_info(session_id: str, user_id: str | None, error: StoreError) -> SessionInfo:
    """How ``list_sessions`` reports a session whose record cannot be read: listed, with the reason."""
    return SessionInfo(session_id, user_id, None, None, {}, EPOCH, EPOCH, 0, 0, damaged=str(error))


def encoded_json(value: Mapping[str, Any] | Encoded) -> str:
    """A JSON field as text to store: kept as it was read when it was never decoded."""
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else dumps(dict(value))


def _text(value: str | bytes | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _time(value: datetime | Encoded) -> datetime:
    if isinstance(value, datetime):
        return value
    return decode_datetime(value.decode() if isinstance(value, bytes) else value)
