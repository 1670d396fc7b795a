"""``ConvmemMemoryService``: ADK's memory search over a convmem store's blocks, facts and recall index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, cast

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from ...errors import ConfigurationError
from ...messages import StoredMessage
from ...stores import open_store
from ._events import event_messages, session_key

__all__ = ["ConvmemMemoryService"]


class ConvmemMemoryService(BaseMemoryService):
    """An ADK ``BaseMemoryService`` over a convmem store's recall index, facts and blocks.

    ``add_session_to_memory`` indexes the session's messages in the store's recall index (a
    session added again indexes only what is new); ``search_memory`` returns the user's
    working blocks, the facts valid now and the ``k`` archived messages of the app's sessions
    most relevant to the query, in that order. What a ``ConvmemSessionService`` with
    ``recall=True`` evicts is in the same index.

    Args:
        store: a convmem store (stays open) or its URL (the service opens and :meth:`close` closes it).
        k: how many recalled messages a search returns.
    """

    def __init__(self, store: Any = "memory", *, k: int = 8) -> None:
        from ...longterm.recall import RecallIndex

        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1_000:
            raise ConfigurationError(f"k must be an integer from 1 to 1000, got {k!r}")
        self._owns_store = isinstance(store, str)
        self.store: Any = cast(Any, open_store(store) if isinstance(store, str) else store)  # with LongTermStores
        for part in ("recall", "facts", "blocks"):
            if not callable(getattr(self.store, part, None)):
                raise ConfigurationError(f"ConvmemMemoryService needs a store with long-term memory (store.{part}())")
        self.k = k
        self.index = RecallIndex(store=self.store.recall())

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    async def add_session_to_memory(self, session: Session) -> None:
        self._index(session.app_name, session.user_id, session.id, session.events)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        self._index(app_name, user_id, session_id or "", events)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        prefix = session_key(app_name, "")
        found = [
            _entry(f"{b.name}: {b.value}", id=f"block:{b.name}", author="memory")
            for b in self.store.blocks().list_blocks(user_id)
            if b.value.strip()
        ]
        now = datetime.now(timezone.utc)
        found += [
            _entry(f.text, id=f"fact:{f.id}", author="memory", timestamp=f.valid_from.isoformat())
            for f in self.store.facts().list_facts(user_id=user_id, valid_at=now)
        ]
        hits = [
            h for h in self.index.search(query, user_id=user_id, k=self.k * 4) if h.doc.session_id.startswith(prefix)
        ]
        found += [
            _entry(
                h.doc.text,
                id=f"recall:{h.doc.session_id[len(prefix) :]}:{h.doc.message_id}",
                author=h.doc.role,
                timestamp=h.doc.created_at.isoformat(),
                role="user" if h.doc.role == "user" else "model",
            )
            for h in hits[: self.k]
        ]
        return SearchMemoryResponse(memories=found)

    def _index(self, app_name: str, user_id: str, session_id: str, events: Sequence[Event]) -> None:
        stored = [
            StoredMessage(seq, message, 0)
            for seq, message in enumerate(m for event in events for m in event_messages(event))
        ]
        self.index.add_messages(stored, session_id=session_key(app_name, session_id), user_id=user_id)


def _entry(text: str, *, id: str, author: str, timestamp: str | None = None, role: str = "user") -> MemoryEntry:
    return MemoryEntry(
        content=types.Content(role=role, parts=[types.Part(text=text)]), id=id, author=author, timestamp=timestamp
    )
