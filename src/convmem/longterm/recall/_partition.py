"""One user's in-process recall index: documents, filter columns, BM25 postings and vectors.

Everything is append-only and column-oriented, so adding a document is
O(its length) and a query is a few numpy passes over the user's documents:
filters become one boolean mask, BM25 fills a score vector, dense search is
one matrix-vector product, and ``argpartition`` picks the top k. Vectors are
an exact float32 matrix grown by doubling; an ANN index can replace
:meth:`Partition.dense_top` later without changing anything above it.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from ...errors import ConfigurationError
from ._np import np
from .lexical import BM25Index
from .model import DocRef, RecallDoc, Where
from .temporal import DayRange, mentions

__all__ = ["Partition", "top"]

Array = np.ndarray[Any, Any]
ROLE_CODES = {"user": 0, "assistant": 1, "tool": 2, "system": 3, "developer": 4}


class Partition:
    """The documents of one user, with their lexical and dense indexes, neighbours and dates."""

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.docs: list[RecallDoc] = []
        self.numbers: dict[DocRef, int] = {}
        self._sessions: dict[str, int] = {}
        self._session_col = array("i")
        self._seq_col = array("q")
        self._time_col = array("d")
        self._role_col = array("b")
        # The previous and next document of the same session (-1: none), in the order they were added.
        self._prev_col = array("i")
        self._next_col = array("i")
        self._last_of_session: dict[int, int] = {}
        # The day each document was said, and the days its date expressions refer to (one row per mention).
        self._day_col = array("i")
        self._mention_doc = array("i")
        self._mention_first = array("i")
        self._mention_end = array("i")
        self.years: tuple[int, int] | None = None
        self.lexical = BM25Index(k1=k1, b=b)
        self.vectors: Array | None = None
        self.model: str | None = None
        self._has_vector = np.zeros(0, dtype=bool)
        self.vector_count = 0

    def __len__(self) -> int:
        return len(self.docs)

    def add(
        self, doc: RecallDoc, tokens: Sequence[str], context: Sequence[str] = (), context_weight: float = 0.5
    ) -> int | None:
        """Index ``doc``; returns its number, or None if it is already indexed."""
        if doc.ref in self.numbers:
            return None
        number = self.lexical.add(tokens, context, context_weight)
        self.docs.append(doc)
        self.numbers[doc.ref] = number
        session = self._sessions.setdefault(doc.session_id, len(self._sessions))
        self._session_col.append(session)
        self._seq_col.append(doc.seq)
        self._time_col.append(doc.created_at.timestamp())
        self._role_col.append(ROLE_CODES.get(doc.role, 5))
        previous = self._last_of_session.get(session, -1)
        self._prev_col.append(previous)
        self._next_col.append(-1)
        if previous >= 0:
            self._next_col[previous] = number
        self._last_of_session[session] = number
        said = doc.created_at.date()
        self._day_col.append(said.toordinal())
        self.years = (min(self.years[0], said.year), max(self.years[1], said.year)) if self.years else (said.year,) * 2
        for first, end in mentions(doc.text, said):
            self._mention_doc.append(number)
            self._mention_first.append(first)
            self._mention_end.append(end)
        return number

    # -- neighbours and dates ----------------------------------------------------------------
    def neighbours(self) -> tuple[Array, Array]:
        """(previous, next) document number of each document in its session, -1 where there is none."""
        return np.frombuffer(self._prev_col, np.int32), np.frombuffer(self._next_col, np.int32)

    def said_in(self, ranges: Sequence[DayRange]) -> Array:
        """A boolean mask of the documents said on a day of ``ranges`` or mentioning such a day."""
        n = len(self.docs)
        days = np.frombuffer(self._day_col, np.int32)
        hit = np.zeros(n, dtype=bool)
        m_doc = np.frombuffer(self._mention_doc, np.int32)
        m_first = np.frombuffer(self._mention_first, np.int32)
        m_end = np.frombuffer(self._mention_end, np.int32)
        for first, end in ranges:
            hit |= (days >= first) & (days < end)
            if len(m_doc):
                hit[m_doc[(m_first < end) & (m_end > first)]] = True
        return hit

    def times(self) -> Array:
        """When each document was said (POSIX seconds)."""
        return np.frombuffer(self._time_col, np.float64)

    def sittings(self, numbers: Sequence[int]) -> list[int]:
        """A code per document for its sitting: its session and the day it was said."""
        sessions, days = self._session_col, self._day_col
        return [sessions[n] * 10_000_000 + days[n] for n in numbers]

    def role_mask(self, role: str) -> Array:
        """A boolean mask of the documents said in ``role``."""
        mask: Array = np.frombuffer(self._role_col, np.int8) == ROLE_CODES.get(role, 5)
        return mask

    def mentions_a_date(self) -> Array:
        """A boolean mask of the documents with a date expression."""
        hit = np.zeros(len(self.docs), dtype=bool)
        hit[np.frombuffer(self._mention_doc, np.int32)] = True
        return hit

    # -- vectors -----------------------------------------------------------------------------
    def missing_vectors(self, model: str) -> list[int]:
        """Numbers of the documents without a vector of ``model``."""
        if self.model is not None and self.model != model:
            raise ConfigurationError(f"this index holds {self.model!r} vectors; cannot mix in {model!r}")
        n = len(self.docs)
        if self.vector_count == n:
            return []
        present = self._has_vector[:n]
        return [*np.flatnonzero(~present).tolist(), *range(len(present), n)]

    def set_vectors(self, model: str, numbers: Sequence[int], vectors: Array) -> None:
        dim = vectors.shape[1]
        if self.vectors is None:
            self.model = model
            self.vectors = np.zeros((max(64, len(self.docs)), dim), dtype=np.float32)
        elif self.vectors.shape[1] != dim:
            raise ConfigurationError(
                f"vectors of dimension {dim} cannot join an index of dimension {self.vectors.shape[1]}"
            )
        need = len(self.docs)
        if need > len(self.vectors):
            grown = np.zeros((max(need, 2 * len(self.vectors)), dim), dtype=np.float32)
            grown[: len(self.vectors)] = self.vectors
            self.vectors = grown
        if need > len(self._has_vector):
            has = np.zeros(len(self.vectors), dtype=bool)
            has[: len(self._has_vector)] = self._has_vector
            self._has_vector = has
        index = np.asarray(numbers, dtype=np.int64)
        self.vector_count += int(np.count_nonzero(~self._has_vector[index]))
        self.vectors[index] = vectors
        self._has_vector[index] = True

    # -- search ------------------------------------------------------------------------------
    def mask(self, where: Where) -> Array | None:
        """A boolean mask of the documents ``where`` admits, or None if it admits all."""
        n = len(self.docs)
        keep: Array | None = None

        def both(other: Array) -> None:
            nonlocal keep
            keep = other if keep is None else keep & other

        if where.sessions is not None:
            codes = [self._sessions[s] for s in where.sessions if s in self._sessions]
            both(np.isin(np.frombuffer(self._session_col, np.int32), codes))
        if where.since is not None or where.until is not None:
            times = np.frombuffer(self._time_col, np.float64)
            if where.since is not None:
                both(times >= where.since.timestamp())
            if where.until is not None:
                both(times < where.until.timestamp())
        if where.roles is not None:
            codes = [ROLE_CODES.get(r, 5) for r in where.roles]
            both(np.isin(np.frombuffer(self._role_col, np.int8), codes))
        if where.exclude_session is not None and where.exclude_session in self._sessions:
            code = self._sessions[where.exclude_session]
            inside = np.frombuffer(self._session_col, np.int32) == code
            if where.exclude_from is not None:
                inside &= np.frombuffer(self._seq_col, np.int64) >= where.exclude_from
            both(~inside)
        assert keep is None or len(keep) == n
        return keep

    def dense_scores(self, query: Array, keep: Array | None) -> tuple[Array, Array]:
        """(numbers, cosine similarities) of every admitted document that has a vector."""
        if self.vectors is None:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        n = len(self.docs)
        if keep is None and self.vector_count == n:  # the common case: no filter, nothing pending
            return np.arange(n), self.vectors[:n] @ query
        admitted = self._has_vector[:n].copy()
        if keep is not None:
            admitted &= keep
        numbers = np.flatnonzero(admitted)
        sims = self.vectors[:n] @ query if len(numbers) * 2 > n else self.vectors[numbers] @ query
        return numbers, sims[numbers] if len(sims) == n else sims

    def dense_top(self, query: Array, k: int, keep: Array | None) -> list[tuple[int, float]]:
        return top(*self.dense_scores(query, keep), k)


def top(numbers: Array, scores: Array, k: int) -> list[tuple[int, float]]:
    """The k best (number, score) pairs, best first; ties go to the older document (deterministic)."""
    if len(numbers) > k:
        # Everything tied with the k-th score stays in, so the tie-break below sees all of them.
        cut = np.partition(scores, len(scores) - k)[len(scores) - k]
        chosen = scores >= cut
        numbers, scores = numbers[chosen], scores[chosen]
    order = np.lexsort((numbers, -scores))[:k]
    return [(int(numbers[i]), float(scores[i])) for i in order]
