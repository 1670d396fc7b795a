"""Fusing lexical and dense rankings: reciprocal-rank fusion, or z-scored score fusion.

BM25 scores are unbounded and cosine similarities live in [-1, 1], so the
two cannot simply be added.

* :func:`rrf` (Cormack et al., 2009) fuses *ranks*: an item's score is
  ``sum(weight / (k + rank))`` over the rankings that contain it, ranks
  starting at 1. The paper's ``k = 60`` flattens the top of each ranking; a
  small ``k`` keeps a confident first place first. It needs only the top of
  each ranking.
* :func:`zscore` fuses *scores*: each retriever's scores are standardized
  over every document it could rank (a document BM25 does not match scores
  0), then added with weights. It uses how far ahead a document is, not just
  its place, which helps when one retriever is much surer than the other.

Example::

    rrf([[3, 1, 2], [1, 4]])          # [(1, ...), (3, ...), (4, ...), (2, ...)]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

from ...errors import ConfigurationError
from ._np import np

__all__ = ["nonzero", "rrf", "zscore"]

K = TypeVar("K", bound=Hashable)
Array = np.ndarray[Any, Any]


def rrf(
    rankings: Sequence[Sequence[K]], *, k: float = 60.0, weights: Sequence[float] | None = None
) -> list[tuple[K, float]]:
    """Fuse best-first rankings into one, best first; ties keep the order of first appearance."""
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ConfigurationError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[K, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))


def zscore(parts: Sequence[tuple[Array, Array, int]], weights: Sequence[float]) -> tuple[Array, Array]:
    """Weighted sum of standardized scores.

    Args:
        parts: per retriever, ``(numbers, scores, population)``: the documents it
            scored and how many it could have scored; the others count as 0.
        weights: one per retriever.

    Returns:
        (numbers, fused scores) of every document some retriever scored.
    """
    if len(weights) != len(parts):
        raise ConfigurationError(f"{len(weights)} weights for {len(parts)} retrievers")
    base = 0.0
    columns = []
    for (numbers, scores, population), weight in zip(parts, weights, strict=True):
        if not len(numbers) or population <= 0:
            continue
        values = scores.astype(np.float64)
        mean = values.sum() / population
        var = max((values * values).sum() / population - mean * mean, 0.0)
        sd = var**0.5 or 1.0
        absent = (0.0 - mean) / sd  # what an unscored document gets from this retriever
        base += weight * absent
        columns.append((numbers, weight * ((values - mean) / sd - absent)))
    if not columns:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    every = np.unique(np.concatenate([numbers for numbers, _ in columns]))
    total = np.full(len(every), base)
    for numbers, contribution in columns:
        total[np.searchsorted(every, numbers)] += contribution
    return every, total


def nonzero(scores: Any) -> tuple[Any, Any]:
    """A retriever's candidates: the documents it scored (their numbers) and their scores."""
    numbers = np.flatnonzero(scores)
    return numbers, scores[numbers]
