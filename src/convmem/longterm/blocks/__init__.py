"""Memory blocks: named sources of context text with a priority, a position and a budget claim.

``base`` holds the block kinds (static, callable, working: editable and versioned)
and the :class:`Turn` they render for; ``store`` the contract working blocks are
saved through, with an in-memory store. The dynamic blocks live with what they
show: ``FactsBlock`` in :mod:`convmem.longterm.facts`, ``RecallBlock`` in
:mod:`convmem.longterm.recall`.
"""

from __future__ import annotations

from .base import Block, CallableBlock, Position, StaticBlock, Turn, WorkingBlock
from .store import BlockRecord, BlockStore, MemoryBlockStore

__all__ = [
    "Block",
    "BlockRecord",
    "BlockStore",
    "CallableBlock",
    "MemoryBlockStore",
    "Position",
    "StaticBlock",
    "Turn",
    "WorkingBlock",
]
