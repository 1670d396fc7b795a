"""Erasure of what a :class:`~convmem.longterm.recall.index.RecallIndex` holds in this process.

A store's ``forget`` erases the stored documents and vectors (:mod:`convmem.stores._forget`); an index
that has loaded a user's partition, or that has no store at all (the service's in-memory backend),
still holds them in memory. :func:`forget_in_index` drops them: with a store the partition is simply
dropped (it is loaded again, without them, on next use); without one the user's remaining documents
are indexed again and keep their vectors, so nothing is embedded twice.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .index import RecallIndex

__all__ = ["forget_in_index"]


def forget_in_index(index: RecallIndex, user_id: str | None, sessions: Collection[str] | None = None) -> int:
    """Drop the user's documents (or those of ``sessions``) from ``index``; returns how many it held."""
    with index._lock:
        for key in [k for k in index._previous if k[0] == user_id and (sessions is None or k[1] in sessions)]:
            del index._previous[key]
        old = index._partitions.pop(user_id, None)
        if old is None:
            return 0
        kept = [] if sessions is None else [i for i, d in enumerate(old.docs) if d.session_id not in sessions]
        if index.store is None and kept:
            fresh = index._partition(user_id)
            for i in kept:
                index._index(fresh, old.docs[i])
            had = [i for i in kept if old.vectors is not None and i < len(old._has_vector) and old._has_vector[i]]
            if had and old.vectors is not None and old.model is not None:
                fresh.set_vectors(old.model, [fresh.numbers[old.docs[i].ref] for i in had], old.vectors[had])
        return len(old.docs) - len(kept)
