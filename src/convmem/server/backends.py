"""The store and the long-term memory stores a service runs on, opened from one spec.

The service keeps no data of its own: sessions live in the session store, and
facts, working blocks and recall documents in the same backend's long-term
stores (the same SQLite file, PostgreSQL schema, Redis database or directory).
This is the one module that knows which long-term classes go with which store.

Recall indexing is done by :class:`RecallSink`, an eviction sink that writes the
documents :class:`~convmem.longterm.recall.index.RecallIndex` would write, straight to
the backend's recall store; a search builds a fresh index from the store, so
every worker sees what every other one archived.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ConfigurationError
from ..longterm.blocks.store import BlockStore, MemoryBlockStore
from ..longterm.facts.model import FactStore
from ..longterm.facts.store import MemoryFactStore
from ..longterm.recall.index import RecallIndex
from ..longterm.recall.store import RecallStore
from ..messages import StoredMessage
from ..stores import SessionStore, open_store, split_store_url
from ..stores.encrypted.keys import ENV_VAR
from ..stores.memory import MemoryStore

__all__ = ["Backend", "RecallSink", "open_backend"]


@dataclass
class Backend:
    """A session store and its long-term stores; ``index`` is set when recall has no store (in memory)."""

    store: SessionStore
    facts: FactStore
    blocks: BlockStore
    recall_store: RecallStore | None
    index: RecallIndex | None = None

    def close(self) -> None:
        self.store.close()


def open_backend(spec: str | None, *, schema: str | None = None, prefix: str | None = None) -> Backend:
    """Open ``spec`` (see :func:`convmem.stores.open_store`) in a PostgreSQL ``schema`` or under a Redis ``prefix``."""
    if os.environ.get(ENV_VAR):  # never a service that looks encrypted and writes in the clear
        raise ConfigurationError(
            f"the service does not encrypt at rest yet: unset ${ENV_VAR} to serve (the CLI's sessions, forget "
            "and mcp commands read it), or wrap the store in EncryptedStore in your own application"
        )
    if spec is not None and spec.startswith(("postgresql://", "postgres://")):
        from ..stores.postgres import PostgresBlockStore, PostgresFactStore, PostgresRecallStore, PostgresStore

        spec, chosen = _one_choice(spec, "schema", schema)
        pg = PostgresStore(spec, schema=chosen or "convmem", max_size=16)
        return Backend(pg, PostgresFactStore(pg), PostgresBlockStore(pg), PostgresRecallStore(pg))
    if spec is not None and spec.startswith(("redis://", "rediss://", "unix://")):
        from ..stores.redis import RedisStore

        spec, chosen = _one_choice(spec, "prefix", prefix)
        store: SessionStore = RedisStore(spec, prefix=chosen) if chosen is not None else RedisStore(spec)
    else:
        store = open_store(spec)
    kind = type(store).__name__
    if kind == "SQLiteStore":
        from ..stores.sqlite import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore

        lite: Any = store
        return Backend(store, SQLiteFactStore(lite), SQLiteBlockStore(lite), SQLiteRecallStore(lite))
    if kind == "RedisStore":
        from ..stores.redis import RedisBlockStore, RedisFactStore, RedisRecallStore

        return Backend(store, RedisFactStore(store), RedisBlockStore(store), RedisRecallStore(store))  # type: ignore[arg-type]
    if kind == "FileStore":
        from ..stores.files import FileBlockStore, FileFactStore, FileRecallStore

        return Backend(store, FileFactStore(store), FileBlockStore(store), FileRecallStore(store))  # type: ignore[arg-type]
    if isinstance(store, MemoryStore):  # the store's own facts and blocks, so that its forget erases them too
        return Backend(store, store.facts(), store.blocks(), None, RecallIndex())
    return Backend(store, MemoryFactStore(), MemoryBlockStore(), None, RecallIndex())


def _one_choice(spec: str, name: str, given: str | None) -> tuple[str, str | None]:
    """The URL without its ``?schema=``/``?prefix=``, and the one value chosen (by the URL or the setting)."""
    url, options = split_store_url(spec)
    in_url = options.get(name)
    if in_url is not None and given is not None and in_url != given:
        raise ConfigurationError(f"the store URL says {name} {in_url!r} and the settings {given!r}; give one")
    return url, in_url if in_url is not None else given


class RecallSink:
    """An eviction sink that stores recall documents for the evicted messages (no index kept in memory)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def absorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        if self.backend.index is not None:
            self.backend.index.absorb(units, session_id=session_id, user_id=user_id)
            return
        assert self.backend.recall_store is not None
        flat = [stored for unit in units for stored in unit]
        if not flat:
            return
        builder = RecallIndex()  # builds documents exactly as the library's index does
        previous = self._previous_text(flat[0].seq, session_id, user_id)
        docs = []
        for stored in flat:
            doc = builder.doc(stored, session_id=session_id, user_id=user_id)
            if doc is not None:
                docs.append(replace(doc, context=previous) if builder.keys.context else doc)
                previous = doc.text
        self.backend.recall_store.save_docs(docs)

    def _previous_text(self, seq: int, session_id: str, user_id: str | None) -> str:
        """The text of the message before ``seq`` (the context key of the first evicted message)."""
        if seq == 0:
            return ""
        before: Any = self.backend.store.messages(session_id, user_id=user_id, from_seq=seq - 1, to_seq=seq - 1)
        for stored in before:
            return stored.message.text if stored.message.role in ("user", "assistant", "tool") else ""
        return ""
