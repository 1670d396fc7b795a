"""Request dependencies: the key checks (tenant or admin), the service, and the caller's scope."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .keys import admin_matches
from .problems import ServiceError
from .tenancy import SESSION_ID, USER_ID, Scope

__all__ = [
    "IDEMPOTENCY_KEY",
    "IdempotencyKey",
    "PrefixQuery",
    "SessionPath",
    "UserScope",
    "admin",
    "service_of",
    "tenant_of",
]


def service_of(request: Request) -> Any:
    return request.app.state.service


bearer = HTTPBearer(auto_error=False, description="An API key made by `convmem keys create --tenant T`.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def tenant_of(request: Request, credentials: Credentials) -> str:
    """The caller's tenant; 401 (and nothing else said) for a missing, malformed, unknown or revoked key."""
    tenant = request.app.state.service.registry.tenant_of(credentials.credentials if credentials is not None else None)
    if tenant is None:
        raise ServiceError(401, "unauthorized", "Unauthorized", "a valid API key is required (Authorization: Bearer)")
    request.state.tenant = tenant
    return str(tenant)


def admin(credentials: Credentials) -> None:
    """Only the admin key of ``$CONVMEM_ADMIN_KEY`` passes."""
    if not admin_matches(credentials.credentials if credentials is not None else None):
        raise ServiceError(401, "unauthorized", "Unauthorized", "the admin key is required (Authorization: Bearer)")


def _scope(
    request: Request,
    tenant: Annotated[str, Depends(tenant_of)],
    user_id: Annotated[
        str | None, Query(pattern=USER_ID, description="The user within the key's tenant; absent: the anonymous user.")
    ] = None,
) -> Scope:
    return Scope(tenant, user_id)


UserScope = Annotated[Scope, Depends(_scope)]
SessionPath = Annotated[
    str, Path(pattern=SESSION_ID, description="A session id (a unique prefix of one where `prefix=true` is allowed).")
]
PrefixQuery = Annotated[
    bool,
    Query(
        description="Read the one session whose id starts with this one (only among your own; "
        "several match: 409 listing them). Writes and deletes always take the exact id."
    ),
]

IDEMPOTENCY_KEY = r"^[A-Za-z0-9_.:-]{1,100}$"
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY,
        description="Makes the write safe to send again: a message without an id gets `<key>.<index>`, so a "
        "repeat with the same key and body stores nothing (the same key with another body is a 409).",
    ),
]
