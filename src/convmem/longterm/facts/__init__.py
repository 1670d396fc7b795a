"""Facts with temporal validity: what the memory extracts from what it evicts, and when each held.

``model`` is the contract (a :class:`Fact`, the operations an extractor proposes,
the store and extractor protocols); ``_plan`` decides, purely, what a batch of
operations does to the stored facts; ``_flows`` runs each operation as a
generator of store effects that ``book`` (:class:`Facts` / :class:`AsyncFacts`)
drives; ``store`` is the in-memory store; ``block`` renders the facts that hold
now into the context.
"""

from __future__ import annotations

from .block import FactsBlock
from .book import AsyncFacts, Facts
from .model import (
    AsyncFactExtractor,
    AsyncFactStore,
    Fact,
    FactAdd,
    FactExtractor,
    FactInvalidate,
    FactOperation,
    FactStore,
    FactUpdate,
)
from .store import MemoryFactStore

__all__ = [
    "AsyncFactExtractor",
    "AsyncFactStore",
    "AsyncFacts",
    "Fact",
    "FactAdd",
    "FactExtractor",
    "FactInvalidate",
    "FactOperation",
    "FactStore",
    "FactUpdate",
    "Facts",
    "FactsBlock",
    "MemoryFactStore",
]
