"""The long-term half of the service: facts, working blocks and recall, scoped to a tenant's user.

Each method maps the scope's user onto the store's (``tenant:user``) and makes
one library call: :class:`~convmem.longterm.facts.book.Facts` for facts,
:class:`~convmem.longterm.blocks.WorkingBlock` for block edits (the token
limit and the optimistic version check are its own), and a
:class:`~convmem.longterm.recall.index.RecallIndex` built from the backend's recall
store for each search (so it sees what any worker archived).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import ConfigurationError, ConflictError
from ..longterm.blocks.base import WorkingBlock
from ..longterm.blocks.store import BlockRecord
from ..longterm.facts.book import Facts
from ..longterm.facts.model import Fact
from ..longterm.recall.index import RecallHit, RecallIndex
from .backends import Backend
from .problems import ServiceError
from .sessions import SessionService
from .tenancy import Scope

__all__ = ["MemoryService"]


class MemoryService:
    """Facts, blocks and recall of every tenant, over one :class:`Backend`."""

    def __init__(self, backend: Backend, sessions: SessionService, *, embedder: Any = None) -> None:
        self.backend = backend
        self.sessions = sessions
        self.facts = Facts(backend.facts)
        self.embedder = embedder

    # -- facts ---------------------------------------------------------------------------------
    def list_facts(self, scope: Scope, *, valid_at: datetime | None, history: bool) -> list[Fact]:
        user = scope.store_user
        return self.facts.history(user_id=user) if history else self.facts.facts(user_id=user, valid_at=valid_at)

    def add_fact(self, scope: Scope, body: Mapping[str, Any]) -> Fact:
        fields = dict(body)
        session = fields.pop("session_id", None)
        store_session = self.sessions.resolve(scope, session).id if session else None
        return self.facts.add(user_id=scope.store_user, session_id=store_session, **fields)  # InvalidFactError: 422

    def update_fact(self, scope: Scope, fact_id: str, *, text: str, subject: str | None, reason: str) -> Fact:
        self._own_open_fact(scope, fact_id)
        return self.facts.update(fact_id, text, user_id=scope.store_user, subject=subject, reason=reason)

    def invalidate_fact(self, scope: Scope, fact_id: str, *, reason: str, replaced_by: str | None) -> Fact:
        self._own_open_fact(scope, fact_id)
        if replaced_by is not None and not any(
            f.id == replaced_by for f in self.facts.history(user_id=scope.store_user)
        ):
            raise ServiceError(404, "not-found", "Not found", f"fact not found: {replaced_by!r}")
        return self.facts.invalidate(fact_id, reason=reason, user_id=scope.store_user, replaced_by=replaced_by)

    def _own_open_fact(self, scope: Scope, fact_id: str) -> None:
        """404 for a fact this user never had (another tenant's looks the same); 409 if it has ended."""
        fact = next((f for f in self.facts.history(user_id=scope.store_user) if f.id == fact_id), None)
        if fact is None:
            raise ServiceError(404, "not-found", "Not found", f"fact not found: {fact_id!r}")
        if fact.valid_to is not None:
            raise ConflictError(f"fact {fact_id!r} ended already ({fact.invalid_reason or 'invalidated'})")

    # -- blocks --------------------------------------------------------------------------------
    def list_blocks(self, scope: Scope) -> list[BlockRecord]:
        return self.backend.blocks.list_blocks(scope.store_user)

    def get_block(self, scope: Scope, name: str) -> BlockRecord:
        record = self.backend.blocks.load_block(scope.store_user, name)
        if record is None:
            raise ServiceError(404, "not-found", "Not found", f"block not found: {name!r}")
        return record

    def put_block(self, scope: Scope, name: str, body: Mapping[str, Any]) -> BlockRecord:
        """Create a block (``expected_version`` 0) or replace its value (the version read)."""
        store, user = self.backend.blocks, scope.store_user
        current = store.load_block(user, name)
        expected = body["expected_version"]
        if expected == 0 and current is not None:
            raise ConflictError(f"block {name!r} exists (version {current.version}); pass the version you read")
        if expected > 0 and current is None:
            raise ServiceError(404, "not-found", "Not found", f"block not found: {name!r}")
        settings = _settings(current, body)
        try:
            if current is None:
                block = WorkingBlock(name, body["value"], store=store, scope=user, **settings)
                if block.version != 1 or block.value != body["value"]:
                    raise ConflictError(f"block {name!r} was created by another request; read it again")
            else:
                block = WorkingBlock(name, store=store, scope=user, **settings)
                block.update(body["value"], expected_version=expected)
        except ValueError as exc:
            raise ServiceError(422, "invalid-block", "Invalid block", str(exc)) from None
        return self._logged(scope, name)

    def edit_block(self, scope: Scope, name: str, body: Mapping[str, Any]) -> BlockRecord:
        current = self.get_block(scope, name)
        block = WorkingBlock(name, store=self.backend.blocks, scope=scope.store_user, **_settings(current, {}))
        expected = body["expected_version"]
        if body["op"] == "append":
            if body.get("text") is None:
                raise ServiceError(422, "invalid-edit", "Invalid edit", "append needs text")
            block.append(body["text"], expected_version=expected)
        else:
            if body.get("old") is None or body.get("new") is None:
                raise ServiceError(422, "invalid-edit", "Invalid edit", "replace needs old and new")
            block.replace(body["old"], body["new"], expected_version=expected)
        return self._logged(scope, name)

    def _logged(self, scope: Scope, name: str) -> BlockRecord:
        """The block as saved, its version logged with the time it took effect (for exact turn replays)."""
        record = self.get_block(scope, name)
        self.sessions.blocklog.record(scope.store_user, record)
        return record

    # -- recall --------------------------------------------------------------------------------
    def modes(self) -> tuple[list[str], str]:
        """The recall modes a search can ask for (dense ones need an embedder) and the default one."""
        index = self.backend.index or RecallIndex(store=self.backend.recall_store, embedder=self.embedder)
        return (["lexical", "dense", "hybrid"] if index.embedder is not None else ["lexical"]), index.mode

    def search(
        self, scope: Scope, query: str, *, k: int, mode: str | None, session_id: str | None
    ) -> tuple[str, list[RecallHit]]:
        store_session = self.sessions.resolve(scope, session_id).id if session_id is not None else None
        index = self.backend.index or RecallIndex(store=self.backend.recall_store, embedder=self.embedder)
        if mode in ("dense", "hybrid") and index.embedder is None:
            raise ConfigurationError(f"recall mode {mode!r} needs an embedder; start the service with --embedder")
        hits = index.search(query, user_id=scope.store_user, k=k, mode=mode, session_id=store_session)  # type: ignore[arg-type]
        return mode or index.mode, hits


def _settings(current: BlockRecord | None, body: Mapping[str, Any]) -> dict[str, Any]:
    """A block's settings: those given in ``body``, else the stored ones (a ``WorkingBlock`` does not read them)."""
    names = ("priority", "max_tokens", "position", "description")
    stored = {n: getattr(current, n) for n in names} if current is not None else {}
    chosen = {n: body[n] if body.get(n) is not None else stored.get(n) for n in names}
    return {n: v for n, v in chosen.items() if v is not None}
