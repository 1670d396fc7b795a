"""The two dev datasets as one shape for the recall benchmarks: units to archive, folds, and labelled questions.

A :class:`Dataset` archives its units (a LoCoMo conversation, a LongMemEval question's haystack: each its
own user) through a real ``Memory`` into a ``RecallIndex`` and names every archived message by its turn
(LoCoMo's dia_id, LongMemEval's ``"<session>:<turn>"``). Its questions carry their evidence turns, the
sessions those turns are in, a category, whether the question names a month or a year, and the time it is
asked ("now", LongMemEval only). ``folds`` splits the units for cross-validation: LoCoMo one conversation a
fold (leave one out), LongMemEval five folds of questions, stratified by question type (every type in
every fold, round-robin in id order), so the two can be paired fold by fold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import _lme
import _locomo
from convmem.longterm.recall.index import RecallIndex

FOLDS = 5


@dataclass(frozen=True)
class Question:
    unit: str  # whose archive it is asked of (the user id)
    text: str
    gold: frozenset[str]  # the evidence turns
    category: str
    dated: bool  # the question names a month or a year
    now: datetime | None = None
    sessions: frozenset[str] = frozenset()  # the sessions holding the evidence


class Dataset:
    """One dev set: ``archive`` fills a recall index; ``questions`` are asked of it; ``folds`` group the units."""

    name: str
    folds: dict[str, list[str]]  # fold name -> the units held out in it
    questions: list[Question]

    def archive(self, recall: RecallIndex) -> dict[str, str]:  # message id -> turn name
        raise NotImplementedError

    def session_of(self, turn: str) -> str:
        return turn.rsplit(":", 1)[0]

    def fold_of(self) -> dict[str, str]:
        return {unit: fold for fold, units in self.folds.items() for unit in units}


class LoCoMo(Dataset):
    name = "LoCoMo"

    def __init__(self, data: Sequence[dict[str, Any]] | None = None) -> None:
        self.data = list(data) if data is not None else _locomo.load()
        self.folds = {s["sample_id"]: [s["sample_id"]] for s in self.data}
        self.questions = []
        for sample in self.data:
            for qa in sample["qa"]:
                gold = _locomo.evidence_ids(qa.get("evidence", []))
                if not gold:
                    continue
                category = _locomo.CATEGORIES.get(int(qa["category"]), str(qa["category"]))
                self.questions.append(
                    Question(
                        sample["sample_id"],
                        qa["question"],
                        frozenset(gold),
                        category,
                        _locomo.names_month_or_year(qa["question"]),
                        None,
                        frozenset(self.session_of(g) for g in gold),
                    )
                )

    def archive(self, recall: RecallIndex) -> dict[str, str]:
        return _locomo.archive(self.data, recall)


class LongMemEval(Dataset):
    name = "LongMemEval-S dev"

    def __init__(self, data: Sequence[dict[str, Any]] | None = None, folds: int = FOLDS) -> None:
        self.data = list(data) if data is not None else _lme.load()
        by_type: dict[str, list[str]] = defaultdict(list)
        for record in sorted(self.data, key=lambda r: str(r["question_id"])):
            by_type[record["question_type"]].append(record["question_id"])
        self.folds = {f"fold-{i + 1}": [] for i in range(folds)}
        names = list(self.folds)
        at = 0
        for kind in sorted(by_type):
            for unit in by_type[kind]:
                self.folds[names[at % folds]].append(unit)
                at += 1
        self.questions = []
        for record in self.data:
            gold = _lme.evidence(record)
            if not gold:  # abstention questions have no evidence to find
                continue
            self.questions.append(
                Question(
                    record["question_id"],
                    record["question"],
                    frozenset(gold),
                    record["question_type"],
                    _locomo.names_month_or_year(record["question"]),
                    _lme.parse_date(record["question_date"]),
                    # LongMemEval's answer sessions (a few hold no labelled turn: its session metric uses them)
                    frozenset(str(s) for s in record["answer_session_ids"]),
                )
            )

    def archive(self, recall: RecallIndex) -> dict[str, str]:
        return _lme.archive(self.data, recall)


def lme_sample(data: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` of the LongMemEval questions, spread evenly over each question type's id order (a subsample for
    runs too slow for all 120, e.g. embedding ~55,000 long turns per embedder; every type keeps its share)."""
    if n >= len(data):
        return list(data)
    ordered = sorted(data, key=lambda r: (str(r["question_type"]), str(r["question_id"])))
    step = len(ordered) / n
    return [ordered[int(i * step)] for i in range(n)]


def datasets(
    names: str = "locomo,lme", lme_questions: int | None = None, locomo_conversations: int | None = None
) -> list[Dataset]:
    """The datasets named (``locomo``, ``lme``), those whose files exist; ``lme_questions`` subsamples
    LongMemEval (``lme_sample``), ``locomo_conversations`` keeps LoCoMo's first conversations."""
    out: list[Dataset] = []
    for name in names.split(","):
        if name == "locomo" and _locomo.LOCOMO.exists():
            out.append(LoCoMo(_locomo.load()[:locomo_conversations] if locomo_conversations else None))
        elif name == "lme" and _lme.LME.exists():
            data = _lme.load()
            out.append(LongMemEval(lme_sample(data, lme_questions) if lme_questions else data))
    return out
