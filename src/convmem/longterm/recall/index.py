"""Recall over the archive: lexical (BM25 and its ranking steps), dense (embeddings) and hybrid.

:class:`RecallIndex` indexes archived messages per user, so one user's documents never share a
ranking, a statistic or a result with another's (invariant 6). It is an eviction sink:
``Memory(sinks=[recall])`` hands it every evicted unit, and it indexes them right away.

* **Lexical**: an in-process BM25 index (:mod:`.lexical`), updated on every archive and never
  rebuilt, or a store's own (SQLite FTS5). :mod:`.ranking` then applies the steps of
  :class:`Tuning`: the previous message's words in each key, feedback, session neighbours, and
  the dates a query names (:mod:`.temporal`). An optional ``rewriter`` (an LLM) adds search strings.
* **Dense**: each archived message's *key* is embedded once, in batches, at archive time (or, with
  ``defer=True``, at the next search or :meth:`~RecallIndex.flush`), never on the ``add`` path. If
  the embedder fails, ``absorb`` raises :class:`~convmem.errors.LLMError` *after* the lexical
  indexing; the missing vectors are retried at the next archive, search or flush.
* **Hybrid** fuses both, by default with z-scored score fusion (:mod:`.fusion`); ``fusion="rrf"``
  selects reciprocal-rank fusion; ``rerank=N`` lets the embedder re-order only the top N lexical hits.
* **In the server**: with a store whose server searches (pgvector, RediSearch), nothing of a user is
  loaded and one query per search runs both retrievers there (:mod:`._storesearch`).

Every hit says what each signal gave it (:class:`~.hits.RecallHit`). Constants: cross-validated on LoCoMo and
LongMemEval-S (``bench/recall_protocol.py``). Filters: sessions, a time range, roles, the current window.

Example::

    recall = RecallIndex(embedder=SentenceTransformerEmbedder())
    memory = Memory(model="gpt-4o", user_id="alice", sinks=[recall])
    for hit in recall.search("where did I park?", user_id="alice", k=5):
        print(hit.score, hit.bm25, hit.dense, hit.reason)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ...errors import ConfigurationError, LLMError
from ...messages import StoredMessage
from . import ranking
from ._np import np
from ._partition import Partition, top
from ._storesearch import StoreSearch
from .embedders import Embedder, embed_checked
from .fusion import nonzero, rrf, zscore
from .hits import RecallHit
from .keys import Keys
from .lexical import bm25_idf, context_weight, tokenize
from .model import RecallDoc, Where
from .ranking import DEFAULT_TUNING, LexicalSignals, QueryRewriter, Tuning, build_hits, dense_steps, lexical_signals
from .steps import asks_many, spread
from .store import LexicalRecallStore, RecallStore, SearchingRecallStore

__all__ = ["Keys", "Mode", "RecallDoc", "RecallHit", "RecallIndex", "Tuning", "Where"]

Mode: TypeAlias = Literal["lexical", "dense", "hybrid"]
Fusion: TypeAlias = Literal["rrf", "zscore"]
RECALL_ROLES = frozenset({"user", "assistant", "tool"})


class RecallIndex:
    """Per-user lexical and dense indexes over archived messages. See the module docstring.

    Args:
        embedder: enables dense and hybrid recall.
        mode: the default mode; ``"hybrid"`` with an embedder, else ``"lexical"``.
        keys: key enrichment.
        defer: embed at the next search or :meth:`flush` instead of at archive time.
        batch_size: texts per embedder call.
        fusion: how hybrid mode fuses: ``"zscore"`` or ``"rrf"``.
        rrf_k: the RRF constant.
        weights: (lexical, dense) weights of the fusion; default (1, 1) for z-score, (1, 0.5) for RRF.
        roles: which roles are indexed (tool results are, system prompts are not).
        store: persists documents and vectors (write-through; a user's partition loads on first use).
            A store whose server searches (pgvector, RediSearch) keeps everything there instead:
            nothing of a user is loaded, and both retrievers run in the server (:mod:`._storesearch`);
            the ranking steps of :mod:`.ranking` (neighbours, dates) then do not apply.
        lexical: ``"store"`` searches with the store's own index (SQLite FTS5, PostgreSQL, RediSearch),
            ``"memory"`` in process (dense too); ``"auto"`` picks the store's when it has one.
        tuning: the lexical constants and steps (:class:`~convmem.longterm.recall.ranking.Tuning`).
        rerank: in hybrid mode, let the embedder re-score only the top ``rerank`` lexical
            candidates instead of ranking every document (None: every document).
        rewriter: adds search strings to the lexical query (an LLM: ``convmem.llm.rewriter``), checked first; if it
            fails, the search goes on with the query alone and :attr:`warnings` says why.
    """

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        mode: Mode | None = None,
        keys: Keys | None = None,
        defer: bool = False,
        batch_size: int = 64,
        fusion: Fusion = "zscore",
        rrf_k: float = 10.0,
        weights: tuple[float, float] | None = None,
        roles: Collection[str] = RECALL_ROLES,
        store: RecallStore | None = None,
        lexical: Literal["auto", "memory", "store"] = "auto",
        tuning: Tuning = DEFAULT_TUNING,
        rerank: int | None = None,
        rewriter: QueryRewriter | None = None,
    ) -> None:
        if mode in ("dense", "hybrid") and embedder is None:
            raise ConfigurationError(f"recall mode {mode!r} needs an embedder")
        self.embedder = embedder
        self.mode: Mode = mode or ("hybrid" if embedder is not None else "lexical")
        self.keys = keys or Keys()
        self.defer = defer
        self.batch_size = batch_size
        if fusion not in ("rrf", "zscore"):
            raise ConfigurationError(f"fusion must be 'rrf' or 'zscore', got {fusion!r}")
        self.fusion: Fusion = fusion
        self.rrf_k = rrf_k
        # z-score fusion weighs both equally; RRF gives dense half weight (both chosen on LoCoMo dev).
        self.weights = weights if weights is not None else ((1.0, 1.0) if fusion == "zscore" else (1.0, 0.5))
        self._previous: dict[tuple[str | None, str], str] = {}  # (user, session) -> last indexed text
        self.roles = frozenset(roles)
        self.warnings: list[str] = []
        self._partitions: dict[str | None, Partition] = {}
        self.store = store
        if lexical == "store" and not isinstance(store, LexicalRecallStore):
            raise ConfigurationError("lexical='store' needs a store with its own lexical index (SQLiteRecallStore)")
        self._store_lexical = isinstance(store, LexicalRecallStore) and lexical != "memory"
        remote = store if isinstance(store, SearchingRecallStore) and lexical != "memory" else None
        self._remote = StoreSearch(self, remote) if remote is not None and remote.searches() else None
        self.tuning = tuning
        if rerank is not None and rerank < 1:
            raise ConfigurationError(f"rerank must be a positive number of candidates, got {rerank!r}")
        self.rerank = rerank
        self.rewriter = rewriter
        self._lock = threading.RLock()

    # -- indexing ----------------------------------------------------------------------------
    def add(self, docs: Sequence[RecallDoc]) -> int:
        """Index documents (already-indexed ones are skipped); returns how many were new.

        A document is already indexed when its user, session and message id all match one that is.
        Raises LLMError if embedding fails; the documents stay indexed lexically.
        """
        with self._lock:
            if self._remote is not None:
                return self._remote.add(list(docs))
            fresh = [d for d in docs if d.ref not in self._partition(d.user_id).numbers]
            if fresh and self.store is not None:
                self.store.save_docs(fresh)  # write through first: what is searchable is also stored
            added = 0
            for doc in fresh:
                added += self._index(self._partition(doc.user_id), doc) is not None
            if added and self.embedder is not None and not self.defer:
                self.flush()
            return added

    def _index(self, partition: Partition, doc: RecallDoc) -> int | None:
        if self._store_lexical:
            return partition.add(doc, [])  # the store keeps the lexical index
        context = tokenize(doc.context) if doc.context else []
        tokens = tokenize(doc.key)
        weight = context_weight(self.tuning.context_weight, len(tokens), len(context), self.tuning.context_decay)
        return partition.add(doc, tokens, context, weight)

    def _partition(self, user_id: str | None) -> Partition:
        """The user's partition, loaded from the store on first use."""
        partition = self._partitions.get(user_id)
        if partition is not None:
            return partition
        partition = self._partitions[user_id] = Partition(k1=self.tuning.k1, b=self.tuning.b)
        if self.store is not None:
            for doc in self.store.load_docs(user_id):
                self._index(partition, doc)
                self._previous[(user_id, doc.session_id)] = doc.text
            if self.embedder is not None:
                refs, vectors = self.store.load_vectors(user_id, self.embedder.name)
                keep = [(partition.numbers[r], i) for i, r in enumerate(refs) if r in partition.numbers]
                if keep and vectors.shape[1] == self.embedder.dim:
                    partition.set_vectors(
                        self.embedder.name, [n for n, _ in keep], np.asarray(vectors)[[i for _, i in keep]]
                    )
        return partition

    def add_messages(self, messages: Sequence[StoredMessage], *, session_id: str, user_id: str | None) -> int:
        """Index stored messages of one session, oldest first (the roles in ``roles`` with text)."""
        docs = []
        with self._lock:
            for stored in messages:
                doc = self.doc(stored, session_id=session_id, user_id=user_id)
                if doc is not None:
                    docs.append(doc)
                    self._previous[(user_id, session_id)] = doc.text
        return self.add(docs)

    def doc(self, stored: StoredMessage, *, session_id: str, user_id: str | None) -> RecallDoc | None:
        """The document for a stored message, or None if it is not recalled (a role not indexed, or no text)."""
        message = stored.message
        if message.role not in self.roles or message.id is None or message.created_at is None:
            return None
        text = message.text
        if not text.strip():
            return None
        key = self.keys.build(message, user_id, session_id)
        if self.keys.context and (user_id, session_id) not in self._previous and self._remote is not None:
            self._previous[(user_id, session_id)] = self._remote.previous_text(user_id, session_id)
        context = self._previous.get((user_id, session_id), "") if self.keys.context else ""
        return RecallDoc(
            message.id, session_id, user_id, stored.seq, message.role, text, message.created_at, key, context
        )

    def absorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        """EvictionSink: index the evicted units."""
        self.add_messages([s for unit in units for s in unit], session_id=session_id, user_id=user_id)

    async def aabsorb(self, units: Sequence[Sequence[StoredMessage]], *, session_id: str, user_id: str | None) -> None:
        """AsyncEvictionSink: like :meth:`absorb`, in a worker thread (embedding may take a while)."""
        await asyncio.to_thread(self.absorb, units, session_id=session_id, user_id=user_id)

    def flush(self) -> int:
        """Embed every document that has no vector yet, in batches; returns how many were embedded.

        Raises LLMError on the first failing batch; what is left stays pending for the next call.
        """
        if self.embedder is None:
            return 0
        done = 0
        with self._lock:
            if self._remote is not None:
                return self._remote.flush()
            for partition in self._partitions.values():
                missing = partition.missing_vectors(self.embedder.name)
                for start in range(0, len(missing), self.batch_size):
                    numbers = missing[start : start + self.batch_size]
                    vectors = embed_checked(self.embedder, [partition.docs[i].key for i in numbers])
                    if self.store is not None:
                        self.store.save_vectors(self.embedder.name, [partition.docs[i] for i in numbers], vectors)
                    partition.set_vectors(self.embedder.name, numbers, vectors)
                    done += len(numbers)
        return done

    def pending(self) -> int:
        """Documents still waiting for a vector."""
        if self.embedder is None:
            return 0
        with self._lock:
            if self._remote is not None:
                return len(self._remote.pending)  # those of users searched or written here
            return sum(len(p.missing_vectors(self.embedder.name)) for p in self._partitions.values())

    def __len__(self) -> int:
        """Documents held in this process (none when the store's server searches: see :meth:`count`)."""
        return sum(len(p) for p in self._partitions.values())

    def count(self, *, user_id: str | None) -> int:
        with self._lock:
            return self._remote.store.count_docs(user_id) if self._remote else len(self._partition(user_id))

    # -- search ------------------------------------------------------------------------------
    def term_weights(self, user_id: str | None, terms: Collection[str]) -> dict[str, float]:
        """Each term's BM25 idf in the user's archive (a term it lacks as rare as can be; no counts: 1 each)."""
        with self._lock:
            lexical = self._partition(user_id).lexical
            n = len(lexical)
        return {t: bm25_idf(n, max(1, lexical.document_frequency(t))) if n else 1.0 for t in terms}

    def search(
        self,
        query: str,
        *,
        user_id: str | None,
        k: int = 10,
        mode: Mode | None = None,
        session_id: str | Collection[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        roles: Collection[str] | None = None,
        exclude_window: tuple[str, int] | None = None,
        now: datetime | None = None,
    ) -> list[RecallHit]:
        """The ``k`` archived messages of ``user_id`` most relevant to ``query``, best first.

        Args:
            query: any text; it is tokenized, never parsed, so no input raises a syntax error.
            user_id: whose archive (required: recall never crosses users).
            mode: ``lexical``, ``dense`` or ``hybrid`` (default: the index's mode).
            session_id: one session id or several.
            since: only messages said at or after this time.
            until: only messages said before this time.
            roles: only these roles.
            exclude_window: ``(session_id, first_seq)``: leave out that session's messages
                from ``first_seq`` on (those already in the context window).
            now: the time of the question, for relative dates in it ("last week").

        Each hit carries its per-signal scores and the reason it was kept (:class:`RecallHit`).
        """
        mode = mode or self.mode
        if mode != "lexical" and self.embedder is None:
            raise ConfigurationError(f"recall mode {mode!r} needs an embedder")
        if k <= 0:
            return []
        sessions = [session_id] if isinstance(session_id, str) else session_id
        window: tuple[str | None, int | None] = exclude_window or (None, None)
        where = Where(sessions, since, until, roles, *window)
        words = self._rewritten(query) if self.rewriter is not None and mode != "dense" else query
        with self._lock:
            if self._remote is not None:
                return self._remote.search(query, user_id, k, mode, where)
            partition = self._partition(user_id)
            if not len(partition):
                return []
            if mode != "lexical":
                self._retry_pending()
            keep = partition.mask(where)
            signals = self._lexical(partition, words, user_id, keep, k, now) if mode != "dense" else None
            dense = None
            if mode != "lexical":
                assert self.embedder is not None
                try:
                    vector = embed_checked(self.embedder, [query])[0]
                except LLMError as exc:
                    if mode == "dense":
                        raise
                    self._warn(f"dense recall skipped, lexical only: {exc}")
                else:
                    dense = self._dense(partition, vector, keep, signals)
            admitted = len(partition) if keep is None else int(np.count_nonzero(keep))
            return self._fuse(partition, signals, dense, admitted, k, asks_many(query))

    def _lexical(
        self, partition: Partition, query: str, user_id: str | None, keep: Any, k: int, now: datetime | None
    ) -> LexicalSignals:
        if not self._store_lexical:
            return lexical_signals(partition, query, self.tuning, keep, now=now)
        assert isinstance(self.store, LexicalRecallStore)
        # Filters apply after the store's search; ask for more when they may discard many.
        limit = max(k * 4, 50) if keep is None else max(k * 4, 50, len(partition) // 4)
        pairs = [
            (partition.numbers.get(r), s) for r, s in self.store.lexical_search(query, user_id=user_id, limit=limit)
        ]
        known = [(n, s) for n, s in pairs if n is not None]
        found = (np.asarray([n for n, _ in known], np.int64), np.asarray([s for _, s in known], np.float32))
        return lexical_signals(partition, query, self.tuning, keep, store_scores=found, now=now)

    def _dense(self, partition: Partition, vector: Any, keep: Any, signals: LexicalSignals | None) -> tuple[Any, Any]:
        if self.rerank is None or signals is None:
            return partition.dense_scores(vector, keep)
        numbers, _ = nonzero(signals.score)
        candidates = np.asarray([n for n, _ in top(numbers, signals.score[numbers], self.rerank)], np.int64)
        numbers, sims = partition.dense_scores(vector, None)
        return candidates, sims[np.searchsorted(numbers, candidates)] if len(candidates) else sims[:0]

    def _fuse(
        self,
        partition: Partition,
        signals: LexicalSignals | None,
        dense: tuple[Any, Any] | None,
        admitted: int,
        k: int,
        many: bool,
    ) -> list[RecallHit]:
        depth = max(k * 4, 50)  # fusion needs candidates beyond k from each side
        lexical = nonzero(signals.score) if signals is not None else None
        lex = top(*lexical, depth) if lexical is not None else []
        raw, dense = dense, dense_steps(partition, dense, signals, self.tuning) if dense is not None else None
        den = top(*dense, depth) if dense is not None else []
        lex_rank = {n: r for r, (n, _) in enumerate(lex, start=1)}
        den_rank = {n: r for r, (n, _) in enumerate(den, start=1)}
        if lexical is not None and dense is not None:
            if self.fusion == "rrf":
                fused = rrf([[n for n, _ in lex], [n for n, _ in den]], k=self.rrf_k, weights=self.weights)[:depth]
            else:
                parts = [(*lexical, admitted), (*dense, len(dense[0]))]
                fused = top(*zscore(parts, self.weights), depth)
            candidates, label = max(len(lexical[0]), len(dense[0])), "fused"
        else:
            fused = lex or den
            candidates = len(lexical[0]) if lexical is not None else len(dense[0]) if dense is not None else 0
            label = "lexical" if lexical is not None else "dense"
        lowered: dict[int, float] = {}
        if self.tuning.session_spread and len(fused) > 1 and (not self.tuning.spread_many or many):
            fused, lowered = spread(fused, partition.sittings([n for n, _ in fused]), 1 - self.tuning.session_spread, k)
        return build_hits(partition.docs, fused[:k], lex_rank, den_rank, signals, raw, candidates, label, lowered)

    def _rewritten(self, query: str) -> str:
        """The query with the rewriter's search strings appended (outside the lock: it may call an LLM)."""
        assert self.rewriter is not None
        try:
            extra = ranking.checked_queries(self.rewriter.rewrite(query))  # a model's output, checked like user input
        except Exception as exc:  # a user-supplied rewriter: any failure falls back to the query alone
            self._warn(f"query rewriting failed, searched with the query alone: {type(exc).__name__}: {exc}")
            return query
        return "\n".join([query, *extra])

    def _retry_pending(self) -> None:
        try:
            self.flush()
        except LLMError as exc:
            self._warn(f"embedding retry failed; {self.pending()} message(s) still without a vector: {exc}")

    def _warn(self, text: str) -> None:
        self.warnings[:] = [*self.warnings[-19:], text]
