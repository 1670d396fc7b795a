"""Persistence of working blocks: the :class:`BlockStore` contract and its in-memory implementation.

A block is identified by ``(scope, name)``; ``scope`` is usually the user id,
so two users' ``persona`` blocks never meet. Saves are optimistic: a save
names the version it replaces (0 for a new block) and loses with
:class:`~convmem.errors.ConflictError` if the stored block has moved on.
The SQLite and file stores implement the same contract (``blocks`` table,
``blocks.json``), and the same tests run against all of them.

Example::

    store = MemoryBlockStore()
    record = store.save_block(BlockRecord("alice", "persona", "terse", 0), expected_version=0)
    record.version                                   # 1
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from ...errors import ConflictError

__all__ = ["BlockRecord", "BlockStore", "MemoryBlockStore", "check_save"]


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """A stored working block; ``version`` counts its saves (0: never saved)."""

    scope: str | None
    name: str
    value: str
    version: int
    priority: int = 1
    position: str = "system"
    max_tokens: int | None = None
    description: str | None = None


@runtime_checkable
class BlockStore(Protocol):
    """Where working blocks persist."""

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        """The stored block, or None."""
        ...

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        """Store ``record`` if the stored version is ``expected_version`` (0: absent); returns it one version up."""
        ...

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        """The scope's blocks, by name."""
        ...


def check_save(current: BlockRecord | None, record: BlockRecord, expected_version: int) -> BlockRecord:
    """The record to store at ``expected_version + 1``, or ConflictError if ``current`` is elsewhere."""
    found = current.version if current is not None else 0
    if found != expected_version:
        raise ConflictError(
            f"block {record.name!r} of {record.scope!r} is at version {found}, not {expected_version}; reload it"
        )
    return replace(record, version=expected_version + 1)


class MemoryBlockStore:
    """Blocks in a dict; thread-safe; lost when the process ends."""

    def __init__(self) -> None:
        self._blocks: dict[tuple[str | None, str], BlockRecord] = {}
        self._lock = threading.Lock()

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        return self._blocks.get((scope, name))

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        with self._lock:
            key = (record.scope, record.name)
            saved = check_save(self._blocks.get(key), record, expected_version)
            self._blocks[key] = saved
            return saved

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        return sorted((r for (s, _), r in self._blocks.items() if s == scope), key=lambda r: r.name)
