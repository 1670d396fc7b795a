"""How recall scores a query: the lexical signal, its expansions and boosts, each kept for explanation.

In: a :class:`~convmem.longterm.recall._partition.Partition` (one user's documents), the query text and a
:class:`Tuning`. Out: :class:`LexicalSignals`, one score vector per step over all the user's
documents, so every hit can say what each step gave it:

1. **BM25** of the query's words against each document's key (its own words, and the previous
   message's at ``context_weight``, lowered by ``context_decay`` where the previous message is the longer).
2. **Pseudo-relevance feedback** (``prf_docs`` > 0): the words that weigh most in the best
   documents are added to the query at ``prf_weight``.
3. **Neighbours** (``neighbour`` > 0): a document gains that share of the better of its session
   neighbours' scores (with ``neighbour_fill``, only of what the neighbour scores on the words the
   document lacks); evidence often spans a question and its answer (:mod:`.steps`).
4. **Dates**: a document said on, or mentioning, a day the query names ("in October 2023", "on
   13 May", "in June") is multiplied by ``1 + date_boost``; for a query asking *when*, a document
   with any date expression by ``1 + when_boost``.
5. **Roles** (``role_boost``): a question in the first person prefers the user's turns, one about
   what "you said" the assistant's (:func:`~.steps.asked_role`); such a question passes its neighbours'
   share at ``neighbour_asked`` times the usual.
6. **Order** (``recency``): a question about the current state prefers newer documents, one about
   what came before older ones (:func:`~.temporal.asks_order`).

After ranking, :func:`~.steps.spread` (``session_spread``) lets the top k reach more sessions (with
``spread_many``, for the questions that count, total or compare only).

The defaults were chosen by cross-validation over two dev sets of different shapes, LoCoMo and the
LongMemEval-S dev slice (``bench/recall_protocol.py``; figures in ``bench/README.md``): fold i of both held
out together, the constants tuned on the rest of both. The role step gains on both (LongMemEval +6.7 points of
mean R@5/10/25 held out; on LoCoMo it never fires), dates and "when" gain on both. The previous turn's words,
their decay and session neighbours gain on one set and cost the other; the joint tuning settles them (on,
with neighbours passed to no question that names a role). Feedback gains on both (+1.3 / +0.7) but is off by
default: it doubles the cost of a search. Recency, the spread over sessions and filling neighbours were
never chosen. In hybrid mode the neighbour and date steps also apply to the dense similarities
(``dense_steps``; chosen on LoCoMo alone, ``bench/locomo_recall.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ...errors import ConfigurationError, InvalidMessageError, LLMError
from ...limits import check_text
from ._np import np
from ._partition import Partition
from .hits import RecallHit
from .lexical import BM25Index, tokenize
from .model import RecallDoc
from .steps import asked_role, neighbour_share, order_multiplier
from .temporal import asks_order, asks_when, query_ranges

__all__ = [
    "DEFAULT_TUNING",
    "LexicalSignals",
    "QueryRewriter",
    "Tuning",
    "build_hits",
    "dense_steps",
    "lexical_signals",
]

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True)
class Tuning:
    """Recall's constants. See the module docstring for what each step does.

    Attributes:
        k1: BM25 term-frequency saturation.
        b: BM25 length normalization.
        context_weight: weight of the previous message's words in a key (0: the message alone).
        prf_docs: pseudo-relevance feedback from this many top documents (0: off).
        prf_terms: words added by feedback.
        prf_weight: their weight, relative to a query word.
        neighbour: share of the better session neighbour's score a document gains (0: off).
        date_boost: multiplier (minus 1) for documents of a day the query names.
        when_boost: multiplier (minus 1) for documents with a date expression, for "when" queries.
        dense_steps: in hybrid mode, apply the neighbour share and the date multipliers to the
            dense similarities too (0: off, 1: as strong as on the lexical score).
        context_decay: where the previous message is the longer, its words weigh
            ``context_weight * (own / previous length) ** context_decay`` (0: no decay).
        neighbour_fill: a neighbour passes on only what it scores on the query words the document lacks.
        role_boost: multiplier (minus 1) for the turns of the role a question asks about.
        neighbour_asked: the neighbour share is multiplied by this for a question that names whose turns it
            asks about (with ``role_boost`` on): those turns answer it, and a neighbour of the other role is
            commentary on them (1: unchanged, 0: no neighbours for such questions).
        recency: a question about the newest (oldest) state multiplies a document by up to ``1 + recency``,
            by where its time falls between the user's oldest and newest documents.
        session_spread: in [0, 1): each hit already taken from a candidate's session and day multiplies the
            candidate's score by ``1 - session_spread`` (0: off).
        spread_many: spread only the questions that count, total or compare (:func:`~.steps.asks_many`).
    """

    k1: float = 0.6
    b: float = 0.75
    context_weight: float = 0.5
    prf_docs: int = 0
    prf_terms: int = 10
    prf_weight: float = 0.2
    neighbour: float = 0.3
    date_boost: float = 2.0
    when_boost: float = 0.5
    dense_steps: float = 1.0
    context_decay: float = 2.0
    neighbour_fill: bool = False
    role_boost: float = 2.0
    neighbour_asked: float = 0.0
    recency: float = 0.0
    session_spread: float = 0.0
    spread_many: bool = False

    def __post_init__(self) -> None:
        for name in (
            "context_weight",
            "prf_weight",
            "neighbour",
            "date_boost",
            "when_boost",
            "dense_steps",
            "context_decay",
            "role_boost",
            "neighbour_asked",
            "recency",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"Tuning.{name} must be a number >= 0, got {value!r}")
        if self.prf_docs < 0 or self.prf_terms < 0:
            raise ConfigurationError("Tuning.prf_docs and prf_terms must be >= 0")
        if not isinstance(self.session_spread, (int, float)) or not 0.0 <= self.session_spread < 1.0:
            raise ConfigurationError(f"Tuning.session_spread must be in [0, 1), got {self.session_spread!r}")
        BM25Index(k1=self.k1, b=self.b)  # validates k1 and b


DEFAULT_TUNING = Tuning()


@runtime_checkable
class QueryRewriter(Protocol):
    """Turns a question into extra search strings (an LLM, a thesaurus...); see ``convmem.llm.rewriter``."""

    def rewrite(self, query: str) -> Sequence[str]:
        """Search strings whose words are added to the lexical query; raise LLMError on failure."""
        ...


#: What a rewriter's answer may add to a query: at most this many strings of at most this many characters.
MAX_REWRITES = 16
MAX_REWRITE_CHARS = 200


def checked_queries(answer: object) -> tuple[str, ...]:
    """A rewriter's search strings, checked like user input before a search (or a store's server) sees them.

    Each is stripped and cut to :data:`MAX_REWRITE_CHARS`, blanks and repeats dropped, at most
    :data:`MAX_REWRITES` kept (a model that runs away only lengthens the query so far).

    Raises:
        LLMError: the answer is not a list of strings, holds text UTF-8 cannot hold (a lone surrogate), or no
            string is left; the index then searches with the question alone.
    """
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise LLMError(f"query rewriter returned {type(answer).__name__}, not a list of search strings")
    kept: dict[str, None] = {}
    for item in answer:
        if not isinstance(item, str):
            raise LLMError(f"query rewriter returned a {type(item).__name__} among its search strings")
        try:
            check_text(item, "rewritten query")
        except InvalidMessageError as exc:
            raise LLMError(f"query rewriter returned text that cannot be searched: {exc}") from None
        text = item.strip()[:MAX_REWRITE_CHARS]
        if text:
            kept[text] = None
    if not kept:
        raise LLMError("query rewriter returned no search strings")
    return tuple(kept)[:MAX_REWRITES]


@dataclass(slots=True)
class LexicalSignals:
    """Per-document score vectors of one query (length: the partition's size).

    ``bm25`` is the query's own BM25, ``prf`` what feedback words added,
    ``neighbour`` what a neighbour passed on, ``boost`` the date multiplier (1 where none
    applied) and ``score`` the final lexical score, 0 for documents the filters exclude.
    """

    bm25: Array
    prf: Array
    neighbour: Array
    boost: Array
    score: Array
    terms: tuple[str, ...] = ()
    expansion: tuple[str, ...] = ()
    dates: int = 0
    role: Array | None = None
    asked: str | None = None
    order: Array | None = None

    @property
    def multiplier(self) -> Array:
        """What the date, role and order steps multiplied each document by (1 where none applied)."""
        out = self.boost if self.role is None else self.boost * self.role
        return out if self.order is None else out * self.order


def lexical_signals(
    partition: Partition,
    query: str,
    tuning: Tuning,
    keep: Array | None,
    *,
    store_scores: tuple[Array, Array] | None = None,
    now: datetime | None = None,
) -> LexicalSignals:
    """Score every document of ``partition`` for ``query``.

    Args:
        store_scores: (numbers, scores) from a store's own lexical index (FTS5) instead of the
            in-process BM25; feedback needs the in-process index and is skipped.
        now: resolves relative dates in the query ("last week").
    """
    n = len(partition)
    index = partition.lexical
    terms: list[str] = []
    per_term = None
    if store_scores is None:
        terms = tokenize(query)
        per_term = index.term_scores(terms)
        bm25 = np.zeros(n, np.float32) if per_term is None else per_term.sum(axis=0, dtype=np.float32)
    else:
        bm25 = np.zeros(n, np.float32)
        bm25[store_scores[0]] = store_scores[1]
    if keep is not None:
        bm25 = np.where(keep, bm25, 0.0).astype(np.float32)
    prf = np.zeros(n, np.float32)
    expansion: tuple[str, ...] = ()
    if tuning.prf_docs and store_scores is None and bm25.any():
        expansion, prf = _feedback(partition, terms, bm25, tuning, keep)
    base = bm25 + prf
    asked = asked_role(query) if tuning.role_boost else None
    share = tuning.neighbour * (tuning.neighbour_asked if asked is not None else 1.0)
    neighbour = np.zeros(n, np.float32)
    if share and n > 1:
        neighbour = neighbour_share(partition, base, per_term, share, keep, fill=tuning.neighbour_fill)
    boost = np.ones(n, np.float32)
    ranges = query_ranges(query, now=now, years=partition.years) if tuning.date_boost else []
    if ranges:
        boost[partition.said_in(ranges)] *= 1.0 + tuning.date_boost
    if tuning.when_boost and asks_when(query):
        boost[partition.mentions_a_date()] *= 1.0 + tuning.when_boost
    role = np.ones(n, np.float32)
    if asked is not None:
        role[partition.role_mask(asked)] = 1.0 + tuning.role_boost
    order = asks_order(query) if tuning.recency else None
    recent = order_multiplier(partition, order, tuning.recency) if order is not None else None
    score = (base + neighbour) * boost * role
    if recent is not None:
        score = score * recent
    return LexicalSignals(
        bm25, prf, neighbour, boost, score, tuple(dict.fromkeys(terms)), expansion, len(ranges), role, asked, recent
    )


def dense_steps(
    partition: Partition, dense: tuple[Array, Array], signals: LexicalSignals | None, tuning: Tuning
) -> tuple[Array, Array]:
    """The dense similarities after the lexical steps (hybrid mode, ``tuning.dense_steps`` > 0).

    A document gains ``neighbour`` of its better session neighbour's similarity and is multiplied by
    the date multipliers of ``signals`` (weighted by ``dense_steps``). Negative cosines count as 0.
    """
    numbers, sims = dense
    if not tuning.dense_steps or signals is None or not len(numbers):
        return dense
    n = len(partition)
    full = np.zeros(n + 1, np.float32)  # index -1 (no neighbour) reads the 0 at the end
    full[numbers] = np.maximum(sims, 0.0)
    stepped: Array = full[numbers]
    if tuning.neighbour and n > 1:
        previous, following = partition.neighbours()
        stepped = stepped + tuning.neighbour * tuning.dense_steps * np.maximum(
            full[previous[numbers]], full[following[numbers]]
        )
    stepped = stepped * (1.0 + tuning.dense_steps * (signals.multiplier[numbers] - 1.0))
    return numbers, stepped.astype(np.float32)


def _feedback(
    partition: Partition, terms: Sequence[str], bm25: Array, tuning: Tuning, keep: Array | None
) -> tuple[tuple[str, ...], Array]:
    """RM3-style expansion: the words weighing most (tf x idf) in the top documents."""
    index = partition.lexical
    hits = np.flatnonzero(bm25)
    best = hits[np.argsort(-bm25[hits], kind="stable")[: tuning.prf_docs]]
    weights: dict[str, float] = {}
    asked = set(terms)
    for number in best.tolist():
        words = tokenize(partition.docs[number].key)
        if not words:
            continue
        share = float(bm25[number]) / len(words)
        for word, tf in Counter(words).items():
            if word not in asked and index.document_frequency(word) > 1:
                weights[word] = weights.get(word, 0.0) + share * tf * index.idf(word)
    chosen = sorted(weights.items(), key=lambda pair: (-pair[1], pair[0]))[: tuning.prf_terms]
    if not chosen:
        return (), np.zeros(len(partition), np.float32)
    top_weight = chosen[0][1]
    scaled = {word: tuning.prf_weight * weight / top_weight for word, weight in chosen}
    vector = index.score_vector(list(scaled), scaled)
    if vector is None:
        return (), np.zeros(len(partition), np.float32)
    if keep is not None:
        vector = np.where(keep, vector, 0.0).astype(np.float32)
    return tuple(scaled), vector


def build_hits(
    docs: Sequence[RecallDoc],
    ranked: Sequence[tuple[int, float]],
    lexical_ranks: Mapping[int, int],
    dense_ranks: Mapping[int, int],
    signals: LexicalSignals | None,
    dense: tuple[Any, Any] | None,
    candidates: int,
    mode: str,
    spread_by: Mapping[int, float] | None = None,
) -> list[RecallHit]:
    """Hits for ``ranked`` (number, score) pairs, best first, each with its signals and reason.

    ``spread_by``: the multiplier the session spread applied to a hit's score, where it lowered it.
    """
    spread_by = spread_by or {}
    similarity = _lookup(dense)
    fused = signals is not None and dense is not None
    hits = []
    for rank, (number, score) in enumerate(ranked, start=1):
        boosts: list[tuple[str, float]] = []
        if signals is not None:
            for name, vector in (("feedback", signals.prf), ("neighbour", signals.neighbour)):
                if vector[number]:
                    boosts.append((name, float(vector[number])))
            if signals.boost[number] != 1.0:
                boosts.append(("date", float(signals.boost[number])))
            if signals.role is not None and signals.role[number] != 1.0:
                boosts.append(("role", float(signals.role[number])))
            if signals.order is not None and signals.order[number] != 1.0:
                boosts.append(("order", float(signals.order[number])))
        if number in spread_by:
            boosts.append(("session", spread_by[number]))
        hits.append(
            RecallHit(
                docs[number],
                score,
                lexical_ranks.get(number),
                dense_ranks.get(number),
                float(signals.bm25[number]) if signals is not None else None,
                float(signals.score[number]) if signals is not None else None,
                similarity(number),
                score if fused else None,
                tuple(boosts),
                rank,
                candidates,
                mode,
            )
        )
    return hits


def _lookup(dense: tuple[Any, Any] | None) -> Any:
    """number -> cosine similarity (None if the number was not scored densely)."""
    if dense is None:
        return lambda number: None
    numbers, sims = dense
    order = np.argsort(numbers, kind="stable")
    ordered = numbers[order]

    def find(number: int) -> float | None:
        at = int(np.searchsorted(ordered, number))
        return float(sims[order[at]]) if at < len(ordered) and ordered[at] == number else None

    return find
