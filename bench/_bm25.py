"""Plain BM25, the issue's baseline: rank_bm25's ``BM25Okapi`` over lowercased words, one document per turn.

``rank_bm25`` is used when it is installed; otherwise :class:`Okapi` below computes the same scores
(rank_bm25 0.2.2's ``BM25Okapi``: k1 1.5, b 0.75, idf ``log((N - df + 0.5) / (df + 0.5))`` with a
negative idf replaced by 0.25 times the mean idf; a repeated query word counts each time). Words are
``re.findall(r"\\w+", text.lower())``, as LongMemEval's ``SOURCE.txt`` computes its baseline. A question
ranks every turn of its own archive (its user), best first, ties in the order the turns were archived.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from convmem.longterm.recall.model import RecallDoc

K1, B, EPSILON = 1.5, 0.75, 0.25


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class Okapi:
    """rank_bm25's BM25Okapi, over tokenized documents."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = K1, b: float = B, epsilon: float = EPSILON) -> None:
        self.k1, self.b = k1, b
        self.freqs = [Counter(doc) for doc in corpus]
        self.lengths = np.asarray([len(doc) for doc in corpus], dtype=np.float64)
        self.avgdl = float(self.lengths.sum()) / len(corpus)
        holding: Counter[str] = Counter()
        for freq in self.freqs:
            holding.update(freq.keys())
        n = len(corpus)
        self.idf = {w: math.log(n - df + 0.5) - math.log(df + 0.5) for w, df in holding.items()}
        floor = epsilon * sum(self.idf.values()) / len(self.idf)
        self.idf = {w: (floor if v < 0 else v) for w, v in self.idf.items()}
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for number, freq in enumerate(self.freqs):
            for word, tf in freq.items():
                self.postings[word].append((number, tf))

    def get_scores(self, query: Sequence[str]) -> Any:
        scores = np.zeros(len(self.freqs))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / self.avgdl)
        for word in query:
            idf = self.idf.get(word) or 0.0
            for number, tf in self.postings.get(word, ()):
                scores[number] += idf * tf * (self.k1 + 1) / (tf + norm[number])
        return scores


def okapi(corpus: Sequence[Sequence[str]]) -> Any:
    """``rank_bm25.BM25Okapi`` if installed, else :class:`Okapi` (the same scores)."""
    try:
        from rank_bm25 import BM25Okapi  # type: ignore[import-not-found]
    except ImportError:
        return Okapi(corpus)
    return BM25Okapi(corpus)


class PlainBM25:
    """One BM25Okapi per user over the archived documents' texts; ``rank`` gives a question's top turns."""

    def __init__(self, docs: Sequence[RecallDoc]) -> None:
        by_user: dict[str | None, list[RecallDoc]] = defaultdict(list)
        for doc in docs:
            by_user[doc.user_id].append(doc)
        self.docs = dict(by_user)
        self.models = {user: okapi([words(d.text) for d in users]) for user, users in by_user.items()}

    def rank(self, query: str, user: str, k: int) -> list[RecallDoc]:
        scores = self.models[user].get_scores(words(query))
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.docs[user][i] for i in order]
