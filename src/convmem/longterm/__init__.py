"""Long-term memory: blocks, facts with temporal validity, and recall over the archive.

Recall (``RecallIndex``, the embedders, ``RecallBlock``) needs numpy
(``pip install 'convmem[recall]'``); it is imported on first use, so the
rest works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy
from .blocks import Block, CallableBlock, Position, StaticBlock, Turn, WorkingBlock
from .blockstore import BlockRecord, BlockStore, MemoryBlockStore
from .dynamic import FactsBlock, RecallBlock
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

if TYPE_CHECKING:
    from .embedders import AsyncEmbedder, Embedder, HashingEmbedder, OpenAIEmbedder, SentenceTransformerEmbedder
    from .hits import Dropped
    from .ranking import Tuning
    from .recall import Keys, RecallDoc, RecallHit, RecallIndex

_LAZY = {
    "AsyncEmbedder": "embedders",
    "Embedder": "embedders",
    "HashingEmbedder": "embedders",
    "OpenAIEmbedder": "embedders",
    "SentenceTransformerEmbedder": "embedders",
    "Dropped": "hits",
    "Keys": "recall",
    "RecallDoc": "recall",
    "RecallHit": "recall",
    "RecallIndex": "recall",
    "Tuning": "ranking",
}

__all__ = [
    "AsyncEmbedder",
    "AsyncFactExtractor",
    "AsyncFactStore",
    "AsyncFacts",
    "Block",
    "BlockRecord",
    "BlockStore",
    "CallableBlock",
    "Dropped",
    "Embedder",
    "Fact",
    "FactAdd",
    "FactExtractor",
    "FactInvalidate",
    "FactOperation",
    "FactStore",
    "FactUpdate",
    "Facts",
    "FactsBlock",
    "HashingEmbedder",
    "Keys",
    "MemoryBlockStore",
    "MemoryFactStore",
    "OpenAIEmbedder",
    "Position",
    "RecallBlock",
    "RecallDoc",
    "RecallHit",
    "RecallIndex",
    "SentenceTransformerEmbedder",
    "StaticBlock",
    "Tuning",
    "Turn",
    "WorkingBlock",
]


__getattr__ = lazy(__name__, _LAZY)
