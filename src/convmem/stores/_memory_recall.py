"""The in-memory store's recall documents: a :class:`~convmem.longterm.recall.store.RecallStore` in this process.

What :meth:`convmem.stores.memory.MemoryStore.recall` gives: the documents and
vectors of every user, kept in dicts for as long as the store lives, so a
:class:`~convmem.longterm.recall.index.RecallIndex` built on it (or rebuilt on
it, by another memory of the same process) finds what was archived. A
document is kept once per (user, session, message id), as every backend keeps
it; a vector belongs to its document, its latest one per model wins, and the
vectors of one model share the dimension of the first one found (others are
stale, as on the file store). Needs numpy (the ``recall`` extra).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..longterm.recall._np import np

if TYPE_CHECKING:
    from ..longterm.recall import RecallDoc

__all__ = ["MemoryRecallStore"]

_Ref = tuple[str, str]  # (session id, message id): a document's identity within its user


class MemoryRecallStore:
    """Recall documents and their vectors, in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._docs: dict[str | None, dict[_Ref, RecallDoc]] = {}
        self._vectors: dict[tuple[str, str | None], dict[_Ref, Any]] = {}  # (model, user) -> ref -> vector

    def save_docs(self, docs: Sequence[RecallDoc]) -> None:
        with self._lock:
            for doc in docs:
                self._docs.setdefault(doc.user_id, {}).setdefault(doc.ref, doc)

    def load_docs(self, user_id: str | None) -> list[RecallDoc]:
        with self._lock:
            return list(self._docs.get(user_id, {}).values())

    def save_vectors(self, model: str, docs: Sequence[RecallDoc], vectors: Any) -> None:
        with self._lock:
            for i, doc in enumerate(docs):
                self._vectors.setdefault((model, doc.user_id), {})[doc.ref] = np.array(vectors[i], dtype=np.float32)

    def load_vectors(self, user_id: str | None, model: str) -> tuple[list[_Ref], Any]:
        with self._lock:
            mine = self._docs.get(user_id, {})
            rows = [(ref, v) for ref, v in self._vectors.get((model, user_id), {}).items() if ref in mine]
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        size = rows[0][1].shape[-1]
        kept = [(ref, v) for ref, v in rows if v.shape[-1] == size]
        return [ref for ref, _ in kept], np.stack([v for _, v in kept])

    def close(self) -> None:
        """Nothing to release: the documents live as long as the store."""
