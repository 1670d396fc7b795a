"""The store contract: sessions, append-only messages, and a small session state.

Storage is append-only and grows O(N). A message is written once, by one
``append``; history is never rewritten. Eviction does not touch the evicted
rows either: the window is always a contiguous seq range ending at the newest
message, so the :class:`SessionState` records only where it starts
(``window_start``) and how far the running summary reaches (``folded_to``).
One small state write per eviction replaces what would otherwise be a status
update per message. A message's status is derived from the state
(:func:`convmem.session.status_of`).

Opening a session reads the state, the pinned messages and the window, never
the archive, so a 100k-message session opens like a 100-message one.

The contract comes in two sizes:

* :class:`Store` is what ``Memory`` needs: append, load, save the state, list
  and delete messages, look a session up. A third-party backend can stop here.
* :class:`SessionStore` adds session management: list, retitle, delete,
  expire, fork, export and import. The built-in backends implement it, the
  CLI needs it, and the conformance suite (:mod:`convmem.testing`) checks it
  whenever a backend provides it.

Every method is scoped by ``user_id``, and so are session ids: two users may
both have a session ``"chat"``, and they are two sessions. A session of
another user is reported as not found, exactly like one that does not exist,
and ``append`` to another user's session id creates the caller's own. Message
ids are unique within a session's history (a fork's shared history
included); another session, or another user, may use the same id. So no
error ever tells one user anything about another's ids. Every method that
names an existing session accepts a unique prefix of its id; ``append`` takes
the exact id because it creates the session on its first message.

Writes are atomic and idempotent, and many writers can share a session:

* ``append`` takes one :class:`AppendRequest`: the batch, and the writer's
  view of the session, ``expected_seq`` (its next seq) and
  ``expected_version`` (its state version), and optionally the ``state`` the
  batch implies. Messages and state are written together or not
  at all. If the view is out of date, :class:`~convmem.errors.StaleSessionError`
  says so and nothing is written: the writer catches up and decides again, so
  nothing lands between an assistant's tool call and its results.
* A batch whose ids are all stored already in this session with the same
  content (``created_at`` aside) is a retry: its stored seqs come back and
  nothing is written. An id stored with other content, or a batch that mixes
  stored and new ids, is a :class:`~convmem.errors.ConflictError` naming the id.
* An append that expects messages (``expected_seq > 0``) to a session that no
  longer exists raises :class:`~convmem.errors.SessionLostError`; the session
  is never re-created silently (a Redis restarted without persistence).

Every built-in store also keeps long-term memory in the same place
(:class:`LongTermStores`): ``store.facts()``, ``store.blocks()`` and
``store.recall()`` give the fact, block and recall stores over the store's own
database, connection, schema or prefix, the same data the per-kind classes
(``SQLiteFactStore(store)``...) see, and they close with it. An async store
gives the async fact store :class:`~convmem.longterm.facts.AsyncFacts` needs
(:class:`AsyncLongTermStores`); blocks and recall have sync contracts only
(the memory renders blocks and searches recall inside the sync ``context()``),
so the async twins that wrap a sync store give that store's, and the async
PostgreSQL and Redis stores none: open the sync store of the same URL for them.

Forks share history instead of copying it. A fork records its parent and the
seq it branched at; reading it reads the parent's rows up to that seq, then
its own rows, whose seqs continue from ``fork_seq + 1``.

Example::

    from convmem.stores import open_store

    store = open_store("sqlite")              # the default database
    for info in store.list_sessions(user_id="alice", limit=5):
        print(info.id[:8], info.title, info.message_count)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..messages import Message, StoredMessage
from ..session import LoadedSession, SessionInfo, SessionState

if TYPE_CHECKING:
    from ..longterm.blocks.store import BlockStore
    from ..longterm.facts.model import AsyncFactStore, FactStore
    from ..longterm.recall.store import RecallStore

__all__ = [
    "AppendRequest",
    "AsyncLongTermStores",
    "AsyncSessionStore",
    "AsyncStore",
    "LongTermStores",
    "SessionStore",
    "Store",
]


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """One ``append``: a batch of messages for a session, under the writer's view of it.

    Attributes:
        session_id: the exact session id (``append`` creates the session on its first message).
        messages: the batch, each message with its token count; every message needs a unique id.
        user_id: the user whose session it is (session ids are scoped by user).
        model: recorded on the session when this append creates it.
        expected_seq: the writer's next seq; None appends wherever the session is.
        expected_version: the writer's state version; None does not check it.
        state: the state the batch implies, saved with it (needs ``expected_version``; stored as
            version ``expected_version + 1``); None leaves the stored state as it is.
    """

    session_id: str
    messages: Sequence[tuple[Message, int]]
    user_id: str | None = None
    model: str | None = None
    expected_seq: int | None = None
    expected_version: int | None = None
    state: SessionState | None = None


@runtime_checkable
class Store(Protocol):
    """A synchronous store: what ``Memory`` needs. Every method is scoped by ``user_id``."""

    def append(self, request: AppendRequest) -> list[int]:
        """Append the request's messages, and its ``state`` if given, in one write; returns their seqs.

        Creates the session on its first message. Checks, in this order, before
        writing anything: the session exists if ``expected_seq`` > 0
        (SessionLostError); its next seq and state version are the expected ones
        (StaleSessionError); the ids (see the module docstring: a retry returns
        the stored seqs, other content is a ConflictError). A batch without ids
        or repeating an id raises InvalidMessageError. ``state`` needs
        ``expected_version`` and is saved with version ``expected_version + 1``.
        """
        ...

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        """Read state, pinned messages and window (never the archive). Raises SessionNotFoundError."""
        ...

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        """Replace the state if its version is ``expected_version``; returns it with the new version."""
        ...

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        """Every stored message of the session in seq order (the whole history, archive included)."""
        ...

    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        """Explicitly delete messages (rollback of an incomplete tool call).

        Only a session's own messages can go: deleting one that a fork shares raises StoreError.
        With ``expected_seq``, nothing is deleted unless it is still the session's next seq
        (StaleSessionError): a rollback never orphans results another writer appended.
        """
        ...

    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        """Session info; accepts a unique id prefix. Raises SessionNotFoundError / AmbiguousSessionError."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class SessionStore(Store, Protocol):
    """A :class:`Store` that also manages sessions (all built-in backends)."""

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        """The user's sessions, most recently updated first."""
        ...

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Set the title and/or replace the metadata (``None`` leaves a field unchanged)."""
        ...

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        """Delete a session and its messages; history its forks share is kept for them, hidden."""
        ...

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        """Delete the user's sessions not updated for ``older_than``; returns their ids."""
        ...

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        """A new session whose history is this one's up to ``at_seq`` (shared, not copied)."""
        ...

    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        """The session as versioned JSONL (see :mod:`convmem.stores.codec`)."""
        ...

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        """Import an export, all or nothing; a malformed line raises StoreError naming it."""
        ...


@runtime_checkable
class AsyncStore(Protocol):
    """The async twin of :class:`Store`: the same methods, awaited; ``aclose`` closes."""

    async def append(self, request: AppendRequest) -> list[int]: ...

    async def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession: ...

    async def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState: ...

    async def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> list[StoredMessage]: ...

    async def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None: ...

    async def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AsyncSessionStore(AsyncStore, Protocol):
    """The async twin of :class:`SessionStore`."""

    async def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]: ...

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo: ...

    async def delete_session(self, session_id: str, *, user_id: str | None = None) -> None: ...

    async def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]: ...

    async def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo: ...

    async def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes: ...

    async def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo: ...


@runtime_checkable
class LongTermStores(Protocol):
    """A store that keeps long-term memory beside the sessions (all built-in backends)."""

    def facts(self) -> FactStore:
        """The fact store over this store's database; it closes with the store."""
        ...

    def blocks(self) -> BlockStore:
        """The working-block store over this store's database; it closes with the store."""
        ...

    def recall(self) -> RecallStore:
        """The recall document store over this store's database (needs the ``recall`` extra)."""
        ...


@runtime_checkable
class AsyncLongTermStores(Protocol):
    """An async store that keeps facts beside the sessions (all built-in async backends)."""

    def facts(self) -> AsyncFactStore:
        """The async fact store over this store's database; it closes with the store."""
        ...
