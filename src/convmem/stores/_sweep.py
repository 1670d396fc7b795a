"""Retention of sessions: a sweep erases the sessions a :class:`Retention` no longer allows, with ``forget``.

A session goes when it was not updated for ``max_age``, or when it is not among the user's
``max_sessions`` most recently updated. It goes with everything ``forget`` takes of a session (its
messages, state, summary, the facts learnt in it, its recall documents), never with a fork that is
kept: a session one of whose forks stays is kept too (the fork reads its history). The receipt is
the sum of the erasures, in the same form as ``forget``'s.

Known limit: the listing shows live sessions only, so a kept fork whose parent was deleted (hidden, kept
for the fork) does not protect that parent's own parent; sweeping the grandparent then takes the fork.

Example::

    receipt = sweep(store, user_id="alice", policy=Retention(max_age=timedelta(days=30)))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..errors import ConfigurationError
from ..session import SessionInfo
from ._forget import KINDS, ForgetReceipt
from ._writes import now as utc_now

__all__ = ["Retention", "doomed", "sweep"]


@dataclass(frozen=True, slots=True)
class Retention:
    """How long, and how many, sessions a user keeps (None: no limit of that kind)."""

    max_age: timedelta | None = None
    max_sessions: int | None = None

    def __post_init__(self) -> None:
        if self.max_age is not None and self.max_age <= timedelta(0):
            raise ConfigurationError(f"max_age must be positive, got {self.max_age}")
        if self.max_sessions is not None and self.max_sessions < 0:
            raise ConfigurationError(f"max_sessions must be 0 or more, got {self.max_sessions}")


def doomed(sessions: Sequence[SessionInfo], policy: Retention, at: datetime) -> list[str]:
    """The ids of the sessions ``policy`` no longer allows at ``at``, less those a kept fork still reads."""
    newest = sorted(sessions, key=lambda s: (s.updated_at, s.id), reverse=True)
    out = set()
    for rank, info in enumerate(newest):
        too_old = policy.max_age is not None and at - info.updated_at > policy.max_age
        too_many = policy.max_sessions is not None and rank >= policy.max_sessions
        if too_old or too_many:
            out.add(info.id)
    parents = {s.id: s.parent_id for s in sessions}
    for info in sessions:  # a kept fork keeps every session whose history it reads
        if info.id not in out:
            parent = info.parent_id
            while parent is not None:
                out.discard(parent)
                parent = parents.get(parent)
    return sorted(out)


def sweep(store: Any, *, user_id: str | None, policy: Retention, now: datetime | None = None) -> ForgetReceipt:
    """Erase the user's sessions ``policy`` no longer allows (see the module docstring); one receipt for all."""
    listed = store.list_sessions(user_id=user_id)
    counts = dict.fromkeys(KINDS, 0)
    erased: list[str] = []
    pending = compact = ""
    for session_id in doomed(listed, policy, now or utc_now()):
        if session_id in erased:
            continue  # went with the session it forks from
        receipt = store.forget(user_id=user_id, session_id=session_id)
        for kind, n in receipt.removed.items():
            counts[kind] += n
        erased += receipt.sessions
        pending, compact = receipt.pending or pending, receipt.compact or compact
    return ForgetReceipt(user_id, None, counts, tuple(sorted(set(erased))), pending=pending, compact=compact)
