"""Recall answered by the store's server: what :class:`~convmem.longterm.recall.index.RecallIndex` does with a
:class:`~convmem.longterm.recall.store.SearchingRecallStore` (PostgreSQL with pgvector, Redis with RediSearch).

What comes in, what happens, what goes out:

* **add**: documents go to the store, which skips those it has; the new ones
  are embedded (now, or at the next search or flush with ``defer``) and their
  vectors written through. Nothing of a user stays in this process: no
  documents, no postings, no vectors. Documents stored without a vector by
  an earlier process (the embedder failed) are found on the user's first
  search here, and embedded then.
* **search**: one :class:`~convmem.longterm.recall.store.StoreQuery` with the
  query's words, its vector and the filters; the server answers with up to
  ``max(4k, 50)`` candidates of each retriever (the depth fusion uses in
  process too), the cosine of every candidate, and the admitted population.
* **fusion**, as in process: RRF over the two candidate rankings, or z-score
  fusion. Lexical statistics come from the lexical candidates over the
  admitted population (what the SQLite FTS5 path has always done). Dense
  ones cannot come from an ANN index, which yields only its top: they are the
  mean and spread of the query's cosine over a sample of the user's newest
  vectors (up to 256, cached per user for five minutes), exact for users with
  fewer documents than that.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Protocol

from ...errors import LLMError
from ._np import np
from ._partition import top
from .embedders import Embedder, embed_checked
from .fusion import rrf
from .hits import RecallHit
from .model import DocRef, RecallDoc, Where
from .store import SearchingRecallStore, StoreHit, StoreQuery

__all__ = ["StoreSearch"]

SAMPLE = 256  # vectors per user for the dense statistics
SAMPLE_TTL = 300.0  # seconds a user's sample is reused
SAMPLE_USERS = 32  # users whose samples are kept


class _Index(Protocol):
    """What this path reads of its :class:`~convmem.longterm.recall.index.RecallIndex`."""

    @property
    def embedder(self) -> Embedder | None: ...
    @property
    def defer(self) -> bool: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def fusion(self) -> str: ...
    @property
    def rrf_k(self) -> float: ...
    @property
    def weights(self) -> tuple[float, float]: ...

    def _retry_pending(self) -> None: ...

    def _warn(self, text: str) -> None: ...


class StoreSearch:
    """The store-side search path of one recall index (which holds its lock around every call)."""

    def __init__(self, index: _Index, store: SearchingRecallStore) -> None:
        self.index, self.store = index, store
        self.pending: dict[tuple[str | None, DocRef], RecallDoc] = {}
        self._seeded: set[str | None] = set()
        self._samples: OrderedDict[tuple[str | None, str], tuple[float, Any]] = OrderedDict()

    # -- writing -----------------------------------------------------------------------------
    def add(self, docs: list[RecallDoc]) -> int:
        fresh = self.store.insert_docs(docs)
        if self.index.embedder is not None:
            for doc in fresh:
                self.pending[(doc.user_id, doc.ref)] = doc
        if fresh and self.index.embedder is not None and not self.index.defer:
            self.flush()
        return len(fresh)

    def seed(self, user_id: str | None) -> None:
        """Queue the user's documents that an earlier process stored without a vector."""
        embedder = self.index.embedder
        if embedder is None or user_id in self._seeded:
            return
        for doc in self.store.missing_vectors(user_id, embedder.name):
            self.pending.setdefault((doc.user_id, doc.ref), doc)
        self._seeded.add(user_id)

    def flush(self) -> int:
        embedder = self.index.embedder
        if embedder is None:
            return 0
        done = 0
        waiting = list(self.pending.values())
        for start in range(0, len(waiting), self.index.batch_size):
            batch = waiting[start : start + self.index.batch_size]
            vectors = embed_checked(embedder, [d.key for d in batch])
            self.store.save_vectors(embedder.name, batch, vectors)
            for doc in batch:
                del self.pending[(doc.user_id, doc.ref)]
            done += len(batch)
        return done

    def previous_text(self, user_id: str | None, session_id: str) -> str:
        doc = self.store.last_doc(user_id, session_id)
        return doc.text if doc is not None else ""

    # -- search ------------------------------------------------------------------------------
    def search(self, query: str, user_id: str | None, k: int, mode: str, where: Where) -> list[RecallHit]:
        """The k best hits; ``mode`` is ``lexical``, ``dense`` or ``hybrid``."""
        self.seed(user_id)
        vector = None
        embedder = self.index.embedder
        if mode != "lexical":
            assert embedder is not None
            self.index._retry_pending()
            try:
                vector = embed_checked(embedder, [query])[0]
            except LLMError as exc:
                if mode == "dense":
                    raise
                self.index._warn(f"dense recall skipped, lexical only: {exc}")
        depth = max(k * 4, 50)
        request = StoreQuery(
            user_id,
            where,
            depth,
            text=query if mode != "dense" else None,
            model=embedder.name if vector is not None and embedder is not None else None,
            vector=vector,
        )
        result = self.store.search(request)
        hits = result.hits
        if not hits:
            return []
        lexical = [h for h in hits if h.lexical_rank is not None]
        dense = [h for h in hits if h.dense_rank is not None]
        if vector is None or request.text is None:
            ranked = lexical if vector is None else dense
            ranked.sort(key=lambda h: (h.lexical_rank if vector is None else h.dense_rank) or 0)
            return [_hit(h, (h.lexical if vector is None else h.dense) or 0.0) for h in ranked[:k]]
        if self.index.fusion == "rrf":
            by_lex = sorted(range(len(hits)), key=lambda i: hits[i].lexical_rank or 0)
            by_den = sorted(range(len(hits)), key=lambda i: hits[i].dense_rank or 0)
            rankings = [
                [i for i in by_lex if hits[i].lexical_rank is not None],
                [i for i in by_den if hits[i].dense_rank is not None],
            ]
            fused = rrf(rankings, k=self.index.rrf_k, weights=self.index.weights)[:k]
        else:
            fused = top(np.arange(len(hits)), self._zscores(hits, result.admitted, user_id, vector), k)
        return [_hit(hits[i], score) for i, score in fused]

    def _zscores(self, hits: list[StoreHit], admitted: int, user_id: str | None, vector: Any) -> Any:
        """z-score fusion over the candidates; see the module docstring for where the statistics come from."""
        w_lex, w_dense = self.index.weights
        lex = np.asarray([h.lexical if h.lexical_rank is not None else 0.0 for h in hits], dtype=np.float64)
        cos = np.asarray([h.dense if h.dense is not None else 0.0 for h in hits], dtype=np.float64)
        scored = lex[[h.lexical_rank is not None for h in hits]]
        population = max(admitted, len(scored), 1)
        mean = scored.sum() / population
        sd = max((scored * scored).sum() / population - mean * mean, 0.0) ** 0.5 or 1.0
        total = w_lex * (lex - mean) / sd if len(scored) else np.zeros(len(hits))
        dense_mean, dense_sd = self._dense_stats(user_id, vector, cos)
        return total + w_dense * (cos - dense_mean) / dense_sd

    def _dense_stats(self, user_id: str | None, vector: Any, fallback: Any) -> tuple[float, float]:
        embedder = self.index.embedder
        assert embedder is not None
        key = (user_id, embedder.name)
        cached = self._samples.get(key)
        if cached is None or time.monotonic() - cached[0] > SAMPLE_TTL:
            cached = (time.monotonic(), np.asarray(self.store.sample_vectors(user_id, embedder.name, SAMPLE)))
            self._samples[key] = cached
            while len(self._samples) > SAMPLE_USERS:
                self._samples.popitem(last=False)
        self._samples.move_to_end(key)
        sample = cached[1]
        sims = sample @ vector if len(sample) and sample.shape[1] == len(vector) else fallback
        return float(np.mean(sims)), float(np.std(sims)) or 1.0


def _hit(hit: StoreHit, score: float) -> RecallHit:
    return RecallHit(hit.doc, score, hit.lexical_rank, hit.dense_rank)
