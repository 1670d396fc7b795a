"""Long-term memory: blocks (and, later, facts and recall over the archive)."""

from __future__ import annotations

from .blocks import Block, CallableBlock, StaticBlock

__all__ = ["Block", "CallableBlock", "StaticBlock"]
