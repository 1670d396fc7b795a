"""The in-memory store's data: a session's rows, sorted by seq, and the session itself.

:class:`SessionData` is what :class:`~convmem.stores.memory.MemoryStore` keeps
per session (its rows, its pinned rows, its id index, its state); it decodes
into a :class:`~convmem.stores._record.SessionRecord` like every backend's
session row, and a fork or an import starts one from a record.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..messages import PINNED_ROLES, StoredMessage
from ..session import SessionState
from ._record import SessionRecord, plain_record

__all__ = ["BACKEND", "Rows", "SessionData"]

BACKEND = "memory"


@dataclass(eq=False)
class Rows:
    """Sorted rows and their seqs, so that ranges are found by bisection."""

    seqs: list[int] = field(default_factory=list)
    rows: list[StoredMessage] = field(default_factory=list)

    def add(self, row: StoredMessage) -> None:
        self.seqs.append(row.seq)
        self.rows.append(row)

    def between(self, lo: int, hi: int) -> list[StoredMessage]:
        return self.rows[bisect_left(self.seqs, lo) : bisect_right(self.seqs, hi)]

    def drop(self, doomed: set[int]) -> list[StoredMessage]:
        gone = [r for r in self.rows if r.seq in doomed]
        self.rows = [r for r in self.rows if r.seq not in doomed]
        self.seqs = [r.seq for r in self.rows]
        return gone


@dataclass(eq=False)
class SessionData:
    id: str
    user_id: str | None
    model: str | None
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    fork_seq: int | None = None
    base_count: int = 0
    base_tokens: int = 0
    all: Rows = field(default_factory=Rows)
    pinned: Rows = field(default_factory=Rows)
    next_seq: int = 0
    tokens: int = 0
    state: SessionState = field(default_factory=SessionState)
    deleted: bool = False  # hidden; rows kept only while forks share them
    children: set[str] = field(default_factory=set)
    ids: dict[str, int] = field(default_factory=dict)  # message id -> seq, of the session's own rows

    def record(self) -> SessionRecord:
        return plain_record(BACKEND, self, len(self.all.rows))

    @classmethod
    def of(cls, record: SessionRecord) -> SessionData:
        """A new session as ``record`` describes it (a fork or an import), without rows yet."""
        info = record.info()
        return cls(
            info.id,
            info.user_id,
            info.model,
            info.created_at,
            info.updated_at,
            info.title,
            dict(info.metadata),
            info.parent_id,
            info.fork_seq,
            record.base_count,
            record.base_tokens,
            next_seq=record.next_seq,
            state=record.state(),
        )

    def add(self, row: StoredMessage) -> None:
        self.all.add(row)
        if row.message.role in PINNED_ROLES:
            self.pinned.add(row)
        self.tokens += row.tokens
        self.ids[row.message.id or ""] = row.seq
