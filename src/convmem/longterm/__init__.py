"""Long-term memory: blocks, facts with temporal validity, and recall over the archive."""

from __future__ import annotations

from .blocks import Block, CallableBlock, StaticBlock
from .facts import AsyncFactExtractor, Fact, FactAdd, FactExtractor, FactInvalidate, FactOperation, FactUpdate

__all__ = [
    "AsyncFactExtractor",
    "Block",
    "CallableBlock",
    "Fact",
    "FactAdd",
    "FactExtractor",
    "FactInvalidate",
    "FactOperation",
    "FactUpdate",
    "StaticBlock",
]
