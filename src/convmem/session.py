"""A stored session as convmem's core and every store see it: its state, its row, what opening it reads.

These types sit below both the memory's core and the stores (layer 1 of
``docs/design.md``), so the core can plan with a session's state without
importing anything that does I/O, and every backend decodes into the same
records. Storage is append-only: the window is a contiguous seq range ending
at the newest message, so :class:`SessionState` records only where it starts
(``window_start``) and how far the running summary reaches (``folded_to``).
A message's status is derived from it (:func:`status_of`):

==============  =================================================
``pinned``      a system or developer message at or after ``pinned_start``
``active``      ``seq >= window_start``
``summarized``  ``seq <= folded_to``
``archived``    evicted, not (yet) folded into the summary
``cleared``     a pinned message before ``pinned_start`` (``clear(keep_system=False)``)
==============  =================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

from .messages import PINNED_ROLES, Message, StoredMessage

__all__ = ["COUNTED_KEY", "LoadedSession", "MessageStatus", "SessionInfo", "SessionState", "SummaryRecord", "status_of"]

MessageStatus: TypeAlias = Literal["pinned", "active", "archived", "summarized", "cleared"]


#: Where a session's state (``stats``) names the counter that made every token count it stores
#: (``TokenCounter.name``): a memory with that counter believes them, any other recounts what it sends, and an
#: import drops the name (an export's counts are not believed). A session written by two counters names none.
COUNTED_KEY = "counted_by"


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A running summary and the seq range it covers.

    ``message`` is a provider's own summary, when the provider compacted the conversation (an Anthropic
    ``compaction`` block, a Responses ``compaction`` item): the stored message holding it, re-sent as it
    is; ``text`` is then what of it is readable (empty for an opaque one).
    """

    text: str
    first_seq: int
    last_seq: int
    tokens: int
    created_at: datetime
    message: Message | None = None


@dataclass(frozen=True, slots=True)
class SessionState:
    """Where the window starts, how far the summary reaches, and the running stats.

    ``version`` increases on every save; a save that expects an older version
    loses with :class:`~convmem.errors.StaleSessionError` (a ``ConflictError``). ``stats`` belong to the
    memory; stores keep them as opaque JSON.
    """

    window_start: int = 0
    folded_to: int = -1
    pinned_start: int = 0
    summary: SummaryRecord | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    version: int = 0


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A row of ``list_sessions``.

    ``message_count`` and ``tokens`` include the history a fork shares with
    its parent; ``parent_id`` and ``fork_seq`` say where a fork branched.
    ``damaged`` is None for a readable session; for one whose stored record is
    corrupt, ``list_sessions`` still lists it, with the reason there and the
    fields it could not read at their defaults (opening it raises ``StoreError``).
    ``view`` is the store's (next seq, state version) as a writer's view is checked against, when
    the store says: a memory whose own view differs is behind (the service's open memories check it).
    """

    id: str
    user_id: str | None
    title: str | None
    model: str | None
    metadata: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime
    message_count: int
    tokens: int
    parent_id: str | None = None
    fork_seq: int | None = None
    damaged: str | None = None
    view: tuple[int, int] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class LoadedSession:
    """What opening a session reads: never the archive, only state, pinned messages and the window."""

    info: SessionInfo
    state: SessionState
    pinned: Sequence[StoredMessage]
    window: Sequence[StoredMessage]
    unfolded: Sequence[StoredMessage] = ()  # archived after a failed summary, awaiting a retry
    next_seq: int | None = None  # the seq the next append gets (None: a store that does not say)


def status_of(stored: StoredMessage, state: SessionState) -> MessageStatus:
    """The derived status of ``stored`` under ``state`` (see the module docstring)."""
    if stored.message.role in PINNED_ROLES:
        return "pinned" if stored.seq >= state.pinned_start else "cleared"
    if stored.seq >= state.window_start:
        return "active"
    return "summarized" if stored.seq <= state.folded_to else "archived"
