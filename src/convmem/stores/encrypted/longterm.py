"""Facts and working blocks sealed per user: the fact and block stores of an :class:`EncryptedStore`.

Each wraps the backend's own store and seals what it writes (``_rows``), so every backend gets it from
this one implementation. The block store hides the reserved block that holds the user's wrapped data key
(:data:`~convmem.stores.encrypted.keys.KEY_BLOCK`): it is neither listed, loaded nor saved through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ...errors import BlockEditError
from ...longterm.blocks.store import BlockRecord, BlockStore
from ...longterm.facts.model import Fact, FactStore
from ._rows import key_of, open_block, open_fact, seal_block, seal_fact
from .keys import KEY_BLOCK, DataKeys

__all__ = ["EncryptedBlockStore", "EncryptedFactStore"]


class EncryptedFactStore:
    """A :class:`~convmem.longterm.facts.model.FactStore` whose facts' text is sealed by their user's data key."""

    def __init__(self, facts: FactStore, keys: DataKeys) -> None:
        self._facts = facts
        self._keys = keys

    def __repr__(self) -> str:
        return f"EncryptedFactStore({self._facts!r})"

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        keys = {user: self._keys.current(user) for user in {f.user_id for f in (*added, *changed)}}
        self._facts.write_facts(
            [seal_fact(keys[f.user_id], f) for f in added], [seal_fact(keys[f.user_id], f) for f in changed]
        )

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        stored = self._facts.list_facts(user_id=user_id, valid_at=valid_at, open_only=open_only)
        return [open_fact(self._keys.for_read(user_id, key_of(f.text, f"fact {f.id!r}")), f) for f in stored]

    def close(self) -> None:
        self._facts.close()


class EncryptedBlockStore:
    """A :class:`~convmem.longterm.blocks.store.BlockStore` whose blocks' values are sealed by their scope's key."""

    def __init__(self, blocks: BlockStore, keys: DataKeys) -> None:
        self._blocks = blocks
        self._keys = keys

    def __repr__(self) -> str:
        return f"EncryptedBlockStore({self._blocks!r})"

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        if name == KEY_BLOCK:
            return None
        record = self._blocks.load_block(scope, name)
        return None if record is None else self._opened(record)

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        if record.name == KEY_BLOCK:
            raise BlockEditError(f"the block name {KEY_BLOCK!r} is reserved for the user's data key")
        sealed = seal_block(self._keys.current(record.scope), record, expected_version + 1)
        saved = self._blocks.save_block(sealed, expected_version=expected_version)
        return BlockRecord(
            saved.scope,
            saved.name,
            record.value,
            saved.version,
            saved.priority,
            saved.position,
            saved.max_tokens,
            record.description,
        )

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        return [self._opened(r) for r in self._blocks.list_blocks(scope) if r.name != KEY_BLOCK]

    def _opened(self, record: BlockRecord) -> BlockRecord:
        key = self._keys.for_read(record.scope, key_of(record.value, f"block {record.name!r}"))
        return open_block(key, record)
