"""``POST /v1/forget``: erase the caller's user, or one of its sessions with its forks, everywhere.

The erasure is the store's ``forget`` (:mod:`convmem.stores._forget`) on the tenant's user, plus what the
service holds in this process (the in-memory backend's recall index). The answer is the receipt in the
client's terms (its user and session ids, never the store's tenant-scoped ones) and holds no content;
what the storage still holds until compaction is named for the operator, who runs ``convmem compact``.
A session that does not exist (or was erased already) erases nothing: the call is idempotent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigurationError, SessionNotFoundError
from ..longterm.recall._forget import forget_in_index
from ..stores._forget import ForgetReceipt, Forgetting
from . import audit
from .deps import Credentials, UserScope, service_of
from .keys import _KEY
from .problems import responses
from .tenancy import SESSION_ID, Scope

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["erasure"])
Svc = Annotated[Any, Depends(service_of)]


class ForgetIn(BaseModel):
    """What to erase: the user (no ``session_id``), or one session (id or unique prefix) and its forks."""

    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(default=None, pattern=SESSION_ID)


class ForgetOut(BaseModel):
    user_id: str | None
    session_id: str | None
    removed: dict[str, int] = Field(description="How many were removed, per kind.")
    sessions: list[str] = Field(description="The sessions erased (forks included).")
    pending: str = Field(description="What the storage still holds until the operator compacts it ('' if nothing).")


def erase(service: Any, scope: Scope, session_id: str | None) -> ForgetReceipt:
    """The store's erasure for the scope's user, and the in-process recall index's."""
    store, user = service.backend.store, scope.store_user
    if not isinstance(store, Forgetting):
        raise ConfigurationError(f"the service's store ({type(store).__name__}) cannot erase")
    target = None
    if session_id is not None:
        try:
            target = service.sessions.resolve(scope, session_id).id
        except SessionNotFoundError:
            return ForgetReceipt(user, session_id, {})  # nothing left to erase
    receipt = store.forget(user_id=user, session_id=target)
    if service.backend.index is not None:
        forget_in_index(service.backend.index, user, None if target is None else set(receipt.sessions))
    return receipt


class ErasureOut(BaseModel):
    at: str
    key_id: str | None = Field(description="The id of the API key that asked (never the key).")
    action: str
    subject: str = Field(description="SHA-256 of [tenant, user, session] as JSON: proves an erasure, keeps no name.")
    counts: dict[str, int]


@router.post("/forget", response_model=ForgetOut, responses=responses(), operation_id="forget")
def forget(body: ForgetIn, scope: UserScope, service: Svc, credentials: Credentials) -> dict[str, Any]:
    """Erase the user, or one session with its forks: messages, state, summaries, facts, blocks, recall."""
    receipt = erase(service, scope, body.session_id)
    matched = _KEY.fullmatch(credentials.credentials) if credentials is not None else None
    audit.record(
        service.registry,
        tenant=scope.tenant,
        key_id=matched.group(1) if matched else None,
        action="forget-session" if body.session_id is not None else "forget-user",
        user_id=scope.user_id,
        session_id=body.session_id,
        counts=receipt.removed,
    )
    return {
        "user_id": scope.user_id,
        "session_id": body.session_id,
        "removed": dict(receipt.removed),
        "sessions": [scope.client_session(s) for s in receipt.sessions],
        "pending": receipt.pending,
    }


@router.get("/erasures", response_model=list[ErasureOut], responses=responses(), operation_id="listErasures")
def erasures(scope: UserScope, service: Svc) -> list[dict[str, Any]]:
    """The tenant's audit trail of erasures, newest first: who, when, how much; never what."""
    return audit.trail(service.registry, scope.tenant)
