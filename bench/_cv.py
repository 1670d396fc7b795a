"""Cross-validation of recall settings on the dev sets (LoCoMo, the LongMemEval-S dev slice).

``Evaluator(dataset).rows(config)`` scores every question of one dev set (``bench/_datasets.py``) under
one setting, grouped by fold (cached: a setting is scored once, whichever fold asks); ``plain_rows()``
scores the issue's plain BM25 baseline (``bench/_bm25.py``) the same way. ``ascend(score, space, start)``
tunes a setting by coordinate ascent over ``space`` (one pass, each value tried in turn, a change kept only
if it strictly improves ``score``). ``cross_validate`` holds out each fold of one set in turn, tuned on
the others; ``cross_validate_jointly`` holds out fold i of both sets together, tuned on all the other
folds of both (each set weighing the same); ``dev`` is the same procedure tuned and scored on everything
(the figure tuning on the test data gives, for the gap, and the setting the code ships).

The objective is the mean of R@5, R@10 and R@25 over the tuning folds' questions.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _bm25 import PlainBM25
from _datasets import Dataset, LoCoMo, Question
from convmem.longterm.recall import _partition as _partition_module
from convmem.longterm.recall import index as _index_module
from convmem.longterm.recall.index import RecallIndex
from convmem.longterm.recall.model import RecallDoc
from convmem.longterm.recall.ranking import Tuning
from convmem.stores.sqlite.longterm import SQLiteRecallStore

KS = (1, 5, 10, 25)
INDEX_FIELDS = ("k1", "b", "context_weight", "context_decay")


@dataclass(frozen=True)
class Config:
    """One recall setting: the mode, the ranking tuning, and hybrid fusion."""

    mode: str = "lexical"  # lexical | fts5 | dense | hybrid
    tuning: Tuning = field(default_factory=Tuning)
    dense_weight: float = 1.0
    rerank: int | None = None

    def with_(self, name: str, value: Any) -> Config:
        if name in ("dense_weight", "rerank", "mode"):
            return replace(self, **{name: value})
        if name == "prf":
            docs, terms, weight = value
            return replace(self, tuning=replace(self.tuning, prf_docs=docs, prf_terms=terms, prf_weight=weight))
        return replace(self, tuning=replace(self.tuning, **{name: value}))

    def get(self, name: str) -> Any:
        if name in ("dense_weight", "rerank", "mode"):
            return getattr(self, name)
        if name == "prf":
            t = self.tuning
            return (t.prf_docs, t.prf_terms, t.prf_weight) if t.prf_docs else (0, 0, 0.0)
        return getattr(self.tuning, name)


SESSION_KS = (5, 10)


def _memoized(function: Callable[..., Any]) -> Callable[..., Any]:
    memo: dict[Any, Any] = {}

    def call(*args: Any) -> Any:
        found = memo.get(args)
        if found is None:
            found = memo[args] = function(*args)
        return list(found)

    return call


# Indexes with other constants re-index the same documents: tokens and date mentions are pure functions of
# a text (and the time it was said), so one process computes each once.
_index_module.tokenize = _memoized(_index_module.tokenize)  # type: ignore[attr-defined]
_partition_module.mentions = _memoized(_partition_module.mentions)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Row:
    recall: tuple[float, ...]  # R@k for k in KS
    category: str
    dated: bool  # the question names a month or a year
    sessions: tuple[float, ...] = ()  # any@k, all@k for k in SESSION_KS: the evidence sessions among the top k


def row(question: Question, ranked: Sequence[str], session_of: Callable[[str], str]) -> Row:
    """A question's figures from its ranked turns."""
    gold = question.gold
    recall_at = tuple(len(gold & set(ranked[:k])) / len(gold) for k in KS)
    order = list(dict.fromkeys(session_of(t) for t in ranked))
    sessions: list[float] = []
    for k in SESSION_KS:
        found = question.sessions & set(order[:k])
        sessions += [float(bool(found)), float(found == question.sessions)]
    return Row(recall_at, question.category, question.dated, tuple(sessions))


class Evaluator:
    """Scores settings on one dev set's questions; indexes and results are cached.

    The set is archived once through real ``Memory`` objects; an index with other index-time constants
    (``INDEX_FIELDS``) is built from the documents that archive produced. ``rows`` groups the questions'
    rows by fold. A LoCoMo list is taken as the LoCoMo dataset.
    """

    def __init__(self, data: Dataset | Sequence[dict[str, Any]], embedder: Any = None) -> None:
        self.dataset = data if isinstance(data, Dataset) else LoCoMo(data)
        self.folds = list(self.dataset.folds)
        self.embedder = embedder
        self._indexes: dict[tuple[Any, ...], RecallIndex] = {}
        self._docs: list[RecallDoc] = []
        self._names: dict[str, str] = {}
        self._rows: dict[Config, dict[str, list[Row]]] = {}
        self._plain: dict[str, list[Row]] | None = None
        self._tmp = tempfile.TemporaryDirectory()
        self.evaluated = 0
        self.progress = True

    @property
    def data(self) -> dict[str, list[str]]:
        """The folds (for LoCoMo: one conversation each), for callers that iterate over them."""
        return self.dataset.folds

    def close(self) -> None:
        for recall in self._indexes.values():
            if recall.store is not None:
                recall.store.close()  # type: ignore[attr-defined]
        self._tmp.cleanup()

    def docs(self) -> list[RecallDoc]:
        """Every archived document, in the order the memories archived them."""
        if not self._docs:
            recall = RecallIndex(tuning=replace(Tuning(), context_weight=0.5))
            self._names = self.dataset.archive(recall)
            self._docs = [d for p in recall._partitions.values() for d in p.docs]
        return self._docs

    def name(self, message_id: str) -> str:
        return self._names[message_id]

    def _index(self, config: Config) -> RecallIndex:
        fts = config.mode == "fts5"
        # FTS5 keeps its own index (its BM25 constants and column weights are the store's).
        key = (fts, *((getattr(config.tuning, f) for f in INDEX_FIELDS) if not fts else ()))
        if key not in self._indexes:
            docs = self.docs()
            store = SQLiteRecallStore(Path(self._tmp.name) / f"recall{len(self._indexes)}.db") if fts else None
            embedder = None if fts else self.embedder
            recall = RecallIndex(embedder=embedder, tuning=config.tuning, store=store, batch_size=128)
            recall.add(docs)
            self._indexes[key] = recall
        return self._indexes[key]

    def rows(self, config: Config) -> dict[str, list[Row]]:
        cached = self._rows.get(config)
        if cached is not None:
            return cached
        recall = self._index(config)
        recall.tuning = config.tuning
        recall.weights = (1.0, config.dense_weight)
        recall.rerank = config.rerank
        mode = "lexical" if config.mode == "fts5" else config.mode
        fold_of = self.dataset.fold_of()
        out: dict[str, list[Row]] = {f: [] for f in self.folds}
        for question in self.dataset.questions:
            hits = recall.search(
                question.text,
                user_id=question.unit,
                k=max(KS),
                mode=mode,  # type: ignore[arg-type]
                now=question.now,
            )
            ranked = [self._names[h.doc.message_id] for h in hits]
            out[fold_of[question.unit]].append(row(question, ranked, self.dataset.session_of))
        self._rows[config] = out
        self.evaluated += 1
        if self.progress:
            print(f"  {self.dataset.name}: scored {self.evaluated}: {config}", file=sys.stderr, flush=True)
        return out

    def plain_rows(self) -> dict[str, list[Row]]:
        """The rows of plain BM25 (``bench/_bm25.py``: the issue's baseline), grouped by fold like ``rows``."""
        if self._plain is None:
            plain = PlainBM25(self.docs())
            fold_of = self.dataset.fold_of()
            self._plain = {f: [] for f in self.folds}
            for question in self.dataset.questions:
                ranked = [self._names[d.message_id] for d in plain.rank(question.text, question.unit, max(KS))]
                self._plain[fold_of[question.unit]].append(row(question, ranked, self.dataset.session_of))
        return self._plain


def objective(rows: Mapping[str, list[Row]], convs: Sequence[str]) -> float:
    pooled = [r for c in convs for r in rows[c]]
    return statistics.fmean(statistics.fmean(r.recall[1:]) for r in pooled)


Score = Callable[[Config], float]


def on_folds(evaluator: Evaluator, folds: Sequence[str]) -> Score:
    """The objective of a setting on some folds of one dev set."""
    return lambda config: objective(evaluator.rows(config), folds)


def on_both(parts: Sequence[tuple[Evaluator, Sequence[str]]], weights: Sequence[float] | None = None) -> Score:
    """The mean over dev sets of the objective on each one's folds: each set weighs the same, whatever its size
    (or as ``weights`` say, one per set summing to 1: the trade-off between two sets that disagree)."""
    if weights is None:
        return lambda config: statistics.fmean(objective(e.rows(config), folds) for e, folds in parts)
    return lambda config: sum(w * objective(e.rows(config), f) for w, (e, f) in zip(weights, parts, strict=True))


def ascend(score: Score, space: Mapping[str, Sequence[Any]], start: Config, passes: int = 1) -> Config:
    """Coordinate ascent over ``space`` from ``start``: each value tried in turn, kept if it strictly improves."""
    if not space:  # nothing to tune (dense alone): no score needed, and a single fold has no others to score on
        return start
    config = start
    best = score(config)
    for _ in range(passes):
        moved = False
        for name, values in space.items():
            for value in values:
                if value == config.get(name):
                    continue
                candidate = config.with_(name, value)
                value_score = score(candidate)
                if value_score > best + 1e-9:
                    config, best, moved = candidate, value_score, True
        if not moved:
            break
    return config


def figures(rows: Sequence[Row], pick: Callable[[Row], bool] = lambda r: True) -> tuple[float, ...] | None:
    """Mean R@k (in %) of the rows ``pick`` admits, or None if none does."""
    chosen = [r.recall for r in rows if pick(r)]
    if not chosen:
        return None
    return tuple(100 * statistics.fmean(col) for col in zip(*chosen, strict=True))


@dataclass
class CVResult:
    folds: dict[str, Config]  # held-out conversation -> the setting tuned without it
    held_out: dict[str, list[Row]]  # held-out conversation -> its rows under that setting
    dev_config: Config
    dev_rows: dict[str, list[Row]]

    def per_fold(self, pick: Callable[[Row], bool] = lambda r: True) -> dict[str, tuple[float, ...]]:
        return {c: f for c, rows in self.held_out.items() if (f := figures(rows, pick)) is not None}

    def mean(self, pick: Callable[[Row], bool] = lambda r: True) -> tuple[float, ...]:
        folds = list(self.per_fold(pick).values())
        return tuple(statistics.fmean(col) for col in zip(*folds, strict=True))

    def worst(self, pick: Callable[[Row], bool] = lambda r: True) -> tuple[float, ...]:
        folds = list(self.per_fold(pick).values())
        return tuple(min(col) for col in zip(*folds, strict=True))

    def pooled(self, pick: Callable[[Row], bool] = lambda r: True) -> tuple[float, ...] | None:
        return figures([r for rows in self.held_out.values() for r in rows], pick)

    def dev_mean(self, pick: Callable[[Row], bool] = lambda r: True) -> tuple[float, ...]:
        per = [f for rows in self.dev_rows.values() if (f := figures(rows, pick)) is not None]
        return tuple(statistics.fmean(col) for col in zip(*per, strict=True))


def cross_validate(
    evaluator: Evaluator, space: Mapping[str, Sequence[Any]], start: Config, passes: int = 1
) -> CVResult:
    """Each fold tuned on the others of the same dev set; ``dev`` tuned on all of it."""
    convs = list(evaluator.folds)
    folds, held = {}, {}
    for test in convs:
        train = [c for c in convs if c != test]
        chosen = ascend(on_folds(evaluator, train), space, start, passes)
        folds[test] = chosen
        held[test] = evaluator.rows(chosen)[test]
    dev_config = ascend(on_folds(evaluator, convs), space, start, passes)
    return CVResult(folds, held, dev_config, evaluator.rows(dev_config))


def cross_validate_jointly(
    evaluators: Sequence[Evaluator],
    space: Mapping[str, Sequence[Any]],
    start: Config,
    passes: int = 1,
    weights: Sequence[float] | None = None,
) -> list[CVResult]:
    """Both dev sets at once: fold i of every set is held out together, the setting tuned on all the others.

    The sets' folds are paired by position (LoCoMo's conversation i with LongMemEval's fold i), so each
    held-out figure comes from a setting that saw neither that conversation nor those questions. The
    objective weighs each set the same (:func:`on_both`), or by ``weights``. ``dev`` is tuned on every fold
    of every set: what the code ships. Returns one result per set, in the order given.
    """
    count = min(len(e.folds) for e in evaluators)
    chosen: list[Config] = []
    for i in range(count):
        parts = [(e, [f for j, f in enumerate(e.folds) if j != i]) for e in evaluators]
        chosen.append(ascend(on_both(parts, weights), space, start, passes))
    dev_config = ascend(on_both([(e, list(e.folds)) for e in evaluators], weights), space, start, passes)
    out = []
    for e in evaluators:
        folds = {e.folds[i]: chosen[i] for i in range(count)}
        held = {f: e.rows(c)[f] for f, c in folds.items()}
        out.append(CVResult(folds, held, dev_config, e.rows(dev_config)))
    return out
