"""Leave-one-conversation-out cross-validation of recall settings on the LoCoMo dev set.

``Evaluator.rows(config)`` scores every question of every conversation under one setting (cached:
a setting is scored once, whichever fold asks). ``select(evaluator, convs, space, start)`` tunes a
setting on some conversations only, by coordinate ascent over ``space`` (one pass, each value
tried in turn, a change kept only if it strictly improves the objective). ``cross_validate`` runs
``select`` on four conversations and scores the fifth, for each of the five; ``dev`` runs it on all
five and scores them too (the figure tuning on the test data gives, for the gap).

The objective is the mean of R@5, R@10 and R@25 over the tuning conversations' questions.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _locomo import CATEGORIES, archive, evidence_ids, names_month_or_year
from convmem.longterm.recall.index import RecallIndex
from convmem.longterm.recall.ranking import Tuning
from convmem.stores.sqlite.longterm import SQLiteRecallStore

KS = (1, 5, 10, 25)
INDEX_FIELDS = ("k1", "b", "context_weight")


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


@dataclass(frozen=True)
class Row:
    recall: tuple[float, ...]  # R@k for k in KS
    category: str
    dated: bool  # the question names a month or a year


class Evaluator:
    """Scores settings on the dev conversations; indexes and results are cached."""

    def __init__(self, data: Sequence[dict[str, Any]], embedder: Any = None) -> None:
        self.data = {s["sample_id"]: s for s in data}
        self.embedder = embedder
        self._indexes: dict[tuple[Any, ...], tuple[RecallIndex, dict[str, str]]] = {}
        self._rows: dict[Config, dict[str, list[Row]]] = {}
        self._tmp = tempfile.TemporaryDirectory()
        self.evaluated = 0
        self.progress = True

    def close(self) -> None:
        for recall, _ in self._indexes.values():
            if recall.store is not None:
                recall.store.close()  # type: ignore[attr-defined]
        self._tmp.cleanup()

    def _index(self, config: Config) -> tuple[RecallIndex, dict[str, str]]:
        fts = config.mode == "fts5"
        # FTS5 keeps its own index (its BM25 constants and column weights are the store's).
        key = (fts, *((getattr(config.tuning, f) for f in INDEX_FIELDS) if not fts else ()))
        if key not in self._indexes:
            tuning = config.tuning
            store = SQLiteRecallStore(Path(self._tmp.name) / f"recall{len(self._indexes)}.db") if fts else None
            embedder = None if fts else self.embedder
            recall = RecallIndex(embedder=embedder, tuning=tuning, store=store, batch_size=128)
            self._indexes[key] = (recall, archive(list(self.data.values()), recall))
        return self._indexes[key]

    def rows(self, config: Config) -> dict[str, list[Row]]:
        cached = self._rows.get(config)
        if cached is not None:
            return cached
        recall, dia = self._index(config)
        recall.tuning = config.tuning
        recall.weights = (1.0, config.dense_weight)
        recall.rerank = config.rerank
        mode = "lexical" if config.mode == "fts5" else config.mode
        out: dict[str, list[Row]] = {}
        for conv, sample in self.data.items():
            rows = out[conv] = []
            for qa in sample["qa"]:
                gold = evidence_ids(qa.get("evidence", []))
                if not gold:
                    continue
                hits = recall.search(qa["question"], user_id=conv, k=max(KS), mode=mode)  # type: ignore[arg-type]
                ranked = [dia[h.doc.message_id] for h in hits]
                recall_at = tuple(len(gold & set(ranked[:k])) / len(gold) for k in KS)
                category = CATEGORIES.get(int(qa["category"]), str(qa["category"]))
                rows.append(Row(recall_at, category, names_month_or_year(qa["question"])))
        self._rows[config] = out
        self.evaluated += 1
        if self.progress:
            print(f"  scored {self.evaluated}: {config}", file=sys.stderr, flush=True)
        return out


def objective(rows: Mapping[str, list[Row]], convs: Sequence[str]) -> float:
    pooled = [r for c in convs for r in rows[c]]
    return statistics.fmean(statistics.fmean(r.recall[1:]) for r in pooled)


def select(
    evaluator: Evaluator, convs: Sequence[str], space: Mapping[str, Sequence[Any]], start: Config, passes: int = 1
) -> Config:
    """Coordinate ascent over ``space`` on ``convs`` only (one pass over the coordinates by default)."""
    config = start
    best = objective(evaluator.rows(config), convs)
    for _ in range(passes):
        moved = False
        for name, values in space.items():
            for value in values:
                if value == config.get(name):
                    continue
                candidate = config.with_(name, value)
                score = objective(evaluator.rows(candidate), convs)
                if score > best + 1e-9:
                    config, best, moved = candidate, score, True
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


def cross_validate(evaluator: Evaluator, space: Mapping[str, Sequence[Any]], start: Config) -> CVResult:
    convs = list(evaluator.data)
    folds, held = {}, {}
    for test in convs:
        train = [c for c in convs if c != test]
        chosen = select(evaluator, train, space, start)
        folds[test] = chosen
        held[test] = evaluator.rows(chosen)[test]
    dev_config = select(evaluator, convs, space, start)
    return CVResult(folds, held, dev_config, evaluator.rows(dev_config))
