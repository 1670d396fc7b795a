"""Recall results that explain themselves: per-signal scores, ranks, and why a hit was kept or dropped.

:class:`RecallHit` is what :meth:`~convmem.longterm.recall.index.RecallIndex.search` returns: the
document, its final score, and the score each signal gave it (BM25, the steps of
:mod:`convmem.longterm.recall.ranking`, the dense similarity, the fused score), with a one-line
``reason``. :class:`Dropped` is a candidate a :class:`~convmem.longterm.recall.block.RecallBlock`
left out, with the reason. :meth:`RecallHit.explain` gives a JSON-able dict for an inspector.

Example::

    hit = recall.search("when did Caroline go to the support group?", user_id="u")[0]
    hit.bm25, hit.dense, hit.fused, hit.reason
    # 14.2, 0.61, 3.8, 'rank 1 of 812: fused 3.80 = lexical 16.1 (bm25 14.2, neighbour +1.9) + dense 0.61'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import RecallDoc

__all__ = ["Dropped", "RecallHit", "describe"]


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One result of a recall search.

    Attributes:
        doc: the archived message.
        score: the score it was ranked by (fused in hybrid mode).
        lexical_rank: its rank by the lexical signal (1 = best), None if it was not in the lexical top.
        dense_rank: its rank by dense similarity, None likewise or without dense.
        bm25: BM25 of the query's own words against its key (None in dense mode).
        lexical: the lexical signal after feedback, neighbours and date boosts (None in dense mode).
        dense: cosine similarity to the query (None without dense).
        fused: the fused score (hybrid mode only).
        boosts: what each lexical step added (``feedback``, ``neighbour``: +score) or multiplied (``date``: xN).
        rank: its place in the results (1 = best).
        candidates: how many documents the ranking it won had to beat.
        ranked_by: ``"lexical"``, ``"dense"`` or ``"fused"``.
    """

    doc: RecallDoc
    score: float
    lexical_rank: int | None = None
    dense_rank: int | None = None
    bm25: float | None = None
    lexical: float | None = None
    dense: float | None = None
    fused: float | None = None
    boosts: tuple[tuple[str, float], ...] = ()
    rank: int = 0
    candidates: int = 0
    ranked_by: str = ""

    @property
    def reason(self) -> str:
        """Why it was kept, in one line (built on demand: searches make many hits nobody reads)."""
        return describe(self)

    def explain(self) -> dict[str, Any]:
        """The scores and the reason as a JSON-able dict (message id, session, seq, each signal)."""
        return {
            "message_id": self.doc.message_id,
            "session_id": self.doc.session_id,
            "seq": self.doc.seq,
            "score": self.score,
            "bm25": self.bm25,
            "lexical": self.lexical,
            "dense": self.dense,
            "fused": self.fused,
            "lexical_rank": self.lexical_rank,
            "dense_rank": self.dense_rank,
            "boosts": dict(self.boosts),
            "rank": self.rank,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Dropped:
    """A candidate a recall block left out, and why (``"repeats a text shown"``, ``"beyond k=5"``...)."""

    hit: RecallHit
    reason: str

    def explain(self) -> dict[str, Any]:
        return {**self.hit.explain(), "kept": False, "dropped_because": self.reason}


def describe(hit: RecallHit) -> str:
    """The one-line reason of a kept hit."""
    parts = []
    if hit.lexical is not None and hit.bm25 is not None:
        steps = ", ".join(f"{name} {'x' if name == 'date' else '+'}{value:.2f}" for name, value in hit.boosts)
        parts.append(f"lexical {hit.lexical:.2f} (bm25 {hit.bm25:.2f}{', ' + steps if steps else ''})")
    if hit.dense is not None:
        parts.append(f"dense {hit.dense:.2f}")
    head = f"fused {hit.fused:.2f} = " if hit.fused is not None else ""
    body = " + ".join(parts) or f"{hit.score:.2f}"
    return f"rank {hit.rank} of {hit.candidates} by {hit.ranked_by} score: {head}{body}"
