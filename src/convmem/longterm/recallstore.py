"""Where a recall index persists: the :class:`RecallStore` contract.

Without a store, :class:`~convmem.longterm.recall.RecallIndex` lives in
memory and is rebuilt by whoever feeds it. With one, every indexed document
and every vector is written through, and a user's partition is loaded back
on its first use (documents, then the vectors of the index's embedder), so
a process that restarts keeps its archive searchable without re-embedding.

A store that can also search its documents lexically (SQLite FTS5)
implements :class:`LexicalRecallStore`; the index then asks it instead of
keeping BM25 postings in memory.

Everything is keyed by owner: a document is (user, session, message id)
(:attr:`~convmem.longterm._partition.RecallDoc.ref` within a user), and so
is its vector, because message ids are unique only per session in some
stores. Two users' (or two sessions') ``m1`` are two documents with two
vectors; saving one never replaces the other.

Implementations: :class:`~convmem.stores.sqlite.longterm.SQLiteRecallStore`
and :class:`~convmem.stores.files.longterm.FileRecallStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ._partition import DocRef, RecallDoc

__all__ = ["LexicalRecallStore", "RecallStore"]


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
