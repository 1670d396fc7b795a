"""The recall contract's types: what a recall document is, and how a search is filtered.

What comes in: an archived message, as the recall index, a recall store and a store's server search
all see it. What goes out: :class:`RecallDoc` (the document, identified by :data:`DocRef` within its
user) and :class:`Where` (the filters of a search). Every index and every store speaks these types,
so they live here, free of numpy and of any index: a store imports them without loading one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from ...limits import as_utc

__all__ = ["DocRef", "RecallDoc", "Where"]

DocRef = tuple[str, str]  # (session id, message id): a document's identity within its user


@dataclass(frozen=True, slots=True)
class RecallDoc:
    """An archived message as recall sees it.

    A document is identified by its user, its session and its message id
    together (:attr:`ref` within the user): message ids are unique only per
    session in some stores, so two sessions (or two users) may both hold an
    ``m1``, and neither may replace the other.

    Attributes:
        message_id: the message's id (unique within its session).
        session_id: its session.
        user_id: its user (the partition it lives in).
        seq: its position in the session.
        role: ``user``, ``assistant``, ``tool``...
        text: what was said (shown to the model).
        created_at: when it was said.
        key: the text that is indexed: ``text`` enriched with speaker, date or facts.
        context: the text of the message before it in the session, indexed lexically
            at half the weight of the key (see :class:`~convmem.longterm.recall.Keys`).
    """

    message_id: str
    session_id: str
    user_id: str | None
    seq: int
    role: str
    text: str
    created_at: datetime
    key: str
    context: str = ""

    def __post_init__(self) -> None:
        # An archive written before times were checked at the door may mix naive and aware stamps:
        # naive is UTC (convmem.limits.as_utc), so ranking and rendering never compare the two.
        object.__setattr__(self, "created_at", as_utc(self.created_at))

    @property
    def ref(self) -> DocRef:
        """The document's identity within its user's archive: (session id, message id)."""
        return (self.session_id, self.message_id)


@dataclass(frozen=True, slots=True)
class Where:
    """Filters of a search; ``None`` means no constraint. ``since`` is inclusive, ``until`` exclusive."""

    sessions: Collection[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    roles: Collection[str] | None = None
    exclude_session: str | None = None  # with exclude_from: leave out seqs >= it of this session (the window)
    exclude_from: int | None = None

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_utc(value))
