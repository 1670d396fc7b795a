"""Where a recall index persists: the :class:`RecallStore` contract.

Without a store, :class:`~convmem.longterm.recall.index.RecallIndex` lives in
memory and is rebuilt by whoever feeds it. With one, every indexed document
and every vector is written through, and a user's partition is loaded back
on its first use (documents, then the vectors of the index's embedder), so
a process that restarts keeps its archive searchable without re-embedding.

A store that can also search its documents lexically (SQLite FTS5)
implements :class:`LexicalRecallStore`; the index then asks it instead of
keeping BM25 postings in memory. A store whose server ranks both ways
(PostgreSQL with pgvector, Redis with RediSearch) implements
:class:`SearchingRecallStore`: the index then loads nothing of a user, and
every search is one :class:`StoreQuery` answered with candidates.

Everything is keyed by owner: a document is (user, session, message id)
(:attr:`~convmem.longterm.recall.model.RecallDoc.ref` within a user), and so
is its vector, because message ids are unique only per session in some
stores. Two users' (or two sessions') ``m1`` are two documents with two
vectors; saving one never replaces the other.

Implementations: :class:`~convmem.stores.sqlite.longterm.SQLiteRecallStore`
and :class:`~convmem.stores.files.longterm.FileRecallStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .model import DocRef, RecallDoc, Where

__all__ = ["LexicalRecallStore", "RecallStore", "SearchingRecallStore", "StoreHit", "StoreQuery", "StoreResult"]


@runtime_checkable
class RecallStore(Protocol):
    """Persists recall documents and their vectors, scoped by user."""

    def save_docs(self, docs: Sequence[RecallDoc]) -> None:
        """Store documents; one whose (user, session, message id) is already stored is ignored."""
        ...

    def load_docs(self, user_id: str | None) -> list[RecallDoc]:
        """The user's documents in the order they were saved."""
        ...

    def save_vectors(self, model: str, docs: Sequence[RecallDoc], vectors: Any) -> None:
        """Store float32 vectors of ``model``, row i for ``docs[i]`` (already saved), replacing older ones."""
        ...

    def load_vectors(self, user_id: str | None, model: str) -> tuple[list[DocRef], Any]:
        """(document refs, float32 matrix) of the user's stored vectors of ``model``."""
        ...


@runtime_checkable
class LexicalRecallStore(RecallStore, Protocol):
    """A recall store with its own lexical index (e.g. SQLite FTS5 with BM25)."""

    def lexical_search(self, query: str, *, user_id: str | None, limit: int) -> list[tuple[DocRef, float]]:
        """(document ref, score) of the user's best matches, best first. Any query text is safe."""
        ...


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """One search that a :class:`SearchingRecallStore` runs in its server.

    Attributes:
        user_id: whose documents; nothing of another user is ever a candidate.
        where: the filters, applied in the server before ranking.
        limit: candidates wanted from each retriever.
        text: the query for the lexical retriever (None: no lexical search). Any text is safe.
        model: the embedder whose vectors the dense retriever searches (None: no dense search).
        vector: the query's float32 vector of ``model``.
    """

    user_id: str | None
    where: Where
    limit: int
    text: str | None = None
    model: str | None = None
    vector: Any = None


@dataclass(frozen=True, slots=True)
class StoreHit:
    """A candidate: its lexical score and rank (None: not a lexical candidate), its cosine similarity
    (given for every candidate when the query has a vector) and its dense rank (None: not a dense candidate)."""

    doc: RecallDoc
    lexical: float | None
    lexical_rank: int | None
    dense: float | None
    dense_rank: int | None


@dataclass(frozen=True, slots=True)
class StoreResult:
    """The candidates of both retrievers, and how many documents the filters admit (fusion's population;
    0 when the query asked only one retriever, which needs no fusion)."""

    hits: list[StoreHit]
    admitted: int


@runtime_checkable
class SearchingRecallStore(RecallStore, Protocol):
    """A recall store whose server ranks the documents itself (pgvector HNSW, RediSearch).

    :class:`~convmem.longterm.recall.index.RecallIndex` then keeps no user's
    documents or vectors in memory: it writes through, and asks the server.
    """

    def searches(self) -> bool:
        """Whether the server can search now (the extension or module is there and its index ready)."""
        ...

    def insert_docs(self, docs: Sequence[RecallDoc]) -> list[RecallDoc]:
        """Store documents, skipping those already stored; returns the ones stored now."""
        ...

    def search(self, query: StoreQuery) -> StoreResult:
        """The candidates of the user's documents for ``query``, each retriever's best first."""
        ...

    def missing_vectors(self, user_id: str | None, model: str) -> list[RecallDoc]:
        """The user's documents stored without a vector of ``model``."""
        ...

    def sample_vectors(self, user_id: str | None, model: str, n: int) -> Any:
        """Up to ``n`` of the user's vectors of ``model`` (the newest), as a float32 matrix."""
        ...

    def last_doc(self, user_id: str | None, session_id: str) -> RecallDoc | None:
        """The latest document of the user's session, if any."""
        ...

    def count_docs(self, user_id: str | None) -> int:
        """How many documents the user has."""
        ...
