"""Facts with temporal validity: the data model, its operations and the extractor protocol.

A :class:`Fact` is one statement about a user ("Alice lives in Lisbon") that
held over a time interval ``[valid_from, valid_to)``. Facts are never deleted
and never edited in place: a change of mind is recorded as an *invalidation*
of the old fact (its ``valid_to`` is set, with a reason and, when there is
one, the id of the fact that replaced it) plus, for an update, a new fact.
So ``facts(valid_at=t)`` can answer what held at any past time ``t``. This is
the validity half of Zep/Graphiti's bi-temporal edges; ``created_at`` is the
transaction half (when convmem learnt the fact).

Graphiti's users report unrelated facts being invalidated by a loosely
matched new one. Here nothing is invalidated implicitly: every
:class:`FactInvalidate` and :class:`FactUpdate` names the exact ``fact_id`` it
ends, and applying one to a fact that does not exist, belongs to another user
or has already ended is refused: a direct call raises
:class:`~convmem.errors.ConflictError`, and an extractor's bad operation is
skipped and reported, never redirected to another fact.

Who proposes the operations is a :class:`FactExtractor` (the LLM adapter in
``convmem.llm`` fills it; tests use deterministic fakes). It receives the new
messages and the facts valid now, and returns operations; it never writes.
Applying them is the job of :class:`~convmem.longterm.facts.book.Facts`, which
merges duplicates after :func:`normalize` and writes through a
:class:`FactStore` (in memory, SQLite or files).

Example::

    ops = extractor.extract(messages, current_facts, user_id="alice")
    # [FactUpdate(fact_id="f1", text="Alice lives in Porto", subject="alice.home",
    #             source_message_ids=("m42",))]
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ...errors import InvalidFactError, InvalidMessageError
from ...limits import as_utc, check_text
from ...messages import Message

__all__ = [
    "MAX_FACT_BYTES",
    "AsyncFactExtractor",
    "AsyncFactStore",
    "Fact",
    "FactAdd",
    "FactExtractor",
    "FactInvalidate",
    "FactOperation",
    "FactStore",
    "FactUpdate",
    "normalize",
    "query_time",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: The most UTF-8 bytes a fact's text, subject or reason may hold: a fact is one sentence, and a model that runs
#: away (a whole transcript as one "fact") would put it into every request of the user.
MAX_FACT_BYTES = 4096


def _ids(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # a lone id passed where a sequence is expected
        return (value,)
    return tuple(value)


def _aware(owner: object, value: datetime | None, name: str) -> None:
    # Naive datetimes would compare wrongly against the UTC stamps convmem writes: taken as UTC at the
    # edge (the one rule for times, convmem.limits.as_utc); anything else is refused.
    if value is None:
        return
    if not isinstance(value, datetime):
        raise InvalidFactError(f"{name} must be a datetime, got {type(value).__name__}")
    object.__setattr__(owner, name, as_utc(value))


def query_time(value: datetime | None, name: str = "valid_at") -> datetime | None:
    """A time a fact query asks about, under the rule of ``_aware``: naive is UTC, a non-datetime refused."""
    if value is not None and not isinstance(value, datetime):
        raise InvalidFactError(f"{name} must be a datetime, got {type(value).__name__}")
    return None if value is None else as_utc(value)


def _text(value: str | None, name: str) -> None:
    # A model writes facts: its text is checked like a user's, so a store never meets what UTF-8 cannot hold.
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidFactError(f"{name} must be text, got {type(value).__name__}")
    try:
        size = check_text(value, name)
    except InvalidMessageError as exc:
        raise InvalidFactError(f"fact {exc}") from None
    if size > MAX_FACT_BYTES:
        raise InvalidFactError(f"fact {name} holds {size} bytes of UTF-8; at most {MAX_FACT_BYTES} are taken")


@dataclass(frozen=True, slots=True)
class Fact:
    """One statement about a user, valid over ``[valid_from, valid_to)``.

    Attributes:
        id: unique id, assigned by the fact store.
        user_id: the namespace; ``None`` is the anonymous user (isolated like any other).
        text: the statement, in natural language.
        subject: what the fact is about, e.g. ``"alice.home"``; facts with the same
            normalized subject and text are duplicates.
        valid_from: when the fact started to hold (usually the source message's time).
        valid_to: when it stopped holding; ``None`` while it still holds.
        session_id: the session the fact was learnt in, if any.
        source_message_ids: the messages that state it (provenance).
        created_at: when convmem recorded it.
        confidence: the extractor's confidence in ``[0, 1]``, if it gives one.
        invalid_reason: why it stopped holding (set together with ``valid_to``).
        replaced_by: the id of the fact that superseded it, for an update.
        invalidated_by: the messages that ended it (provenance of the invalidation).
        metadata: free-form JSON-serializable data.
    """

    id: str
    user_id: str | None
    text: str
    valid_from: datetime
    created_at: datetime
    subject: str | None = None
    valid_to: datetime | None = None
    session_id: str | None = None
    source_message_ids: tuple[str, ...] = ()
    confidence: float | None = None
    invalid_reason: str | None = None
    replaced_by: str | None = None
    invalidated_by: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        _text(self.text, "text")
        _text(self.subject, "subject")
        if not self.text or not self.text.strip():
            raise InvalidFactError("a fact needs non-empty text")
        _aware(self, self.valid_from, "valid_from")
        _aware(self, self.valid_to, "valid_to")
        _aware(self, self.created_at, "created_at")
        if self.valid_to is not None and self.valid_to < self.valid_from:
            raise InvalidFactError(f"fact {self.id}: valid_to {self.valid_to} is before valid_from {self.valid_from}")
        if self.confidence is not None and not 0.0 <= self.confidence <= 1.0:
            raise InvalidFactError(f"confidence must be in [0, 1], got {self.confidence}")
        object.__setattr__(self, "source_message_ids", _ids(self.source_message_ids))
        object.__setattr__(self, "invalidated_by", _ids(self.invalidated_by))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)) if self.metadata else _EMPTY)

    def valid_at(self, when: datetime) -> bool:
        """Whether the fact held at ``when`` (half-open: true at ``valid_from``, false at ``valid_to``)."""
        return self.valid_from <= when and (self.valid_to is None or when < self.valid_to)

    @property
    def key(self) -> tuple[str, str]:
        """The duplicate key: normalized subject and normalized text."""
        return (normalize(self.subject or ""), normalize(self.text))


@dataclass(frozen=True, slots=True)
class FactAdd:
    """Record a new fact. A duplicate of a valid fact (same :attr:`Fact.key`) is merged into it.

    ``valid_from`` defaults to the time of the newest source message, or now.
    """

    text: str
    source_message_ids: tuple[str, ...] = ()
    subject: str | None = None
    valid_from: datetime | None = None
    confidence: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        _text(self.text, "text")
        _text(self.subject, "subject")
        if not self.text or not self.text.strip():
            raise InvalidFactError("FactAdd needs non-empty text")
        _aware(self, self.valid_from, "valid_from")
        object.__setattr__(self, "source_message_ids", _ids(self.source_message_ids))


@dataclass(frozen=True, slots=True)
class FactUpdate:
    """Replace fact ``fact_id`` by a new version: the old one ends at ``valid_from``, the new one starts there.

    ``subject`` defaults to the old fact's subject.
    """

    fact_id: str
    text: str
    source_message_ids: tuple[str, ...] = ()
    subject: str | None = None
    valid_from: datetime | None = None
    reason: str = "updated"
    confidence: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not self.fact_id:
            raise InvalidFactError("FactUpdate must name the fact it replaces")
        _text(self.text, "text")
        _text(self.subject, "subject")
        if not self.text or not self.text.strip():
            raise InvalidFactError("FactUpdate needs non-empty text")
        _aware(self, self.valid_from, "valid_from")
        object.__setattr__(self, "source_message_ids", _ids(self.source_message_ids))


@dataclass(frozen=True, slots=True)
class FactInvalidate:
    """End fact ``fact_id`` (set its ``valid_to``); nothing is deleted.

    ``replaced_by`` names an existing fact that supersedes it, if any;
    ``valid_to`` defaults to the time of the newest source message, or now.
    """

    fact_id: str
    reason: str
    source_message_ids: tuple[str, ...] = ()
    replaced_by: str | None = None
    valid_to: datetime | None = None

    def __post_init__(self) -> None:
        if not self.fact_id:
            raise InvalidFactError("FactInvalidate must name the fact it ends")
        _text(self.reason, "reason")
        if not self.reason or not self.reason.strip():
            raise InvalidFactError("FactInvalidate needs a reason")
        _aware(self, self.valid_to, "valid_to")
        object.__setattr__(self, "source_message_ids", _ids(self.source_message_ids))


FactOperation: TypeAlias = FactAdd | FactUpdate | FactInvalidate


@runtime_checkable
class FactExtractor(Protocol):
    """Proposes fact operations from new messages; it never writes anything itself.

    Implementations must be deterministic for a given input where they can
    (tests rely on it) and must raise :class:`~convmem.errors.LLMError` on
    failure: a failed extraction changes no fact (invariant 8).
    """

    def extract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> list[FactOperation]:
        """Operations implied by ``messages`` (which carry ids and ``created_at``).

        Args:
            messages: the new messages, oldest first, each with its id.
            facts: the user's facts valid now; updates and invalidations must name one of their ids.
            user_id: whose facts these are.
        """
        ...


@runtime_checkable
class AsyncFactExtractor(Protocol):
    """The async twin of :class:`FactExtractor`."""

    async def aextract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> list[FactOperation]: ...


@runtime_checkable
class FactStore(Protocol):
    """Where facts live. Rows are inserted and ended, never deleted; every read is scoped by ``user_id``."""

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        """Insert ``added`` and replace ``changed``, all or nothing.

        Each changed fact must exist for its user and still be open (``valid_to``
        is None) in the store; otherwise nothing is written and
        :class:`~convmem.errors.ConflictError` is raised.
        """
        ...

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        """The user's facts ordered by (valid_from, created_at, id): all, those valid at ``valid_at``, or open ones."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncFactStore(Protocol):
    """The async twin of :class:`FactStore`."""

    async def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None: ...

    async def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]: ...

    async def aclose(self) -> None: ...


_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!;,]+$")


def normalize(text: str) -> str:
    """The form two facts are compared in: NFKC, case-folded, whitespace collapsed, trailing punctuation off."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACE.sub(" ", folded).strip())
