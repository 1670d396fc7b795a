"""What ``Facts`` and ``AsyncFacts`` do, written once as generators of effects.

Like the memory's flows (:mod:`convmem.memory._flows`), each operation is a
generator that makes every decision and yields the I/O it needs: :class:`ReadOpen`
(the user's open facts), :class:`Propose` (ask the extractor) and :class:`Write`
(insert and end rows in one transaction). ``Facts`` performs the effects with
:func:`convmem._effects.drive`, ``AsyncFacts`` awaits them with
:func:`~convmem._effects.adrive`; an effect that fails is thrown back into the
generator, so the retry on a concurrent writer's ``ConflictError`` is also
written once. The twins keep only their signatures::

    apply    ReadOpen -> plan the operations against the open facts -> Write (strict: nothing if any is rejected)
    extract  ReadOpen -> Propose (the extractor) -> plan -> Write; a ConflictError: read and plan once more
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ...errors import ConflictError, LLMError
from ...messages import Message, StoredMessage
from ._plan import FactChanges, Rejected, plan_changes
from .model import Fact, FactAdd, FactInvalidate, FactOperation, FactUpdate

__all__ = [
    "Effect",
    "Flow",
    "Propose",
    "ReadOpen",
    "Write",
    "apply_flow",
    "extract_flow",
    "extractor_failure",
    "single",
    "sink_messages",
]

EXTRACT_ROLES = frozenset({"user", "assistant"})
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class ReadOpen:
    """Read the user's open facts."""

    user_id: str | None


@dataclass(frozen=True, slots=True)
class Propose:
    """Ask the extractor for operations on ``messages``, given the open facts."""

    messages: Sequence[Message]
    current: Sequence[Fact]
    user_id: str | None


@dataclass(frozen=True, slots=True)
class Write:
    """Insert ``added`` and replace ``changed``, all or nothing (ConflictError if a changed row is no longer open)."""

    added: Sequence[Fact]
    changed: Sequence[Fact]


Effect = ReadOpen | Propose | Write
Flow = Generator[Effect, Any, _R]


def _plan(
    operations: Sequence[FactOperation],
    current: Sequence[Fact],
    *,
    user_id: str | None,
    session_id: str | None,
    messages: Sequence[Message],
    now: datetime,
) -> FactChanges:
    times = {m.id: m.created_at for m in messages if m.id is not None and m.created_at is not None}
    return plan_changes(operations, current, user_id=user_id, session_id=session_id, now=now, message_times=times)


def apply_flow(
    operations: Sequence[FactOperation],
    *,
    user_id: str | None,
    session_id: str | None,
    messages: Sequence[Message],
    strict: bool,
    now: datetime,
) -> Flow[FactChanges]:
    """Apply operations in one write; ``strict`` refuses all of them if any is rejected."""
    current = yield ReadOpen(user_id)
    changes = _plan(operations, current, user_id=user_id, session_id=session_id, messages=messages, now=now)
    if strict and changes.rejected:
        raise ConflictError(changes.rejected[0].reason)
    if not changes.empty:
        yield Write(changes.added, changes.changed)
    return changes


def extract_flow(
    messages: Sequence[Message], *, user_id: str | None, session_id: str | None, now: Callable[[], datetime]
) -> Flow[FactChanges]:
    """Ask the extractor and apply what it proposes; bad operations are skipped, never redirected."""
    if not messages:
        return FactChanges()
    for attempt in range(2):  # one retry: a concurrent writer may have ended a fact we planned against
        current = yield ReadOpen(user_id)
        proposed = yield Propose(messages, current, user_id)
        operations, refused = checked_proposal(proposed)
        changes = _plan(operations, current, user_id=user_id, session_id=session_id, messages=messages, now=now())
        changes.rejected[:0] = refused
        if changes.empty:
            return changes
        try:
            yield Write(changes.added, changes.changed)
        except ConflictError:
            if attempt:
                raise
            continue
        return changes
    raise AssertionError("unreachable")


def checked_proposal(proposed: object) -> tuple[list[FactOperation], list[Rejected]]:
    """An extractor's answer checked like user input before anything is planned or stored: a list of operations
    (each already checked when it was built: text, size, times), anything else in it rejected with the reason.

    Raises:
        LLMError: the answer is not a list or tuple of operations at all (nothing is written).
    """
    if not isinstance(proposed, (list, tuple)):
        raise LLMError(f"fact extractor returned {type(proposed).__name__}, not a list of fact operations")
    operations: list[FactOperation] = []
    refused: list[Rejected] = []
    for item in proposed:
        if isinstance(item, (FactAdd, FactUpdate, FactInvalidate)):
            operations.append(item)
        else:
            refused.append(Rejected(item, f"not a fact operation: {type(item).__name__}"))
    return operations, refused


def extractor_failure(exc: Exception) -> LLMError:
    """An extractor's unexpected failure, as the LLMError every extractor must raise."""
    return LLMError(f"fact extractor failed: {type(exc).__name__}: {exc}")


def single(changes: FactChanges, op: FactOperation) -> Fact:
    """The fact a single direct operation produced; raises ConflictError if it was rejected."""
    if changes.rejected:
        raise ConflictError(changes.rejected[0].reason)
    if isinstance(op, FactInvalidate):
        return next(f for f in changes.changed if f.id == op.fact_id)
    if changes.added:
        return changes.added[-1]
    return changes.merged[-1]


def sink_messages(units: Sequence[Sequence[StoredMessage]]) -> list[Message]:
    """The evicted messages an extractor reads: user and assistant text (tool plumbing carries no facts)."""
    return [s.message for unit in units for s in unit if s.message.role in EXTRACT_ROLES and s.message.text.strip()]
