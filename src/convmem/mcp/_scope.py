"""One user's long-term memory over one store: what the MCP tools call, with no MCP in it.

Every operation is scoped to ``user_id``: sessions, facts, working blocks and recall
of other users are invisible (a session of another user is "not found"). Results are
plain JSON-able dicts, so the MCP layer only registers and serializes.

The long-term stores are the session store's own (``SQLiteFactStore(store)`` and so
on), so facts and blocks an agent writes here are the ones a ``Memory`` with
``FactsBlock`` / ``WorkingBlock`` over the same store renders.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from .. import stores
from ..errors import ConfigurationError, ConflictError
from ..formats import FORMATS
from ..longterm import Facts, MemoryBlockStore, MemoryFactStore, WorkingBlock
from ..longterm.blocks.store import BlockRecord, BlockStore
from ..longterm.facts.model import Fact
from ..memory import Memory
from ..memory.options import stored_config
from ..session import SessionState
from ..stores.base import SessionStore

__all__ = ["DEFAULT_MAX_TOKENS", "BlockEdit", "UserScope"]

DEFAULT_MAX_TOKENS = 128_000  # the context of a session saved with neither a model nor a budget
BlockEdit = Literal["update", "append", "replace"]
_BACKENDS = {"SQLiteStore": "SQLite", "FileStore": "File", "PostgresStore": "Postgres", "RedisStore": "Redis"}


class UserScope:
    """The memory of ``user_id`` in ``store`` (see the module docstring)."""

    def __init__(self, store: SessionStore, user_id: str) -> None:
        if not user_id:
            raise ConfigurationError("the MCP server needs a user id (--user); it serves one user")
        self.store, self.user_id = store, user_id
        backend = _BACKENDS.get(type(store).__name__)
        longterm: Callable[[str], Any] = lambda kind: getattr(stores, f"{backend}{kind}Store")(store)  # noqa: E731
        self.blocks: BlockStore = longterm("Block") if backend else MemoryBlockStore()
        self.facts = Facts(longterm("Fact") if backend else MemoryFactStore())
        self._recall_store = longterm("Recall") if backend else None
        self._recall: Any = None
        self._indexed: dict[str, int] = {}  # session id -> last seq indexed in this process

    # -- recall -------------------------------------------------------------------------------
    def recall(self, query: str, k: int, session_id: str | None) -> list[dict[str, Any]]:
        index = self._index()
        hits = index.search(query, user_id=self.user_id, k=k, session_id=session_id)
        return [
            {
                "text": hit.doc.text,
                "role": hit.doc.role,
                "session_id": hit.doc.session_id,
                "seq": hit.doc.seq,
                "said_at": hit.doc.created_at.isoformat() if hit.doc.created_at else None,
                "score": round(hit.score, 4),
            }
            for hit in hits
        ]

    def _index(self) -> Any:
        """The user's recall index, with every stored message of every session indexed (incrementally)."""
        if self._recall is None:
            from ..longterm.recall.index import RecallIndex  # needs numpy: imported on first search

            self._recall = RecallIndex(store=self._recall_store)
        for info in self.store.list_sessions(user_id=self.user_id):
            start = self._indexed.get(info.id, -1) + 1
            fresh = list(self.store.messages(info.id, user_id=self.user_id, from_seq=start))
            if fresh:
                self._recall.add_messages(fresh, session_id=info.id, user_id=self.user_id)
                self._indexed[info.id] = fresh[-1].seq
        return self._recall

    # -- facts --------------------------------------------------------------------------------
    def list_facts(self, include_ended: bool) -> list[dict[str, Any]]:
        found = self.facts.history(user_id=self.user_id) if include_ended else self.facts.facts(user_id=self.user_id)
        return [_fact(f) for f in found]

    def add_fact(self, text: str, subject: str | None) -> dict[str, Any]:
        return _fact(self.facts.add(text, user_id=self.user_id, subject=subject))

    def invalidate_fact(self, fact_id: str, reason: str, replaced_by: str | None) -> dict[str, Any]:
        return _fact(self.facts.invalidate(fact_id, reason=reason, user_id=self.user_id, replaced_by=replaced_by))

    # -- working blocks -----------------------------------------------------------------------
    def read_block(self, name: str) -> dict[str, Any]:
        record = self.blocks.load_block(self.user_id, name)
        if record is None:
            names = [r.name for r in self.blocks.list_blocks(self.user_id)]
            raise ConfigurationError(f"no working block named {name!r}; this user has: {names or 'none'}")
        return {"name": record.name, "value": record.value, "version": record.version, "max_tokens": record.max_tokens}

    def list_blocks(self) -> list[dict[str, Any]]:
        return [
            {"name": r.name, "version": r.version, "chars": len(r.value)} for r in self.blocks.list_blocks(self.user_id)
        ]

    def edit_block(
        self, name: str, operation: BlockEdit, text: str, expected_version: int, old: str | None
    ) -> dict[str, Any]:
        """Edit at ``expected_version`` (0 creates the block); a stale version raises ConflictError."""
        if operation not in ("update", "append", "replace"):
            raise ConfigurationError(f"operation must be update, append or replace, not {operation!r}")
        if self.blocks.load_block(self.user_id, name) is None:
            if expected_version != 0:
                raise ConflictError(f"block {name!r} does not exist; create it with expected_version 0")
            if operation == "replace":
                raise ConfigurationError(f"block {name!r} does not exist, so there is nothing to replace")
            # Created in one optimistic save: a concurrent creator makes this one fail, never merge silently.
            record = self.blocks.save_block(BlockRecord(self.user_id, name, text, 1), expected_version=0)
            return {"name": name, "value": record.value, "version": record.version}
        block = WorkingBlock(name, store=self.blocks, scope=self.user_id)
        if operation == "update":
            version = block.update(text, expected_version=expected_version)
        elif operation == "append":
            version = block.append(text, expected_version=expected_version)
        else:
            if old is None:
                raise ConfigurationError("operation 'replace' needs 'old', the exact text to replace")
            version = block.replace(old, text, expected_version=expected_version)
        return {"name": name, "value": block.value, "version": version}

    # -- sessions -----------------------------------------------------------------------------
    def sessions(self, limit: int | None = None) -> list[dict[str, Any]]:
        return [
            {
                "id": info.id,
                "title": info.title,
                "model": info.model,
                "messages": info.message_count,
                "updated_at": info.updated_at.isoformat(),
            }
            for info in self.store.list_sessions(user_id=self.user_id, limit=limit)
        ]

    def session_export(self, session_id: str) -> str:
        return self.store.export_jsonl(session_id, user_id=self.user_id).decode()

    def _state(self, session_id: str) -> SessionState:
        return self.store.load(session_id, user_id=self.user_id).state

    def context(self, session_id: str, format: str, max_tokens: int | None) -> dict[str, Any]:
        """The session's next context, as its memory renders it (its saved budget unless ``max_tokens``)."""
        if format not in FORMATS:
            raise ConfigurationError(f"format must be one of {list(FORMATS)}, not {format!r}")
        options: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
        info = self.store.get_session(session_id, user_id=self.user_id)
        if max_tokens is None and info.model is None and not stored_config(self._state(info.id)).get("max_tokens"):
            options["max_tokens"] = DEFAULT_MAX_TOKENS  # saved with neither a model nor a budget
        memory = Memory.open(info.id, store=self.store, user_id=self.user_id, **options)
        ctx = memory.context(format=format)
        account = ctx.account
        return {
            "session_id": info.id,
            "format": ctx.format,
            "system": ctx.system,
            "messages": ctx.messages,
            "tokens": account.total,
            "budget": account.budget,
            "left_out": [{"reason": lo.reason, "messages": lo.messages, "tokens": lo.tokens} for lo in ctx.left_out],
        }


def _fact(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "text": fact.text,
        "subject": fact.subject,
        "valid_from": _iso(fact.valid_from),
        "valid_to": _iso(fact.valid_to),
        "invalid_reason": fact.invalid_reason,
        "replaced_by": fact.replaced_by,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
