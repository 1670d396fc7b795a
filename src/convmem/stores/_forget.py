"""Erasure: what ``forget`` takes away, and the receipt that says so.

``forget`` erases one user, or one session with every fork that reads its history, everywhere a
store keeps anything derived from it: the sessions (their state, running summary and usage stats
live in the session record), the messages of every session and fork, the facts learnt in those
sessions (deleted, not ended: ending keeps the text), the user's working blocks (every version
the backend keeps), the recall documents with their lexical index entries and vectors. A backend
does it in one transaction (SQLite, PostgreSQL), one script per key set (Redis) or under the
session locks (files), so a writer that still holds a view of an erased session gets
:class:`~convmem.errors.SessionLostError` on its next append, never a half-created session.

Deleting is not yet gone from disk: SQLite keeps freed pages and FTS5 keeps deleted terms in its
segments, PostgreSQL keeps dead tuples. The receipt names what is left (``pending``) and
``compact`` (``convmem compact`` on the command line) clears it; ``forget(..., compact=True)``
does both at once. A second ``forget`` of the same scope removes nothing and says so: it is
idempotent.

Example::

    receipt = store.forget(user_id="alice", compact=True)
    receipt.removed["messages"]        # how many messages went
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, runtime_checkable

__all__ = ["KINDS", "ForgetReceipt", "Forgetting", "descendants", "in_sessions"]

# What a receipt counts, in the order it lists them.
KINDS = ("sessions", "messages", "facts", "blocks", "recall_docs", "vectors")


@dataclass(frozen=True, slots=True)
class ForgetReceipt:
    """What one ``forget`` (or sweep) removed, per kind, and what storage still holds until compaction.

    Attributes:
        user_id: whose data.
        session_id: the session erased with its forks (None: the whole user).
        removed: kind -> how many were removed (every kind of :data:`KINDS` is present).
        sessions: the ids of the sessions erased (forks included).
        pending: what the storage still holds of it until compaction, in words ("" when nothing).
        compact: the command that clears ``pending`` ("" when nothing is pending).
        compacted: whether the compaction already ran as part of this call.
    """

    user_id: str | None
    session_id: str | None
    removed: Mapping[str, int]
    sessions: tuple[str, ...] = ()
    pending: str = ""
    compact: str = ""
    compacted: bool = False

    def __post_init__(self) -> None:
        counts = {kind: int(self.removed.get(kind, 0)) for kind in KINDS}
        object.__setattr__(self, "removed", MappingProxyType(counts))

    @classmethod
    def made(
        cls,
        user_id: str | None,
        session_id: str | None,
        counts: Mapping[str, int],
        erased: Iterable[str],
        *,
        compacted: bool,
        pending: str = "",
        command: str = "",
    ) -> ForgetReceipt:
        """A backend's receipt: what its storage still holds (``pending``) and the ``command`` that clears it are
        kept only when something was removed and the compaction did not already run."""
        left = bool(pending) and any(counts.values()) and not compacted
        return cls(
            user_id,
            session_id,
            counts,
            tuple(erased),
            pending=pending if left else "",
            compact=command if left else "",
            compacted=compacted,
        )

    @property
    def total(self) -> int:
        """Everything removed, all kinds together (0: nothing was left to erase)."""
        return sum(self.removed.values())

    def as_dict(self) -> dict[str, object]:
        """The receipt as JSON-ready data (the CLI and the service print this); it holds no content."""
        return {
            "user_id": self.user_id,
            "session_id": self.session_id,
            "removed": dict(self.removed),
            "sessions": list(self.sessions),
            "pending": self.pending,
            "compact": self.compact,
            "compacted": self.compacted,
        }


@runtime_checkable
class Forgetting(Protocol):
    """A store that can erase (every built-in backend)."""

    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase the user, or the session (a unique id prefix) with its forks; see the module docstring.

        A session that does not exist (or no longer does) erases nothing: the receipt counts zeros.
        """
        ...

    def compact(self) -> None:
        """Rewrite storage so that nothing erased remains in it (see each backend's ``pending``)."""
        ...


def descendants(root: str, parents: Iterable[tuple[str, str | None]]) -> list[str]:
    """``root`` and every session that forks from it, transitively, deepest first.

    ``parents`` gives (session key, parent key) pairs; the order returned removes each fork before
    the session it reads, so a parent never has to be hidden to keep rows for a fork that is going too.
    """
    children: dict[str, list[str]] = {}
    for key, parent in parents:
        if parent is not None:
            children.setdefault(parent, []).append(key)
    order: list[str] = []
    depth: dict[str, int] = {root: 0}
    stack = [root]
    while stack:
        key = stack.pop()
        order.append(key)
        for child in children.get(key, ()):
            if child not in depth:  # a cycle cannot be stored, but a damaged store must not loop
                depth[child] = depth[key] + 1
                stack.append(child)
    return sorted(order, key=lambda k: -depth[k])


def in_sessions(session_id: str | None, erased: Collection[str] | None) -> bool:
    """Whether a fact or document of ``session_id`` goes with ``erased`` (None: the whole user goes)."""
    return erased is None or (session_id is not None and session_id in erased)
