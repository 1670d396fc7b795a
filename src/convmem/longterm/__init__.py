"""Long-term memory: blocks, facts with temporal validity, and recall over the archive.

Three concepts, one package each: ``blocks`` (named context text, working
blocks editable and versioned), ``facts`` (what held when, extracted from what
the memory evicts) and ``recall`` (search over the archive). Recall
(``RecallIndex``, the embedders) needs numpy (``pip install 'convmem[recall]'``);
it is imported on first use, so the rest works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy
from .blocks.base import Block, CallableBlock, Position, StaticBlock, Turn, WorkingBlock
from .blocks.store import BlockRecord, BlockStore, MemoryBlockStore
from .facts.block import FactsBlock
from .facts.book import AsyncFacts, Facts
from .facts.model import (
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
from .facts.store import MemoryFactStore
from .recall.block import RecallBlock

if TYPE_CHECKING:
    from .recall.embedders import (
        AsyncEmbedder,
        E5Embedder,
        Embedder,
        HashingEmbedder,
        OpenAIEmbedder,
        SentenceTransformerEmbedder,
    )
    from .recall.hits import Dropped
    from .recall.index import Keys, RecallDoc, RecallHit, RecallIndex
    from .recall.ranking import Tuning

_LAZY = {
    "AsyncEmbedder": "recall.embedders",
    "E5Embedder": "recall.embedders",
    "Embedder": "recall.embedders",
    "HashingEmbedder": "recall.embedders",
    "OpenAIEmbedder": "recall.embedders",
    "SentenceTransformerEmbedder": "recall.embedders",
    "Dropped": "recall.hits",
    "Keys": "recall.index",
    "RecallDoc": "recall.index",
    "RecallHit": "recall.index",
    "RecallIndex": "recall.index",
    "Tuning": "recall.ranking",
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
    "E5Embedder",
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
