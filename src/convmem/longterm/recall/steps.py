"""Ranking steps that adapt to the conversation's shape: neighbours, roles, order and the spread over sessions.

In: one user's :class:`~convmem.longterm.recall._partition.Partition`, the query and its per-term BM25
contributions. Out: score vectors (or masks) over the partition's documents, which
:func:`~convmem.longterm.recall.ranking.lexical_signals` combines.

* **Neighbours** (:func:`neighbour_share`): evidence often spans two turns, a question and its short
  answer ("Where did you go?" / "The Rockies"). A document gains ``share`` of its better session
  neighbour's score. With ``fill`` (the default) a neighbour passes on only what it scores on the query
  words the document itself lacks: the reply that says none of the words gets the question's words, but a
  turn that already holds them gains nothing from a long neighbour repeating them. Measured on both dev
  sets (``bench/recall_protocol.py``): on LongMemEval's user-assistant chats, whose assistant turns echo
  the user's words at length, passing on the whole score lifted the neighbours of every matching turn
  above the turns holding the evidence.
* **Order** (:func:`order_multiplier`): a question about what changed asks for the newest ("what is my
  current...", "my most recent...") or the oldest evidence ("what did I have before...", "originally")
  (:func:`~convmem.longterm.recall.temporal.asks_order`); a document gains up to ``recency`` by where its
  time falls between the user's oldest and newest documents.
* **Spread** (:func:`spread`): a question whose evidence spans sessions ("how many weddings did I attend
  this year?") needs hits from each of them; each hit already taken from a candidate's sitting (its
  session and day) multiplies the candidate's score by ``1 - session_spread`` before the next pick. With
  ``spread_many`` only a question that counts, totals or compares (:func:`asks_many`) is spread: one fact
  asked about is best served by its best turns, wherever they are.
* **Roles** (:func:`asked_role`): in a chat between a user and an assistant, a question in the first
  person ("what did I buy?") asks what the user said, and one about what "you told me" or "our previous
  conversation" asks what the assistant said. Documents of that role are multiplied by ``1 + role_boost``.
  A question naming neither (LoCoMo's "what did Caroline paint?") is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._np import np
from ._partition import Partition

__all__ = ["asked_role", "asks_many", "neighbour_share", "order_multiplier", "spread"]

Array = np.ndarray[Any, Any]

_PAST = (  # what an assistant did with words
    "told|said|mentioned|recommended|suggested|gave|provided|listed|shared|explained|described|offered|wrote|"
    "helped|came up with|proposed|advised|named|called|found|showed|created|made|gave"
)
_BASE = (  # the same after "did you" ("what did you suggest?"); "can you suggest..." asks for something new
    "tell|say|mention|recommend|suggest|give|provide|list|share|explain|describe|offer|write|help|come up with|"
    "propose|advise|name|call|find|show|create|make"
)
_ASKS_ASSISTANT = re.compile(
    rf"\byou(?:'ve|'d| have| had| just)?\s+(?:{_PAST})\b|\bdid\s+you\s+(?:{_BASE})\b"
    r"|\b(?:our|the|my)\s+(?:previous|last|earlier|past|recent)?\s*(?:conversation|chat|discussion)s?\b",
    re.I,
)
_ASKS_MANY = re.compile(  # counting, totals, averages and comparisons: their evidence is several facts
    r"\bhow\s+(?:many|much)\b|\b(?:total|totals|average|altogether|combined|across|different|both|each|every)\b"
    r"|\bcompared\s+(?:to|with)\b|\b\w+er\s+than\b|\ball\s+(?:the|my)\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")


def asked_role(query: str) -> str | None:
    """The role whose turns ``query`` asks about: ``"assistant"``, ``"user"`` or None (neither is named).

    What "you" said is the assistant's (checked first: "what did you tell me about my car?" asks for the
    assistant's answer); a question in the first person asks what the user said.
    """
    if _ASKS_ASSISTANT.search(query):
        return "assistant"
    if _FIRST_PERSON.search(query):
        return "user"
    return None


def neighbour_share(
    partition: Partition, base: Array, per_term: Array | None, share: float, keep: Array | None, *, fill: bool
) -> Array:
    """What each document gains from the better of its two session neighbours.

    Args:
        base: each document's score before the step (BM25 plus feedback); a filtered-out document has 0.
        per_term: (query terms, documents) BM25 contributions, for ``fill``; None when the scores came from
            a store's index (FTS5), where the whole score is passed on.
        share: the share of the neighbour's score passed on.
        keep: the documents the filters admit (None: all); the others gain nothing.
        fill: pass on only the contributions of the terms the document lacks.
    """
    n = len(partition)
    previous, following = partition.neighbours()
    if fill and per_term is not None and len(per_term):
        lacking = per_term <= 0.0
        if keep is not None:
            per_term = np.where(keep, per_term, 0.0)
        padded = np.concatenate([per_term, np.zeros((len(per_term), 1), np.float32)], axis=1)
        # What feedback added (base less BM25) has no per-term split: it is passed on whole.
        rest = np.append(np.maximum(base - per_term.sum(axis=0), 0.0), np.float32(0.0))
        gains = [(np.where(lacking, padded[:, side], 0.0)).sum(axis=0) + rest[side] for side in (previous, following)]
        gained = share * np.maximum(gains[0], gains[1])
    else:
        padded_base = np.append(base, np.float32(0.0))  # index -1 (no neighbour) reads the 0 at the end
        gained = share * np.maximum(padded_base[previous], padded_base[following])
    if keep is not None:
        gained = np.where(keep, gained, 0.0)
    assert len(gained) == n
    out: Array = gained.astype(np.float32)
    return out


def order_multiplier(partition: Partition, order: str, recency: float) -> Array:
    """``1 + recency * position``, position in [0, 1] from the user's oldest (0) to newest (1) document,
    reversed for ``order="oldest"``."""
    times = partition.times()
    first, last = float(times.min()), float(times.max())
    if last <= first:
        return np.ones(len(times), np.float32)
    position = (times - first) / (last - first)
    if order == "oldest":
        position = 1.0 - position
    return (1.0 + recency * position).astype(np.float32)


def asks_many(query: str) -> bool:
    """Whether ``query`` counts, totals or compares ("how many weddings...", "the total cost of...", "how much
    older am I than..."): its evidence is several facts, often said in several sessions."""
    return _ASKS_MANY.search(query) is not None


def spread(
    ranked: Sequence[tuple[int, float]], sittings: Sequence[int], factor: float, k: int
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """Greedy re-ranking of ``ranked`` (best first) so the top ``k`` reach more sittings.

    Each pick takes the candidate with the best score times ``factor`` to the power of the number of hits
    already taken from its sitting. Returns the top ``k`` (number, adjusted score) and, for those whose
    score was lowered, the multiplier applied.
    """
    left = list(zip(ranked, sittings, strict=True))
    taken: dict[int, int] = {}
    out: list[tuple[int, float]] = []
    lowered: dict[int, float] = {}
    while left and len(out) < k:
        best_at, best = 0, -1.0
        for at, ((_, score), sitting) in enumerate(left):
            adjusted = score * factor ** taken.get(sitting, 0)
            if adjusted > best:
                best_at, best = at, adjusted
            if score <= best:  # the rest score lower still, whatever their sitting
                break
        (number, score), sitting = left.pop(best_at)
        multiplier = factor ** taken.get(sitting, 0)
        if multiplier < 1.0:
            lowered[number] = multiplier
        out.append((number, score * multiplier))
        taken[sitting] = taken.get(sitting, 0) + 1
    return out, lowered
