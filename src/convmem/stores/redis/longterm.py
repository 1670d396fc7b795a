"""Long-term memory in Redis: facts, working blocks, and recall documents with their vectors.

Each class runs on a :class:`~convmem.stores.redis.RedisStore`'s client (pass
the store, so the keys share its prefix) or opens its own (pass a URL, or
nothing for ``$CONVMEM_REDIS_URL``). Writes are Lua scripts
(:mod:`convmem.stores.redis._lua`), atomic and all or nothing; reads are one
command. Keys are per user (or block scope), so no read crosses users. The
store's session TTL does not apply here: long-term memory is kept.

* :class:`RedisFactStore`: a hash of fact JSON per user and a set of the
  open ones; a write whose changed fact was ended meanwhile changes nothing
  and raises :class:`~convmem.errors.ConflictError`.
* :class:`RedisBlockStore`: the version beside each block is the optimistic check.
* :class:`RedisRecallStore` (a :class:`~convmem.longterm.recall.store.RecallStore`):
  one hash per document, keyed by (user, session, message id), with its
  float32 vector per model (layout in :mod:`convmem.stores.redis._recall`).

Recall scoring happens in the client, within limits. Lexical: this store
keeps no inverted index; :class:`~convmem.longterm.recall.index.RecallIndex` loads
a user's documents on first use and ranks them with its in-process BM25, so
the candidate set is that one user's archive (measured at 100k documents of
20 words: 2.6 s to load and index, about 110 MB of process memory, 3 ms per
query). Dense: RediSearch is detected
(:meth:`~convmem.stores.redis.RedisStore.has_search`); the Redis 7.0 these
stores were tested on has no modules, so vectors are loaded per user and
scored exactly with numpy (100k x 384 float32 is 150 MB, about 7 ms per
query); no RediSearch path is shipped untested.

Example::

    store = RedisStore("redis://cache:6379/0", prefix="chat:")
    facts = Facts(RedisFactStore(store))
    recall = RecallIndex(store=RedisRecallStore(store), embedder=HashingEmbedder())
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ...errors import ConflictError
from ...longterm.blocks.store import BlockRecord, check_save
from ...longterm.facts.model import Fact
from ...longterm.facts.store import select_facts
from ...longterm.recall._np import np
from ...longterm.recall.model import DocRef, RecallDoc
from ...longterm.recall.store import StoreQuery, StoreResult
from .._longterm_codec import block_from_json, block_to_json, doc_from_json, fact_from_json, fact_to_json
from . import _recall as recall
from . import _rsearch as rsearch
from ._db import AsyncDriver, Eviction, Settings, SyncDriver
from ._ops import Cmd, Flow, Keys, Op, has_search, user_key

__all__ = ["AsyncRedisFactStore", "RedisBlockStore", "RedisFactStore", "RedisRecallStore"]

T = TypeVar("T")


class _HasDriver(Protocol):
    db: SyncDriver  # a RedisStore: the long-term stores run on its client, under its prefix
    keys: Keys


class _Shared:
    def __init__(self, target: _HasDriver | str | None = None, *, prefix: str = "convmem:") -> None:
        if target is not None and not isinstance(target, str):
            self.db, self._owned, prefix = target.db, False, target.keys.prefix  # closes with the store
        else:  # its own client, as a RedisStore with the same URL opens it
            self.db, self._owned = SyncDriver(Settings.of(target, 5.0, 10.0, 50), Eviction()), True
        self.keys = Keys(prefix)  # the store's prefix, without its session TTL

    def _run(self, what: str, flow: Callable[[], Flow[T]], *, retry: bool = True) -> T:
        return self.db.run(Op(what, lambda retried: flow(), retry))

    def close(self) -> None:
        if self._owned:
            self.db.close()


def _write_facts(keys: Keys, added: Sequence[Fact], changed: Sequence[Fact]) -> Op[None]:
    args: list[Any] = []
    for fact, is_changed in [*((f, 1) for f in changed), *((f, 0) for f in added)]:
        args += [user_key(fact.user_id), fact.id, fact_to_json(fact), int(fact.valid_to is None), is_changed]

    def flow(retried: bool) -> Flow[None]:
        reply = yield keys.script("write_facts", *args)
        tag, fact_id = reply[0], reply[1].decode() if len(reply) > 1 else ""
        owner = next((f.user_id for f in [*changed, *added] if f.id == fact_id), None)
        if tag == b"missing":
            raise ConflictError(f"fact {fact_id!r} does not exist for user {owner!r}")
        if tag == b"ended":
            raise ConflictError(f"fact {fact_id!r} was already ended; reload and retry")
        if tag == b"exists":
            raise ConflictError(f"fact {fact_id!r} already exists")

    return Op("write facts", flow, retry=False)


def _list_facts(keys: Keys, user_id: str | None, valid_at: datetime | None, open_only: bool) -> Op[list[Fact]]:
    def flow(retried: bool) -> Flow[list[Fact]]:
        rows = yield Cmd(("HVALS", keys("f", user_key(user_id))))
        return select_facts([fact_from_json(r) for r in rows], valid_at=valid_at, open_only=open_only)

    return Op("list facts", flow)


class RedisFactStore(_Shared):
    """A :class:`~convmem.longterm.facts.FactStore` in Redis."""

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        self.db.run(_write_facts(self.keys, added, changed))

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        return self.db.run(_list_facts(self.keys, user_id, valid_at, open_only))


class _HasAsyncDriver(Protocol):
    db: AsyncDriver  # an AsyncRedisStore
    keys: Keys


class AsyncRedisFactStore:
    """The async twin of :class:`RedisFactStore`: the same scripts on an
    :class:`~convmem.stores.redis.AsyncRedisStore`'s client (``store.facts()``); it closes with the store."""

    def __init__(self, store: _HasAsyncDriver) -> None:
        self.db, self.keys = store.db, Keys(store.keys.prefix)

    async def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        await self.db.run(_write_facts(self.keys, added, changed))

    async def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        return await self.db.run(_list_facts(self.keys, user_id, valid_at, open_only))

    async def aclose(self) -> None:
        """Nothing of its own to release: the client is the store's."""


class RedisBlockStore(_Shared):
    """A :class:`~convmem.longterm.blocks.store.BlockStore` in Redis."""

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        def flow() -> Flow[BlockRecord | None]:
            found = yield Cmd(("HGET", self.keys("b", user_key(scope)), name))
            return block_from_json(found) if found is not None else None

        return self._run("load a block", flow)

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        saved = replace(record, version=expected_version + 1)

        def flow() -> Flow[BlockRecord]:
            args = (user_key(record.scope), record.name, block_to_json(saved), expected_version)
            reply = yield self.keys.script("save_block", *args)
            if reply[0] == b"conflict":
                check_save(replace(record, version=int(reply[1])), record, expected_version)  # raises
            return saved

        return self._run(f"save block {record.name!r}", flow, retry=False)

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        def flow() -> Flow[list[BlockRecord]]:
            found = yield Cmd(("HGETALL", self.keys("b", user_key(scope))))
            return [block_from_json(found[name]) for name in sorted(found, key=lambda n: n.decode())]

        return self._run("list blocks", flow)


class RedisRecallStore(_Shared):
    """A :class:`~convmem.longterm.recall.store.RecallStore` in Redis; with RediSearch, a searching one.

    Opening it upgrades recall data of the first layout, if any (see :mod:`convmem.stores.redis._recall`),
    and, when the server has RediSearch, makes the lexical index (see :mod:`convmem.stores.redis._rsearch`).
    """

    def __init__(self, target: _HasDriver | str | None = None, *, prefix: str = "convmem:") -> None:
        super().__init__(target, prefix=prefix)
        self._run("upgrade recall documents", lambda: recall.upgrade(self.keys))
        self.module = self.db.run(has_search())
        if self.module:
            self._run("make the lexical index", lambda: rsearch.ensure_lexical(self.keys))
        self._indexes: set[tuple[str, int]] = set()  # vector indexes known to exist

    def searches(self) -> bool:
        """Whether RediSearch is loaded and its lexical index holds every document."""
        return self.module and self._run("read the index state", lambda: rsearch.ready(self.keys))

    def save_docs(self, docs: Sequence[RecallDoc]) -> None:
        self.insert_docs(docs)

    def insert_docs(self, docs: Sequence[RecallDoc]) -> list[RecallDoc]:
        if not docs:
            return []
        # A document already stored is skipped: a repeat is harmless.
        fresh = self._run("save recall documents", lambda: recall.save_docs(self.keys, docs))
        return [d for d, new in zip(docs, fresh, strict=True) if new]

    def load_docs(self, user_id: str | None) -> list[RecallDoc]:
        return self._run("load recall documents", lambda: recall.load_docs(self.keys, user_id))

    def save_vectors(self, model: str, docs: Sequence[RecallDoc], vectors: Any) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if not len(docs):
            return
        if self.module and (model, matrix.shape[1]) not in self._indexes:
            self._run("make a vector index", lambda: rsearch.ensure_vectors(self.keys, model, matrix.shape[1]))
            self._indexes.add((model, matrix.shape[1]))
        self._run("save vectors", lambda: recall.save_vectors(self.keys, model, docs, matrix))

    def load_vectors(self, user_id: str | None, model: str) -> tuple[list[DocRef], Any]:
        return self._run("load vectors", lambda: recall.load_vectors(self.keys, user_id, model))

    def search(self, query: StoreQuery) -> StoreResult:
        return self._run("search recall documents", lambda: rsearch.search(self.keys, query))

    def missing_vectors(self, user_id: str | None, model: str) -> list[RecallDoc]:
        return self._run("find documents without vectors", lambda: recall.missing(self.keys, user_id, model))

    def sample_vectors(self, user_id: str | None, model: str, n: int) -> Any:
        return self._run("sample vectors", lambda: recall.sample(self.keys, user_id, model, n))

    def last_doc(self, user_id: str | None, session_id: str) -> RecallDoc | None:
        def flow() -> Flow[RecallDoc | None]:
            scope = rsearch.filters(user_id, rsearch.Where(sessions=[session_id]))
            reply = yield Cmd(
                (
                    "FT.SEARCH",
                    rsearch.lexical_index(self.keys),
                    scope,
                    "SORTBY",
                    "q",
                    "DESC",
                    "RETURN",
                    1,
                    "j",
                    "LIMIT",
                    0,
                    1,
                    "DIALECT",
                    2,
                )
            )
            rows = rsearch.results(reply, False)[1]
            return doc_from_json(rows[0][2][b"j"]) if rows else None

        return self._run("read the last document", flow)

    def count_docs(self, user_id: str | None) -> int:
        return int(self._run("count documents", lambda: _llen(self.keys, user_id)))


def _llen(keys: Keys, user_id: str | None) -> Flow[int]:
    return int((yield Cmd(("LLEN", keys("rl", user_key(user_id))))))
