"""One user's long-term memory over one store: what the MCP tools call, with no MCP in it.

What comes in: the tools' arguments, in the client's names (its session and message
ids). What happens: every operation is scoped to one user: sessions, facts, working
blocks and recall of other users are invisible (a session of another user is "not
found"). Served over HTTP, the user lives inside the tenant of the caller's key, under
the service's names (``server/tenancy.py``: user ``u`` of tenant ``t`` is stored as
``t:u``, session ``s`` as ``t.s``); every result and every error is turned back into the
client's names, so nothing of that naming reaches the agent. What goes out: plain
JSON-able dicts (the MCP layer validates them against its output schemas).

The long-term stores are the session store's own (``store.facts()``, ``store.blocks()``,
``store.recall()``), so facts and blocks an agent writes here are the ones a ``Memory``
with ``facts=True`` or a ``WorkingBlock`` over the same store renders, and what it
remembers is a message of one of the user's sessions, found again by recall.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal, cast

from ..errors import ConfigurationError, SessionNotFoundError
from ..formats import FORMATS
from ..longterm import Facts
from ..longterm.facts.model import Fact
from ..memory import Memory
from ..messages import Message
from ..server.tenancy import Scope
from ..session import SessionInfo
from ..stores.base import LongTermStores, SessionStore
from ._blocks import DEFAULT_MAX_TOKENS, BlockEdit, Blocks, Settings, open_session

__all__ = ["DEFAULT_MAX_TOKENS", "NOTES", "BlockEdit", "Settings", "UserScope"]

NOTES = "notes"  # the session an agent's notes go to when it names none


class UserScope:
    """The memory of ``user_id`` in ``store`` (within ``tenant``, when served over HTTP)."""

    def __init__(self, store: SessionStore, user_id: str, *, tenant: str | None = None) -> None:
        if not user_id:
            raise ConfigurationError("the MCP server needs a user id (--user); it serves one user")
        self.store, self.user_id = store, user_id
        self.naming = Scope(tenant, user_id) if tenant is not None else None
        self.store_user = self.naming.store_user if self.naming is not None else user_id
        longterm = cast(LongTermStores, store)  # every built-in store gives its long-term stores
        self.facts = Facts(longterm.facts())
        self.blocks = Blocks(store, longterm.blocks(), self.store_user)
        self._recall_store = longterm.recall()
        self._recall: Any = None
        self._indexed: dict[str, int] = {}  # session id -> last seq indexed in this process

    # -- names -------------------------------------------------------------------------------
    def _store_id(self, session_id: str) -> str:
        return self.naming.store_session(session_id) if self.naming is not None else session_id

    def _client_id(self, store_id: str) -> str:
        return self.naming.client_session(store_id) if self.naming is not None else store_id

    def scrub(self, text: str) -> str:
        """An error's text in the client's names."""
        return self.naming.scrub(text) if self.naming is not None else text

    def _session(self, session_id: str) -> SessionInfo:
        try:
            return self.store.get_session(self._store_id(session_id), user_id=self.store_user)
        except SessionNotFoundError:
            raise SessionNotFoundError(session_id) from None

    # -- recall -------------------------------------------------------------------------------
    def recall(self, query: str, k: int, session_id: str | None) -> list[dict[str, Any]]:
        index = self._index()
        where = self._session(session_id).id if session_id is not None else None
        hits = index.search(query, user_id=self.store_user, k=k, session_id=where)
        return [
            {
                "text": hit.doc.text,
                "role": hit.doc.role,
                "session_id": self._client_id(hit.doc.session_id),
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
        for info in self.store.list_sessions(user_id=self.store_user):
            start = self._indexed.get(info.id, -1) + 1
            fresh = list(self.store.messages(info.id, user_id=self.store_user, from_seq=start))
            if fresh:
                self._recall.add_messages(fresh, session_id=info.id, user_id=self.store_user)
                self._indexed[info.id] = fresh[-1].seq
        return self._recall

    # -- remembering ------------------------------------------------------------------------
    def remember(self, text: str, role: Literal["user", "assistant"], session_id: str | None) -> dict[str, Any]:
        """Store ``text`` as a message of ``session_id`` (default: the user's notes session), once.

        Its id is a hash of its role and text, so remembering the same thing again stores nothing.
        """
        if not text.strip():
            raise ConfigurationError("text must say something (it is empty)")
        key = "note-" + hashlib.sha256(f"{role}\n{text}".encode()).hexdigest()[:24]
        chosen = session_id or NOTES
        try:
            memory = open_session(self.store, self._session(chosen), self.store_user)
        except SessionNotFoundError:
            if session_id is not None:
                raise
            memory = Memory(
                store=self.store,
                session_id=self._store_id(NOTES),
                user_id=self.store_user,
                max_tokens=DEFAULT_MAX_TOKENS,
            )
        before = memory.stats().messages
        memory.add(Message(role=role, content=text, id=self._message_id(key)))
        return {
            "session_id": self._client_id(memory.session_id),
            "message_id": key,
            "stored": memory.stats().messages > before,
        }

    def _message_id(self, key: str) -> str:
        return self.naming.store_message(key) if self.naming is not None else key

    # -- facts --------------------------------------------------------------------------------
    def list_facts(self, include_ended: bool) -> list[dict[str, Any]]:
        user = self.store_user
        found = self.facts.history(user_id=user) if include_ended else self.facts.facts(user_id=user)
        return [_fact(f) for f in found]

    def add_fact(self, text: str, subject: str | None) -> dict[str, Any]:
        return _fact(self.facts.add(text, user_id=self.store_user, subject=subject))

    def invalidate_fact(self, fact_id: str, reason: str, replaced_by: str | None) -> dict[str, Any]:
        return _fact(self.facts.invalidate(fact_id, reason=reason, user_id=self.store_user, replaced_by=replaced_by))

    # -- working blocks -----------------------------------------------------------------------
    def read_block(self, name: str) -> dict[str, Any]:
        return _block(self.blocks.read(name))

    def list_blocks(self) -> list[dict[str, Any]]:
        return [{**_block(r), "chars": len(r.value)} for r in self.blocks.list()]

    def edit_block(
        self, name: str, operation: BlockEdit, text: str, expected_version: int, old: str | None, settings: Settings
    ) -> dict[str, Any]:
        """Edit at ``expected_version`` (0 creates the block); a stale version raises ConflictError."""
        return _block(self.blocks.edit(name, operation, text, expected_version, old, settings))

    # -- sessions -----------------------------------------------------------------------------
    def sessions(self, limit: int | None = None) -> list[dict[str, Any]]:
        return [
            {
                "id": self._client_id(info.id),
                "title": info.title,
                "model": info.model,
                "messages": info.message_count,
                "updated_at": info.updated_at.isoformat(),
            }
            for info in self.store.list_sessions(user_id=self.store_user, limit=limit)
        ]

    def session_export(self, session_id: str) -> str:
        data = self.store.export_jsonl(self._session(session_id).id, user_id=self.store_user).decode()
        if self.naming is None:
            return data
        head, *lines = data.splitlines()
        header = json.loads(head)
        header["session"]["id"] = self._client_id(header["session"]["id"])
        header["session"]["user_id"] = self.user_id
        out = [json.dumps(header, ensure_ascii=False, separators=(",", ":"))]
        for line in lines:
            row = json.loads(line)
            message = row.get("message") if isinstance(row, dict) else None
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                message["id"] = self.naming.client_message(message["id"])
            out.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        return "\n".join(out) + "\n"

    def context(self, session_id: str, format: str, max_tokens: int | None) -> dict[str, Any]:
        """The session's next context, as its memory renders it (its saved budget unless ``max_tokens``)."""
        if format not in FORMATS:
            raise ConfigurationError(f"format must be one of {list(FORMATS)}, not {format!r}")
        options: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
        info = self._session(session_id)
        ctx = open_session(self.store, info, self.store_user, **options).context(format=format)
        account = ctx.account
        return {
            "session_id": self._client_id(info.id),
            "format": ctx.format,
            "system": ctx.system,
            "messages": ctx.messages,
            "tokens": account.total,
            "budget": account.budget,
            "left_out": [{"reason": lo.reason, "messages": lo.messages, "tokens": lo.tokens} for lo in ctx.left_out],
        }


def _block(record: Any) -> dict[str, Any]:
    return {
        "name": record.name,
        "value": record.value,
        "version": record.version,
        "priority": record.priority,
        "max_tokens": record.max_tokens,
        "position": record.position,
        "description": record.description,
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
