"""Turning fact operations into rows, without I/O.

:func:`plan_changes` reads the operations and the facts currently open for
one user and returns the rows to insert and the rows to replace. Fact stores
then write both in one transaction, refusing a replacement whose stored row
is no longer open (a concurrent writer got there first).

Rules, in the order operations are given:

* ``FactAdd`` whose normalized (subject, text) matches an open fact is merged
  into it: the open fact gains the new source message ids and nothing else
  changes. Otherwise a new fact is inserted.
* ``FactUpdate`` ends its target at ``valid_from`` (reason, ``replaced_by``) and
  inserts the new version, or merges into an open duplicate of the new text.
* ``FactInvalidate`` ends its target at ``valid_to`` (reason, ``replaced_by``).
* An update or invalidation that names no open fact of this user is rejected,
  never guessed: nothing else is ended in its place.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from .model import Fact, FactAdd, FactInvalidate, FactOperation, FactUpdate

__all__ = ["FactChanges", "Rejected", "new_fact_id", "plan_changes"]


_COUNTER = itertools.count()


def new_fact_id() -> str:
    """A 32-hex-digit id that sorts in creation order: facts with equal times list as they were made."""
    return f"{time.time_ns():016x}{next(_COUNTER) & 0xFFFF:04x}{os.urandom(6).hex()}"


@dataclass(frozen=True, slots=True)
class Rejected:
    """An operation that could not apply, and why."""

    operation: FactOperation
    reason: str


@dataclass(slots=True)
class FactChanges:
    """Rows to write: ``added`` are new; ``changed`` replace stored rows that must still be open."""

    added: list[Fact] = field(default_factory=list)
    changed: list[Fact] = field(default_factory=list)
    merged: list[Fact] = field(default_factory=list)  # the open facts that absorbed a duplicate add
    rejected: list[Rejected] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.added and not self.changed


def _union(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*a, *b)))


def plan_changes(
    operations: Sequence[FactOperation],
    current: Sequence[Fact],
    *,
    user_id: str | None,
    session_id: str | None,
    now: datetime,
    message_times: Mapping[str, datetime] | None = None,
    new_id: Callable[[], str] = new_fact_id,
) -> FactChanges:
    """Resolve ``operations`` against ``current`` (the user's open facts). Pure; see the module docstring."""
    times = message_times or {}
    open_facts: dict[str, Fact] = {f.id: f for f in current if f.user_id == user_id and f.valid_to is None}
    by_key: dict[tuple[str, str], str] = {f.key: f.id for f in open_facts.values()}
    pending: dict[str, Fact] = {}  # id -> the row as it will be written
    inserted: set[str] = set()
    merged_ids: dict[str, None] = {}  # ordered, so results are deterministic
    changes = FactChanges()

    def when(explicit: datetime | None, sources: Sequence[str]) -> datetime:
        if explicit is not None:
            return explicit
        known = [times[m] for m in sources if m in times]
        return max(known) if known else now

    def put(fact: Fact) -> None:
        pending[fact.id] = fact
        if fact.valid_to is None:
            open_facts[fact.id] = fact
            by_key[fact.key] = fact.id
        else:
            open_facts.pop(fact.id, None)
            if by_key.get(fact.key) == fact.id:
                del by_key[fact.key]

    def add(op: FactAdd | FactUpdate, subject: str | None, start: datetime) -> Fact:
        fact = Fact(
            id=new_id(),
            user_id=user_id,
            text=op.text.strip(),
            valid_from=start,
            created_at=now,
            subject=subject,
            session_id=session_id,
            source_message_ids=op.source_message_ids,
            confidence=op.confidence,
            metadata=op.metadata,
        )
        duplicate = by_key.get(fact.key)
        if duplicate is not None:
            old = open_facts[duplicate]
            merged = replace(old, source_message_ids=_union(old.source_message_ids, op.source_message_ids))
            put(merged)
            merged_ids[merged.id] = None
            return merged
        inserted.add(fact.id)
        put(fact)
        return fact

    def end(target: Fact, at: datetime, reason: str, replaced_by: str | None, sources: Sequence[str]) -> None:
        put(
            replace(
                target,
                valid_to=max(at, target.valid_from),
                invalid_reason=reason,
                replaced_by=replaced_by,
                invalidated_by=tuple(sources),
            )
        )

    for op in operations:
        if isinstance(op, FactAdd):
            add(op, op.subject, when(op.valid_from, op.source_message_ids))
            continue
        target = open_facts.get(op.fact_id)
        if target is None:
            changes.rejected.append(Rejected(op, f"fact {op.fact_id!r} is not an open fact of this user"))
            continue
        if isinstance(op, FactUpdate):
            start = when(op.valid_from, op.source_message_ids)
            subject = op.subject if op.subject is not None else target.subject
            probe = Fact("probe", user_id, op.text, start, now, subject=subject)
            if probe.key == target.key:  # an update that restates the fact only adds provenance
                put(replace(target, source_message_ids=_union(target.source_message_ids, op.source_message_ids)))
                merged_ids[target.id] = None
                continue
            end(target, start, op.reason, None, op.source_message_ids)
            successor = add(op, subject, start)
            put(replace(pending[target.id], replaced_by=successor.id))
        elif isinstance(op, FactInvalidate):
            if op.replaced_by is not None and op.replaced_by not in open_facts:
                changes.rejected.append(Rejected(op, f"replaced_by {op.replaced_by!r} is not an open fact"))
                continue
            if op.replaced_by == op.fact_id:
                changes.rejected.append(Rejected(op, "a fact cannot replace itself"))
                continue
            end(target, when(op.valid_to, op.source_message_ids), op.reason, op.replaced_by, op.source_message_ids)
    for fact_id, fact in pending.items():
        (changes.added if fact_id in inserted else changes.changed).append(fact)
    changes.merged = [pending[i] for i in merged_ids if pending[i].valid_to is None]
    return changes
