"""One user's working blocks, as an agent edits them: every setting kept, and no block that could never fit.

What comes in: an edit (update, append, replace) of a named block at the version the
agent read, optionally with new settings (priority, token cap, description). What
happens: the edit is made with the block's stored settings, those it names replaced
and every other one kept (an agent's first edit of a "never cut" persona block leaves
it never cut, and a capped block capped). A block of priority 0 is never cut from a
context, so one larger than a session's room would make every context of that session
fail: such an edit (its text, or its cap) is refused before it is saved, naming the
session and the budget it breaks. What goes out: the block as stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import BlockEditError, ConfigurationError, ConflictError, ContextOverflowError
from ..longterm import WorkingBlock
from ..longterm.blocks.base import check_block, stored_block
from ..longterm.blocks.store import BlockRecord, BlockStore
from ..memory import Memory
from ..memory.options import stored_config
from ..session import SessionInfo
from ..stores.base import SessionStore

__all__ = ["DEFAULT_MAX_TOKENS", "FIT_SESSIONS", "BlockEdit", "Blocks", "Settings", "open_session"]

BlockEdit = Literal["update", "append", "replace"]
FIT_SESSIONS = 100  # the user's most recent sessions a never-cut block is checked against
DEFAULT_MAX_TOKENS = 128_000  # the context of a session saved with neither a model nor a budget


@dataclass(frozen=True, slots=True)
class Settings:
    """The settings an edit names (None: keep the stored one)."""

    priority: int | None = None
    max_tokens: int | None = None
    position: Literal["system", "user"] | None = None
    description: str | None = None


class Blocks:
    """The working blocks of the store user ``user`` (see the module docstring)."""

    def __init__(self, store: SessionStore, blocks: BlockStore, user: str) -> None:
        self.store, self.blocks, self.user = store, blocks, user

    def list(self) -> list[BlockRecord]:
        return self.blocks.list_blocks(self.user)

    def read(self, name: str) -> BlockRecord:
        record = self.blocks.load_block(self.user, name)
        if record is None:
            names = [r.name for r in self.blocks.list_blocks(self.user)]
            raise ConfigurationError(f"no working block named {name!r}; this user has: {names or 'none'}")
        return record

    def edit(
        self, name: str, operation: BlockEdit, text: str, expected_version: int, old: str | None, settings: Settings
    ) -> BlockRecord:
        """Edit at ``expected_version`` (0 creates the block); a stale version raises ConflictError."""
        if operation not in ("update", "append", "replace"):
            raise ConfigurationError(f"operation must be update, append or replace, not {operation!r}")
        if operation == "replace" and old is None:
            raise ConfigurationError("operation 'replace' needs 'old', the exact text to replace")
        current = self.blocks.load_block(self.user, name)
        if current is None:
            if expected_version != 0:
                raise ConflictError(f"block {name!r} does not exist; create it with expected_version 0")
            if operation == "replace":
                raise ConfigurationError(f"block {name!r} does not exist, so there is nothing to replace")
            current = BlockRecord(self.user, name, "", 0)
        target = _with(current, settings)
        check_block(name, target.priority, target.max_tokens, target.position)
        # The new value, worked out on a copy first: the cap applies, and the fit is checked before any save.
        probe = _block(target, store=None)
        _apply(probe, operation, text, old, None)
        self._check_fit(replace(target, value=probe.value))
        if current.version == 0:
            # Created in one optimistic save: a concurrent creator makes this one fail, never merge silently.
            return self.blocks.save_block(replace(target, value=probe.value, version=1), expected_version=0)
        block = _block(target, store=self.blocks)
        if block.version != current.version:  # another writer saved it between our read and now
            raise ConflictError(f"block {name!r} is at version {block.version}, not {expected_version}; read it again")
        _apply(block, operation, text, old, expected_version)
        stored = self.blocks.load_block(self.user, name)
        assert stored is not None
        return stored

    def _check_fit(self, record: BlockRecord) -> None:
        """Refuse a never-cut block that does not fit one of the user's sessions (with the other never-cut ones)."""
        if record.priority != 0:
            return
        never_cut = [r for r in self.blocks.list_blocks(self.user) if r.priority == 0 and r.name != record.name]
        blocks = [stored_block(r, priority=0) for r in [*never_cut, record]]
        probe = _block(record, store=None)
        for info in self.store.list_sessions(user_id=self.user, limit=FIT_SESSIONS):
            memory = open_session(self.store, info, self.user, blocks=blocks, on_overflow="raise")
            room = memory.budget - memory.reserved_output
            if record.max_tokens is not None and record.max_tokens > room:
                raise BlockEditError(
                    f"block {record.name!r} may grow to its cap of {record.max_tokens} tokens, and as priority 0 it "
                    f"is never cut: session {info.id!r} has {room} tokens for a request ({memory.budget} budget, "
                    f"{memory.reserved_output} kept for the reply); lower max_tokens or give it a priority above 0"
                )
            try:
                memory.context()
            except ContextOverflowError:
                raise BlockEditError(
                    f"block {record.name!r} ({probe.tokens()} tokens) is priority 0, never cut, and with the session's "
                    f"system messages and the other never-cut blocks it does not fit session {info.id!r}: "
                    f"{room} tokens for a request ({memory.budget} budget, {memory.reserved_output} kept for the "
                    "reply); shorten it, or give it a priority above 0 so that it can be cut"
                ) from None


def _with(record: BlockRecord, settings: Settings) -> BlockRecord:
    changes: dict[str, Any] = {
        name: getattr(settings, name)
        for name in ("priority", "max_tokens", "position", "description")
        if getattr(settings, name) is not None
    }
    return replace(record, **changes)


def _block(record: BlockRecord, *, store: BlockStore | None) -> WorkingBlock:
    """A WorkingBlock with ``record``'s every setting (read from ``store`` when given, else ``record``'s value)."""
    return WorkingBlock(
        record.name,
        record.value,
        priority=record.priority,
        max_tokens=record.max_tokens,
        position=record.position,  # type: ignore[arg-type]
        description=record.description,
        store=store,
        scope=record.scope,
    )


def _apply(block: WorkingBlock, operation: BlockEdit, text: str, old: str | None, expected: int | None) -> int:
    if operation == "update":
        return block.update(text, expected_version=expected)
    if operation == "append":
        return block.append(text, expected_version=expected)
    assert old is not None
    return block.replace(old, text, expected_version=expected)


def open_session(store: SessionStore, info: SessionInfo, user: str, **options: Any) -> Memory:
    """``Memory.open`` on a stored session; one saved with neither a model nor a budget gets a generic budget."""
    unbudgeted = "max_tokens" not in options and info.model is None
    if unbudgeted and not stored_config(store.load(info.id, user_id=user).state).get("max_tokens"):
        options["max_tokens"] = DEFAULT_MAX_TOKENS
    return Memory.open(info.id, store=store, user_id=user, **options)
