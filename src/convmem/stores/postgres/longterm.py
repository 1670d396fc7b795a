"""Long-term memory in PostgreSQL: facts, working blocks, and recall with ``tsvector`` + vectors.

Each class runs on a :class:`~convmem.stores.postgres.PostgresStore`'s pool
(``store.facts()``, ``store.blocks()``, ``store.recall()``, or pass the store)
or opens its own (pass a URL, or nothing for ``$CONVMEM_POSTGRES_URL``); the tables come from migration
``0002_long_term_memory`` in :mod:`convmem.stores.postgres._sql`, so one schema
holds sessions and long-term memory. Every write is one transaction or one
statement; every read is scoped by user (or block scope).

* :class:`PostgresFactStore`: ending a fact is ``UPDATE ... WHERE valid_to IS
  NULL``; if a concurrent writer ended it first, the whole write rolls back
  with :class:`~convmem.errors.ConflictError`.
* :class:`PostgresBlockStore`: the version in the ``WHERE`` clause is the
  optimistic check.
* :class:`PostgresRecallStore` (a :class:`~convmem.longterm.recall.store.LexicalRecallStore`):
  a stored ``tsvector`` (``english``: stemming, stop words) over each
  document's key (weight A) and the previous turn's text (weight B), with a
  GIN index over (owner, tsvector), so a search reads only the user's postings.
  A query is cut into words (letters and digits), so no user text is ever
  tsquery syntax; the server stems them and drops stop words; the search
  matches the rarest of them that fit a budget of documents and ranks with all
  of them, ``ts_rank`` weighing the key twice the context (:mod:`._lexical`).

Dense recall: vectors are float32 ``bytea`` rows. With the pgvector extension
installed in the database, :class:`PostgresRecallStore` is also a
:class:`~convmem.longterm.recall.store.SearchingRecallStore`: each vector gets
a pgvector copy under an HNSW index, and both retrievers run in the server
(:mod:`convmem.stores.postgres._recall`), so
:class:`~convmem.longterm.recall.index.RecallIndex` loads nothing of a user. Without
it, the user's vectors are loaded and scored exactly with numpy in the client
(100k vectors of 384 dimensions per user is about 150 MB and about 7 ms per
query, see bench/README.md).

Example::

    store = PostgresStore("postgresql://app@db/chat")
    facts = Facts(store.facts())                     # a PostgresFactStore on the store's pool
    recall = RecallIndex(store=store.recall(), embedder=HashingEmbedder())
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ...errors import ConflictError
from ...longterm.blocks.store import BlockRecord, check_save
from ...longterm.facts.model import Fact, query_time
from ...longterm.facts.store import select_facts
from ...longterm.recall._np import np
from ...longterm.recall.model import DocRef, RecallDoc
from ...longterm.recall.store import StoreQuery, StoreResult
from .._longterm_codec import block_from_json, block_to_json, created_at, fact_from_json, fact_to_json
from ..codec import encode_datetime
from . import _lexical as lexical
from . import _recall as recall
from . import _sql as sql
from ._db import AsyncDriver, Settings, SyncDriver
from ._ops import Flow, Mode, Op, Query, has_pgvector, user_key

__all__ = ["AsyncPostgresFactStore", "PostgresBlockStore", "PostgresFactStore", "PostgresRecallStore"]

T = TypeVar("T")


class _HasDriver(Protocol):
    db: SyncDriver  # a PostgresStore: the long-term stores run on its pool


class _Shared:
    def __init__(self, target: _HasDriver | str | None = None, *, schema: str = "convmem") -> None:
        if target is not None and not isinstance(target, str):
            self.db, self._owned = target.db, False  # closes with the store
        else:  # its own pool, as a PostgresStore with the same URL and schema opens it
            self.db, self._owned = SyncDriver(Settings.of(target, schema, 1, 10, 30.0)), True

    def _run(self, what: str, flow: Callable[[], Flow[T]], mode: Mode = "statement", *, retry: bool = True) -> T:
        return self.db.run(Op(what, lambda retried: flow(), mode, retry))

    def close(self) -> None:
        if self._owned:
            self.db.close()


def _write_facts(added: Sequence[Fact], changed: Sequence[Fact]) -> Op[None]:
    def flow(retried: bool) -> Flow[None]:
        for fact in changed:
            params = (fact_to_json(fact), fact.valid_to, fact.id, user_key(fact.user_id))
            if not (yield Query(sql.UPDATE_FACT, params)):
                found = yield Query(sql.FACT_OWNER, (fact.id,))
                if not found or found[0][0] != user_key(fact.user_id):
                    raise ConflictError(f"fact {fact.id!r} does not exist for user {fact.user_id!r}")
                raise ConflictError(f"fact {fact.id!r} was already ended; reload and retry")
        for fact in added:
            if (yield Query(sql.FACT_EXISTS, (fact.id,))):
                raise ConflictError(f"fact {fact.id!r} already exists")
            row = (fact.id, user_key(fact.user_id), fact_to_json(fact), fact.valid_from, fact.valid_to)
            yield Query(sql.INSERT_FACT, row)

    return Op("write facts", flow, "transaction", retry=False)


def _list_facts(user_id: str | None, valid_at: datetime | None, open_only: bool) -> Op[list[Fact]]:
    key = user_key(user_id)
    valid_at = query_time(valid_at)  # naive is UTC, never the server's time zone
    if valid_at is not None:
        query = Query(sql.LIST_FACTS_AT, (key, valid_at, valid_at))
    else:
        query = Query(sql.LIST_OPEN_FACTS if open_only else sql.LIST_FACTS, (key,))

    def flow(retried: bool) -> Flow[list[Fact]]:
        rows = yield query
        return select_facts([fact_from_json(p) for (p,) in rows], valid_at=valid_at, open_only=open_only)

    return Op("list facts", flow)


class PostgresFactStore(_Shared):
    """A :class:`~convmem.longterm.facts.FactStore` in PostgreSQL."""

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        self.db.run(_write_facts(added, changed))

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        return self.db.run(_list_facts(user_id, valid_at, open_only))


class _HasAsyncDriver(Protocol):
    db: AsyncDriver  # an AsyncPostgresStore


class AsyncPostgresFactStore:
    """The async twin of :class:`PostgresFactStore`: the same operations on an
    :class:`~convmem.stores.postgres.AsyncPostgresStore`'s pool (``store.facts()``); it closes with the store."""

    def __init__(self, store: _HasAsyncDriver) -> None:
        self.db = store.db

    async def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        await self.db.run(_write_facts(added, changed))

    async def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        return await self.db.run(_list_facts(user_id, valid_at, open_only))

    async def aclose(self) -> None:
        """Nothing of its own to release: the pool is the store's."""


class PostgresBlockStore(_Shared):
    """A :class:`~convmem.longterm.blocks.store.BlockStore` in PostgreSQL."""

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        def flow() -> Flow[BlockRecord | None]:
            rows = yield Query(sql.SELECT_BLOCK, (user_key(scope), name))
            return block_from_json(rows[0][0]) if rows else None

        return self._run("load a block", flow)

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        saved = replace(record, version=expected_version + 1)
        key = user_key(record.scope)

        def flow() -> Flow[BlockRecord]:
            if expected_version == 0:
                won = yield Query(sql.INSERT_BLOCK, (key, record.name, block_to_json(saved), saved.version))
            else:
                params = (block_to_json(saved), saved.version, key, record.name, expected_version)
                won = yield Query(sql.UPDATE_BLOCK, params)
            if not won:
                rows = yield Query(sql.SELECT_BLOCK, (key, record.name))
                check_save(block_from_json(rows[0][0]) if rows else None, record, expected_version)  # raises
                raise ConflictError(f"block {record.name!r} of {record.scope!r} changed meanwhile; reload it")
            return saved

        return self._run(f"save block {record.name!r}", flow, retry=False)

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        def flow() -> Flow[list[BlockRecord]]:
            return [block_from_json(p) for (p,) in (yield Query(sql.LIST_BLOCKS, (user_key(scope),)))]

        return self._run("list blocks", flow)


class PostgresRecallStore(_Shared):
    """A :class:`~convmem.longterm.recall.store.LexicalRecallStore`: documents, ``tsvector`` and vectors.

    With pgvector installed (when the store opened), also a
    :class:`~convmem.longterm.recall.store.SearchingRecallStore`: see the module docstring.
    """

    def __init__(self, target: _HasDriver | str | None = None, *, schema: str = "convmem") -> None:
        super().__init__(target, schema=schema)
        self._indexes: set[str] = set()  # HNSW indexes known to exist

    def has_pgvector(self) -> bool:
        """Whether the server offers the pgvector extension (see the module docstring)."""
        return self.db.run(has_pgvector())

    def searches(self) -> bool:
        """Whether the server searches vectors itself: pgvector was installed when the store opened."""
        return self.db.vector_schema is not None

    def save_docs(self, docs: Sequence[RecallDoc]) -> None:
        self.insert_docs(docs)

    def insert_docs(self, docs: Sequence[RecallDoc]) -> list[RecallDoc]:
        if not docs:
            return []
        columns: list[list[Any]] = [
            [d.message_id for d in docs],
            [user_key(d.user_id) for d in docs],
            [d.session_id for d in docs],
            [d.seq for d in docs],
            [d.role for d in docs],
            [encode_datetime(d.created_at) for d in docs],
            [d.created_at.timestamp() for d in docs],
            [d.text for d in docs],
            [d.key for d in docs],
            [d.context for d in docs],
        ]

        def flow() -> Flow[list[tuple[Any, ...]]]:
            return (yield Query(sql.INSERT_RECALL_DOCS, columns))

        stored = {tuple(r) for r in self._run("save recall documents", flow)}  # a repeat is skipped
        fresh = [d for d in docs if (user_key(d.user_id), d.session_id, d.message_id) in stored]
        return list({(d.user_id, d.ref): d for d in fresh}.values())

    def load_docs(self, user_id: str | None) -> list[RecallDoc]:
        def flow() -> Flow[list[RecallDoc]]:
            rows = yield Query(sql.LOAD_RECALL_DOCS, (user_key(user_id),))
            return [
                RecallDoc(mid, session, user_id, seq, role, text, created_at(created), key, context)
                for mid, session, seq, role, created, text, key, context in rows
            ]

        return self._run("load recall documents", flow)

    def save_vectors(self, model: str, docs: Sequence[RecallDoc], vectors: Any) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if not len(docs):
            return
        schema = self.db.vector_schema
        self._run(
            "save vectors",
            lambda: recall.save_vectors(schema, model, docs, matrix, self._indexes),
            "transaction",  # the index, when it is made, commits with the first vectors
        )

    def load_vectors(self, user_id: str | None, model: str) -> tuple[list[DocRef], Any]:
        def flow() -> Flow[list[tuple[Any, ...]]]:
            return (yield Query(sql.LOAD_VECTORS, (user_key(user_id), model)))

        rows = self._run("load vectors", flow)
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        dim = rows[0][2]
        kept = [r for r in rows if r[2] == dim]
        matrix = np.frombuffer(b"".join(bytes(r[3]) for r in kept), dtype=np.float32).reshape(-1, dim)
        return [(r[0], r[1]) for r in kept], matrix

    def lexical_search(self, query: str, *, user_id: str | None, limit: int) -> list[tuple[DocRef, float]]:
        text = lexical.words(query)
        if text is None or limit <= 0:
            return []

        def flow() -> Flow[list[tuple[DocRef, float]]]:
            rows = yield from lexical.lexical_search(user_id, text, limit)
            return [((session, mid), float(score)) for session, mid, score in rows]

        return self._run("search recall documents", flow)

    def search(self, query: StoreQuery) -> StoreResult:
        text = lexical.words(query.text) if query.text is not None else None
        schema = self.db.vector_schema
        return self._run("search recall documents", lambda: recall.search(schema, query, text))

    def missing_vectors(self, user_id: str | None, model: str) -> list[RecallDoc]:
        def flow() -> Flow[list[RecallDoc]]:
            rows = yield Query(recall.MISSING, {"user": user_key(user_id), "model": model})
            return [recall.doc_of(r, user_id) for r in rows]

        return self._run("find documents without vectors", flow)

    def sample_vectors(self, user_id: str | None, model: str, n: int) -> Any:
        def flow() -> Flow[list[tuple[Any, ...]]]:
            return (yield Query(recall.SAMPLE, {"user": user_key(user_id), "model": model, "n": n}))

        rows = self._run("sample vectors", flow)
        kept = [bytes(r[1]) for r in rows if rows and r[0] == rows[0][0]]
        if not kept:
            return np.zeros((0, 0), dtype=np.float32)
        return np.frombuffer(b"".join(kept), dtype=np.float32).reshape(len(kept), -1)

    def last_doc(self, user_id: str | None, session_id: str) -> RecallDoc | None:
        def flow() -> Flow[RecallDoc | None]:
            rows = yield Query(recall.LAST, {"user": user_key(user_id), "session": session_id})
            return recall.doc_of(rows[0], user_id) if rows else None

        return self._run("read the last document", flow)

    def count_docs(self, user_id: str | None) -> int:
        def flow() -> Flow[int]:
            return int((yield Query(recall.COUNT, {"user": user_key(user_id)}))[0][0])

        return self._run("count documents", flow)
