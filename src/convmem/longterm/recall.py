"""Recall over the archive: lexical (BM25), dense (embeddings) and hybrid (reciprocal-rank fusion).

:class:`RecallIndex` indexes archived messages per user, so one user's
documents never share a ranking, a statistic or a result with another's
(invariant 6). It is an eviction sink: ``Memory(sinks=[recall])`` hands it
every evicted unit, and it indexes them right away.

* **Lexical** is an in-process BM25 index (:mod:`convmem.longterm.lexical`),
  updated on every archive and never rebuilt.
* **Dense** embeds each archived message's *key* once, in batches, at archive
  time (or, with ``defer=True``, at the next search or :meth:`~RecallIndex.flush`),
  never on the ``add`` path of a message that stays in the window. Vectors are
  float32 and searched exactly with numpy. If the embedder fails or returns a
  wrong shape, ``absorb`` raises :class:`~convmem.errors.LLMError` *after* the
  messages are indexed lexically; their vectors stay missing and are retried
  at the next archive, search or flush.
* **Hybrid** fuses both, by default with z-scored score fusion at equal
  weights; ``fusion="rrf"`` selects reciprocal-rank fusion (``k=10``, half
  weight for dense). On LoCoMo dev with all-MiniLM-L6-v2, z-score fusion beat
  the best RRF setting at every k (R@1 36.1 vs 31.8, R@10 76.7 vs 75.5), and
  textbook RRF (``k=60``, equal weights) fell below BM25 alone, because the
  small embedder is much weaker than BM25 there and RRF discards how sure
  each retriever is. See :mod:`convmem.longterm.fusion`.

Keys can be enriched (:class:`Keys`): the speaker, the date a message was
said, facts extracted from it (LongMemEval found fact-augmented keys raise
recall), and the message before it in the session. That last one is on by
default: a reply ("Yes, last Sunday!") is often the evidence for a question
whose words are in the turn before it; indexing the previous turn's words
lexically, at half the weight of the message's own, raised LoCoMo R@10 from
64 to 73 (``bench/locomo_recall.py``). Dense keys stay the message alone.

Filters: session(s), a time range, roles, and the current window (so a
recall block never repeats what is already in context).

Example::

    recall = RecallIndex(embedder=SentenceTransformerEmbedder())
    memory = Memory(model="gpt-4o", user_id="alice", sinks=[recall])
    ...
    for hit in recall.search("where did I park?", user_id="alice", k=5):
        print(hit.score, hit.doc.text)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ..errors import ConfigurationError, LLMError
from ..messages import Message, StoredMessage
from ._np import np
from ._partition import Partition, RecallDoc, RecallHit, Where, top
from ._storesearch import StoreSearch
from .embedders import Embedder, embed_checked
from .fusion import rrf, zscore
from .lexical import tokenize
from .recallstore import LexicalRecallStore, RecallStore, SearchingRecallStore

__all__ = ["Keys", "Mode", "RecallDoc", "RecallHit", "RecallIndex", "Where"]

Mode: TypeAlias = Literal["lexical", "dense", "hybrid"]
Fusion: TypeAlias = Literal["rrf", "zscore"]
RECALL_ROLES = frozenset({"user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class Keys:
    """How a message's indexed key is built from its text.

    Attributes:
        speaker: prefix the speaker (the message's ``name``, else its role).
        date: append the day it was said, e.g. ``(8 May 2023)``.
        facts: a :class:`~convmem.longterm.factbook.Facts` whose facts sourced
            from the message are appended (give it as a sink *before* the index).
        context: index the previous message of the session lexically with the key,
            at half the weight.
    """

    speaker: bool = False
    date: bool = False
    facts: Any = None
    context: bool = True

    def build(self, message: Message, user_id: str | None, session_id: str | None = None) -> str:
        """The key of ``message``; facts sourced from it must come from its session (ids repeat across sessions)."""
        text = message.text
        if self.speaker:
            text = f"{message.name or message.role}: {text}"
        if self.date and message.created_at is not None:
            text = f"{text} ({message.created_at.day} {message.created_at:%B %Y})"
        if self.facts is not None and message.id is not None:
            sourced = [
                f.text
                for f in self.facts.history(user_id=user_id)
                if message.id in f.source_message_ids and (session_id is None or f.session_id in (None, session_id))
            ]
            if sourced:
                text = f"{text}\n" + "\n".join(sourced)
        return text


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
            nothing of a user is loaded, and both retrievers run in the server (:mod:`._storesearch`).
        lexical: ``"store"`` searches with the store's own index (SQLite FTS5, PostgreSQL, RediSearch),
            ``"memory"`` in process (dense too); ``"auto"`` picks the store's when it has one.
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
                added += self._partition(doc.user_id).add(doc, self._tokens(doc)) is not None
            if added and self.embedder is not None and not self.defer:
                self.flush()
            return added

    def _tokens(self, doc: RecallDoc) -> list[str]:
        if self._store_lexical:
            return []  # the store keeps the lexical index
        tokens = tokenize(doc.key)
        if doc.context:
            tokens = tokens * 2 + tokenize(doc.context)  # the message's own words weigh double
        return tokens

    def _partition(self, user_id: str | None) -> Partition:
        """The user's partition, loaded from the store on first use."""
        partition = self._partitions.get(user_id)
        if partition is not None:
            return partition
        partition = self._partitions[user_id] = Partition()
        if self.store is not None:
            for doc in self.store.load_docs(user_id):
                partition.add(doc, self._tokens(doc))
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
        """
        mode = mode or self.mode
        if mode != "lexical" and self.embedder is None:
            raise ConfigurationError(f"recall mode {mode!r} needs an embedder")
        if k <= 0:
            return []
        sessions = [session_id] if isinstance(session_id, str) else session_id
        where = Where(
            sessions,
            since,
            until,
            roles,
            exclude_window[0] if exclude_window else None,
            exclude_window[1] if exclude_window else None,
        )
        with self._lock:
            if self._remote is not None:
                return self._remote.search(query, user_id, k, mode, where)
            partition = self._partition(user_id)
            if not len(partition):
                return []
            if mode != "lexical":
                self._retry_pending()
            keep = partition.mask(where)
            lexical = self._lexical(partition, query, user_id, keep, k) if mode != "dense" else None
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
                    dense = partition.dense_scores(vector, keep)
            admitted = len(partition) if keep is None else int(np.count_nonzero(keep))
            return self._fuse(partition, lexical, dense, admitted, k)

    def _lexical(self, partition: Partition, query: str, user_id: str | None, keep: Any, k: int) -> tuple[Any, Any]:
        if not self._store_lexical:
            return partition.lexical_scores(tokenize(query), keep)
        assert isinstance(self.store, LexicalRecallStore)
        # Filters apply after the store's search; ask for more when they may discard many.
        limit = max(k * 4, 50) if keep is None else max(k * 4, 50, len(partition) // 4)
        pairs = [
            (partition.numbers.get(r), s) for r, s in self.store.lexical_search(query, user_id=user_id, limit=limit)
        ]
        known = [(n, s) for n, s in pairs if n is not None and (keep is None or keep[n])]
        return np.asarray([n for n, _ in known], dtype=np.int64), np.asarray([s for _, s in known], dtype=np.float32)

    def _fuse(
        self,
        partition: Partition,
        lexical: tuple[Any, Any] | None,
        dense: tuple[Any, Any] | None,
        admitted: int,
        k: int,
    ) -> list[RecallHit]:
        depth = max(k * 4, 50)  # fusion needs candidates beyond k from each side
        lex = top(*lexical, depth) if lexical is not None else []
        den = top(*dense, depth) if dense is not None else []
        lex_rank = {n: r for r, (n, _) in enumerate(lex, start=1)}
        den_rank = {n: r for r, (n, _) in enumerate(den, start=1)}
        if lexical is not None and dense is not None:
            if self.fusion == "rrf":
                fused = rrf([[n for n, _ in lex], [n for n, _ in den]], k=self.rrf_k, weights=self.weights)[:k]
            else:
                parts = [(*lexical, admitted), (*dense, len(dense[0]))]
                fused = top(*zscore(parts, self.weights), k)
        else:
            fused = (lex or den)[:k]
        return [RecallHit(partition.docs[n], s, lex_rank.get(n), den_rank.get(n)) for n, s in fused]

    def _retry_pending(self) -> None:
        try:
            self.flush()
        except LLMError as exc:
            self._warn(f"embedding retry failed; {self.pending()} message(s) still without a vector: {exc}")

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        del self.warnings[:-20]
