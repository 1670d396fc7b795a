"""Open memories kept between requests: one worker's cache of ``Memory`` objects, checked against the store.

Opening a session (``Memory.open``: read the state, the pinned messages and the
window, count them, rebuild the core) costs most of a request's CPU, and a
memory rebuilt per request forgets what only a live memory knows: the previous
context (``account.reused``) and the recall results its blocks keep. So each
worker keeps the memories it opened, keyed by the store's user and session id.

A kept memory is used only if it still is the session: the request's one read
of the session (``get_session``, which the exact-id lookup makes anyway) gives
the store's view (next seq, state version), and the memory's own view must be
the same; any write by another worker or process moves the store's view, so
the kept memory is dropped and the session opened again. The user's working
blocks are part of what a memory was opened with: a kept memory opened with
other block values, settings or versions is dropped too.

Bounded by count and by the tokens the kept windows hold (the memory a kept
session costs grows with its window; tokens are the measure the memory
already keeps), least recently used first out. ``Memory`` holds its own lock,
so threads of one worker may share a kept memory; a memory whose operation
failed is dropped, never put back half-updated.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..longterm.blocks.base import StaticBlock
from ..memory import Memory
from ..session import SessionInfo

__all__ = ["OpenMemories", "memory_view"]

BlockKey = tuple[tuple[str, str, int, int | None, str], ...]


def memory_view(memory: Memory) -> tuple[int, int]:
    """The memory's view of its session, as the store reports its own (``SessionInfo.view``)."""
    core = memory._core  # the writer's view lives in the core: next seq and the state version it holds
    return core.next_seq, core.state.version


def held_tokens(memory: Memory) -> int:
    """The tokens a memory holds in its window, pinned messages and summary (what ``stats()`` calls context tokens)."""
    core = memory._core
    return core.window.tokens + core.window.pinned_tokens + (core.summary.tokens if core.summary is not None else 0)


def blocks_key(blocks: Sequence[StaticBlock]) -> BlockKey:
    return tuple((b.name, b.text, b.priority, b.max_tokens, b.position) for b in blocks)


@dataclass
class _Kept:
    memory: Memory
    blocks: BlockKey
    tokens: int


class OpenMemories:
    """Up to ``max_sessions`` open memories holding up to ``max_tokens`` window tokens in all."""

    def __init__(self, *, max_sessions: int, max_tokens: int) -> None:
        self.max_sessions, self.max_tokens = max_sessions, max_tokens
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
        self._tokens = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def tokens(self) -> int:
        return self._tokens

    def get(self, info: SessionInfo, user: str, blocks: Sequence[StaticBlock], opener: Callable[[], Memory]) -> Memory:
        """The kept memory of ``info`` if it is still the session with these blocks, else ``opener()``'s."""
        key, wanted = (user, info.id), blocks_key(blocks)
        with self._lock:
            kept = self._kept.get(key)
            current = kept is not None and kept.blocks == wanted and memory_view(kept.memory) == info.view
            if kept is not None and current:
                self._kept.move_to_end(key)
                self.hits += 1
                return kept.memory
            if kept is not None:
                self._remove(key)
            self.misses += 1
        memory = opener()
        self.keep(memory, user, blocks)
        return memory

    def keep(self, memory: Memory, user: str, blocks: Sequence[StaticBlock]) -> None:
        """Keep ``memory``, opened with ``blocks``; the least recently used go past the bounds."""
        key = (user, memory.session_id)
        with self._lock:
            if key in self._kept:
                self._remove(key)
            self._kept[key] = _Kept(memory, blocks_key(blocks), 0)
        self.touch(memory, user)

    def touch(self, memory: Memory, user: str) -> None:
        """Measure a kept memory again after an operation (its window grew or shrank), then enforce the bounds."""
        tokens = held_tokens(memory)
        key = (user, memory.session_id)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept.memory is not memory:
                return  # dropped meanwhile, or another request's memory replaced it
            self._tokens += tokens - kept.tokens
            kept.tokens = tokens
            if tokens > self.max_tokens:
                self._remove(key)
            while len(self._kept) > self.max_sessions or self._tokens > self.max_tokens:
                self._remove(next(iter(self._kept)))

    def drop(self, user: str, session_id: str) -> None:
        """Forget a session's memory (its operation failed, or the session is gone)."""
        with self._lock:
            if (user, session_id) in self._kept:
                self._remove((user, session_id))

    def _remove(self, key: tuple[str, str]) -> None:
        self._tokens -= self._kept.pop(key).tokens
