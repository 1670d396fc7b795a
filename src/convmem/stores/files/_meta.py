"""The small per-session record of the file store (``session.json``) and how it catches up with its messages.

``session.json`` holds the session's info, its state, and counters (message
count, tokens, next seq, the offsets of pinned lines) *as of a byte offset*
of ``messages.jsonl`` (``synced``). Appends only add lines; the record is
rewritten now and then (every state save, and every ``sync_every`` bytes of
appends). Whoever reads the record brings it up to date by scanning the few
lines after ``synced``, so a crash between the two writes loses nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...messages import PINNED_ROLES
from ...session import SessionState
from .._record import SessionRecord, plain_record
from ..codec import READ_ERRORS, corrupt, decode_datetime, decode_state, encode_datetime, encode_state, loads
from ._jsonl import Line, LineFile, atomic_write

__all__ = ["BACKEND", "Meta", "read_meta", "write_meta"]

BACKEND = "file store"


@dataclass
class Meta:
    id: str
    user_id: str | None
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    fork_seq: int | None = None
    base_count: int = 0
    base_tokens: int = 0
    deleted: bool = False
    synced: int = 0
    count: int = 0
    tokens: int = 0
    next_seq: int = 0
    pinned: list[tuple[int, int]] = field(default_factory=list)  # (seq, byte offset) of pinned lines
    indexed: int = 0  # how far into messages.jsonl the id index is complete (see _fileids)
    state: SessionState = field(default_factory=SessionState)

    def record(self) -> SessionRecord:
        """This record as every backend decodes its sessions (the record is keyed by the plain session id)."""
        return plain_record(BACKEND, self, self.count)

    @classmethod
    def of(cls, made: SessionRecord) -> Meta:
        """The record of a new session (a fork or an import) before any of its lines is written."""
        info = made.info()
        return cls(
            info.id,
            info.user_id,
            info.created_at,
            info.updated_at,
            info.title,
            info.model,
            dict(info.metadata),
            info.parent_id,
            info.fork_seq,
            made.base_count,
            made.base_tokens,
            next_seq=made.next_seq,
            state=made.state(),
        )

    def caught_up(self, lines: LineFile) -> tuple[Meta, list[Line]]:
        """This record brought up to date with the complete lines appended after ``synced``."""
        tail, end = lines.scan(self.synced)
        if not tail:
            return self, tail
        mtime = datetime.fromtimestamp(os.stat(lines.path).st_mtime_ns / 1e9, timezone.utc)
        return replace(
            self,
            synced=end,
            count=self.count + len(tail),
            tokens=self.tokens + sum(t.tokens for t in tail),
            next_seq=max(self.next_seq, tail[-1].seq + 1),
            updated_at=max(self.updated_at, mtime),
            pinned=self.pinned + [(t.seq, t.offset) for t in tail if t.role in PINNED_ROLES],
        ), tail

    def recounted(self, lines: LineFile) -> Meta:
        """This record with every counter recomputed from the whole file (after a rewrite)."""
        return replace(self, synced=0, count=0, tokens=0, pinned=[]).caught_up(lines)[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "title": self.title,
            "model": self.model,
            "metadata": self.metadata,
            "created_at": encode_datetime(self.created_at),
            "updated_at": encode_datetime(self.updated_at),
            "parent_id": self.parent_id,
            "fork_seq": self.fork_seq,
            "base_count": self.base_count,
            "base_tokens": self.base_tokens,
            "deleted": self.deleted,
            "synced": self.synced,
            "count": self.count,
            "tokens": self.tokens,
            "next_seq": self.next_seq,
            "pinned": [list(p) for p in self.pinned],
            "indexed": self.indexed,
            "state": encode_state(self.state, with_version=True),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Meta:
        ints = ("base_count", "base_tokens", "synced", "count", "tokens", "next_seq")
        for name in ints:
            if not isinstance(value[name], int) or isinstance(value[name], bool):
                raise ValueError(f"{name} must be an integer")
        return cls(
            id=str(value["id"]),
            user_id=value["user_id"],
            title=value["title"],
            model=value["model"],
            metadata=dict(value["metadata"]),
            created_at=decode_datetime(value["created_at"]),
            updated_at=decode_datetime(value["updated_at"]),
            parent_id=value["parent_id"],
            fork_seq=value["fork_seq"],
            deleted=bool(value["deleted"]),
            pinned=[(int(seq), int(offset)) for seq, offset in value["pinned"]],
            indexed=int(value.get("indexed", 0)),
            state=decode_state(value["state"]),
            **{name: value[name] for name in ints},
        )


def read_meta(path: Path) -> Meta | None:
    """The record at ``path``, None if there is none; StoreError (naming the file) if it is damaged."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return Meta.from_json(loads(text))
    except READ_ERRORS as exc:
        raise corrupt(
            "file store", path.parent.name, None, f"{path} is corrupt: {exc}; convmem left it untouched"
        ) from None


def write_meta(path: Path, meta: Meta, *, durable: bool = True) -> None:
    atomic_write(path, json.dumps(meta.to_json(), ensure_ascii=False, indent=1).encode() + b"\n", durable=durable)
