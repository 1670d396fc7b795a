"""A client's long-term memory: ``client.facts`` and ``client.blocks``, sync and async.

What comes in: a client (its user, and how it sends). What happens: each method
is one call of :mod:`convmem.client._longterm`, sent through the client (so it
is retried when that is safe), its answer read back into the library's types.
What goes out: ``Fact`` and ``BlockRecord``, as ``Facts`` and a block store give
them in process. The facts and blocks are the client's user's, the same ones the
service puts into every context of that user's sessions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from ..longterm.blocks.store import BlockRecord
from ..longterm.facts.model import Fact
from ._core import Call
from ._longterm import block_call, block_of, fact_add_call, fact_invalidate_call, fact_of, fact_update_call, facts_call

__all__ = ["AsyncClientBlocks", "AsyncClientFacts", "ClientBlocks", "ClientFacts"]

Send = Callable[[Call], Any]
AsyncSend = Callable[[Call], Awaitable[Any]]
Position = Literal["system", "user"]


def _add_fields(
    subject: str | None,
    source_message_ids: Sequence[str],
    valid_from: datetime | None,
    session_id: str | None,
    confidence: float | None,
    metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "subject": subject,
        "source_message_ids": list(source_message_ids),
        "valid_from": valid_from,
        "session_id": session_id,
        "confidence": confidence,
        "metadata": dict(metadata) if metadata else None,
    }


def _put_body(
    value: str,
    expected_version: int,
    priority: int | None,
    max_tokens: int | None,
    position: Position | None,
    description: str | None,
) -> dict[str, Any]:
    return {
        "value": value,
        "expected_version": expected_version,
        "priority": priority,
        "max_tokens": max_tokens,
        "position": position,
        "description": description,
    }


class ClientFacts:
    """The user's facts on the service (``client.facts``), as :class:`~convmem.longterm.Facts` offers them."""

    def __init__(self, send: Send, params: Callable[[], dict[str, Any]]) -> None:
        self._send, self._params = send, params

    def facts(self, *, valid_at: datetime | None = None) -> list[Fact]:
        """The facts that hold now (or at ``valid_at``)."""
        return [fact_of(f) for f in self._send(facts_call(self._params(), valid_at=valid_at, history=False))]

    def history(self) -> list[Fact]:
        """Every fact ever recorded, ended ones included."""
        return [fact_of(f) for f in self._send(facts_call(self._params(), valid_at=None, history=True))]

    def add(
        self,
        text: str,
        *,
        subject: str | None = None,
        source_message_ids: Sequence[str] = (),
        valid_from: datetime | None = None,
        session_id: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact:
        """Record a fact; a duplicate of an open fact is merged into it (and returned)."""
        fields = _add_fields(subject, source_message_ids, valid_from, session_id, confidence, metadata)
        return fact_of(self._send(fact_add_call(self._params(), text, fields)))

    def update(self, fact_id: str, text: str, *, subject: str | None = None, reason: str = "updated") -> Fact:
        """End ``fact_id`` and record its new version (returned)."""
        return fact_of(self._send(fact_update_call(self._params(), fact_id, text, subject, reason)))

    def invalidate(self, fact_id: str, *, reason: str, replaced_by: str | None = None) -> Fact:
        """End ``fact_id`` (returned with its ``valid_to``); nothing is deleted."""
        return fact_of(self._send(fact_invalidate_call(self._params(), fact_id, reason, replaced_by)))


class ClientBlocks:
    """The user's working blocks on the service (``client.blocks``); every write names the version it read."""

    def __init__(self, send: Send, params: Callable[[], dict[str, Any]], user_id: str | None) -> None:
        self._send, self._params, self._user = send, params, user_id

    def list_blocks(self) -> list[BlockRecord]:
        return [block_of(b, self._user) for b in self._send(block_call(self._params(), "GET"))]

    def get(self, name: str) -> BlockRecord:
        """The block; a ``ServiceError`` (404) if the user has none of that name."""
        return block_of(self._send(block_call(self._params(), "GET", name)), self._user)

    def put(
        self,
        name: str,
        value: str,
        *,
        expected_version: int,
        priority: int | None = None,
        max_tokens: int | None = None,
        position: Position | None = None,
        description: str | None = None,
    ) -> BlockRecord:
        """Create the block (``expected_version`` 0) or replace its value; settings not given stay as they are."""
        body = _put_body(value, expected_version, priority, max_tokens, position, description)
        return block_of(self._send(block_call(self._params(), "PUT", name, body)), self._user)

    def append(self, name: str, text: str, *, expected_version: int) -> BlockRecord:
        body = {"op": "append", "text": text, "expected_version": expected_version}
        return block_of(self._send(block_call(self._params(), "EDIT", name, body)), self._user)

    def replace(self, name: str, old: str, new: str, *, expected_version: int) -> BlockRecord:
        """Replace the one occurrence of ``old`` by ``new``."""
        body = {"op": "replace", "old": old, "new": new, "expected_version": expected_version}
        return block_of(self._send(block_call(self._params(), "EDIT", name, body)), self._user)


class AsyncClientFacts:
    """The async twin of :class:`ClientFacts` (``async_client.facts``)."""

    def __init__(self, send: AsyncSend, params: Callable[[], dict[str, Any]]) -> None:
        self._send, self._params = send, params

    async def facts(self, *, valid_at: datetime | None = None) -> list[Fact]:
        return [fact_of(f) for f in await self._send(facts_call(self._params(), valid_at=valid_at, history=False))]

    async def history(self) -> list[Fact]:
        return [fact_of(f) for f in await self._send(facts_call(self._params(), valid_at=None, history=True))]

    async def add(
        self,
        text: str,
        *,
        subject: str | None = None,
        source_message_ids: Sequence[str] = (),
        valid_from: datetime | None = None,
        session_id: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact:
        fields = _add_fields(subject, source_message_ids, valid_from, session_id, confidence, metadata)
        return fact_of(await self._send(fact_add_call(self._params(), text, fields)))

    async def update(self, fact_id: str, text: str, *, subject: str | None = None, reason: str = "updated") -> Fact:
        return fact_of(await self._send(fact_update_call(self._params(), fact_id, text, subject, reason)))

    async def invalidate(self, fact_id: str, *, reason: str, replaced_by: str | None = None) -> Fact:
        return fact_of(await self._send(fact_invalidate_call(self._params(), fact_id, reason, replaced_by)))


class AsyncClientBlocks:
    """The async twin of :class:`ClientBlocks` (``async_client.blocks``)."""

    def __init__(self, send: AsyncSend, params: Callable[[], dict[str, Any]], user_id: str | None) -> None:
        self._send, self._params, self._user = send, params, user_id

    async def list_blocks(self) -> list[BlockRecord]:
        return [block_of(b, self._user) for b in await self._send(block_call(self._params(), "GET"))]

    async def get(self, name: str) -> BlockRecord:
        return block_of(await self._send(block_call(self._params(), "GET", name)), self._user)

    async def put(
        self,
        name: str,
        value: str,
        *,
        expected_version: int,
        priority: int | None = None,
        max_tokens: int | None = None,
        position: Position | None = None,
        description: str | None = None,
    ) -> BlockRecord:
        body = _put_body(value, expected_version, priority, max_tokens, position, description)
        return block_of(await self._send(block_call(self._params(), "PUT", name, body)), self._user)

    async def append(self, name: str, text: str, *, expected_version: int) -> BlockRecord:
        body = {"op": "append", "text": text, "expected_version": expected_version}
        return block_of(await self._send(block_call(self._params(), "EDIT", name, body)), self._user)

    async def replace(self, name: str, old: str, new: str, *, expected_version: int) -> BlockRecord:
        body = {"op": "replace", "old": old, "new": new, "expected_version": expected_version}
        return block_of(await self._send(block_call(self._params(), "EDIT", name, body)), self._user)
