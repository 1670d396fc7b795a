"""The one memory protocol: what a conversation's memory offers, in process or over the service.

What comes in: nothing; this module only names a contract. What it says: the
calls an app (or an adapter of :mod:`convmem.integrations`) makes on one
session's memory, and which every memory keeps::

    MemoryLike        Memory (in process)      Client (a convmem service)
    AsyncMemoryLike   AsyncMemory              AsyncClient

So code written against :class:`MemoryLike` runs on a local store or on the
service unchanged; ``tests/test_memory_protocol.py`` checks that each class
satisfies its protocol, signature by signature.

A twin's reads that need no I/O differ by kind: ``AsyncMemory.stats()`` and its
``budget`` are plain reads, while the async client must await the service for
them, so :class:`AsyncMemoryLike` names only what both async memories await.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from ..messages import Message
from ..policy.context import Context
from ..usage import Stats, Usage

__all__ = ["AsyncMemoryLike", "MemoryLike"]


@runtime_checkable
class MemoryLike(Protocol):
    """A session's memory with a synchronous API: :class:`~convmem.Memory` and :class:`~convmem.Client`.

    Attributes:
        session_id: the session's id.
        user_id: the user the session belongs to (None: the anonymous user).
        model: the model the session counts for, if any.
    """

    session_id: str
    user_id: str | None
    model: str | None

    @property
    def budget(self) -> int:
        """The budget of a request and its reply, in tokens."""
        ...

    @property
    def reserved_output(self) -> int:
        """The tokens kept free for the reply."""
        ...

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of the newest assistant message's calls that still await results."""
        ...

    def add(self, message: Any) -> Message:
        """Add one message; its id is its idempotency key (a retry stores nothing)."""
        ...

    def add_many(self, messages: Iterable[Any]) -> list[Message]:
        """Add a batch in one write: all of it is stored, or nothing."""
        ...

    def add_response(self, response: Any) -> list[Message]:
        """Store a provider's reply and record its usage."""
        ...

    def context(self, input: Any = None, *, format: str | None = None) -> Context:
        """The messages for the next request, within the budget, with an account of them."""
        ...

    def messages(self, status: Any = None) -> list[Message]:
        """Every stored message, oldest first, optionally only those of the given status(es)."""
        ...

    def clear(self, *, keep_system: bool = True) -> None:
        """Archive the whole window (nothing is deleted)."""
        ...

    def refresh(self) -> None:
        """Catch up with what other writers stored in the session."""
        ...

    def rollback_incomplete(self) -> list[Message]:
        """Delete a trailing tool call that lacks results; returns what was removed."""
        ...

    def repair(self) -> list[Message]:
        """Answer unanswered trailing tool calls with marked synthetic results."""
        ...

    def record_usage(self, usage: Any) -> Usage:
        """Add a provider's usage to the stats and the cost."""
        ...

    def stats(self) -> Stats:
        """The running figures of the session."""
        ...


@runtime_checkable
class AsyncMemoryLike(Protocol):
    """A session's memory with an async API: :class:`~convmem.AsyncMemory` and :class:`~convmem.AsyncClient`.

    The calls of :class:`MemoryLike`, awaited; the reads without I/O are left out (see the module docstring).
    """

    session_id: str
    user_id: str | None
    model: str | None

    async def add(self, message: Any) -> Message: ...

    async def add_many(self, messages: Iterable[Any]) -> list[Message]: ...

    async def add_response(self, response: Any) -> list[Message]: ...

    async def context(self, input: Any = None, *, format: str | None = None) -> Context: ...

    async def messages(self, status: Any = None) -> list[Message]: ...

    async def clear(self, *, keep_system: bool = True) -> None: ...

    async def refresh(self) -> None: ...

    async def rollback_incomplete(self) -> list[Message]: ...

    async def repair(self) -> list[Message]: ...

    async def record_usage(self, usage: Any) -> Usage: ...
