"""Long-term memory: blocks, facts with temporal validity, and recall over the archive."""

from __future__ import annotations

from .blocks import Block, CallableBlock, StaticBlock
from .factbook import AsyncFacts, Facts
from .facts import (
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
from .factstore import MemoryFactStore

__all__ = [
    "AsyncFactExtractor",
    "AsyncFactStore",
    "AsyncFacts",
    "Block",
    "CallableBlock",
    "Fact",
    "FactAdd",
    "FactExtractor",
    "FactInvalidate",
    "FactOperation",
    "FactStore",
    "FactUpdate",
    "Facts",
    "MemoryFactStore",
    "StaticBlock",
]
