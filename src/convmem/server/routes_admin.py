"""``/v1/admin``: tenants and their keys, for the admin key of ``$CONVMEM_ADMIN_KEY`` only."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response

from .deps import service_of
from .problems import ServiceError, responses
from .schemas import KeyCreated, KeyCreateIn, KeyOut, TenantIn

__all__ = ["router"]

router = APIRouter(prefix="/v1/admin", tags=["admin"])
Svc = Annotated[Any, Depends(service_of)]
Tenant = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")]
KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{8}$")]


@router.get("/tenants", response_model=list[str], responses=responses(), operation_id="listTenants")
def list_tenants(service: Svc) -> list[str]:
    return service.registry.tenants()  # type: ignore[no-any-return]


@router.post(
    "/tenants", status_code=201, response_model=TenantIn, responses=responses(409), operation_id="createTenant"
)
def create_tenant(body: TenantIn, service: Svc) -> dict[str, str]:
    service.registry.create_tenant(body.name)
    return {"name": body.name}


@router.get("/tenants/{tenant}/keys", response_model=list[KeyOut], responses=responses(404), operation_id="listKeys")
def list_keys(tenant: Tenant, service: Svc) -> list[dict[str, Any]]:
    _known(service, tenant)
    return [dataclasses.asdict(k) for k in service.registry.keys(tenant)]


@router.post(
    "/tenants/{tenant}/keys",
    status_code=201,
    response_model=KeyCreated,
    responses=responses(404),
    operation_id="createKey",
)
def create_key(tenant: Tenant, body: KeyCreateIn, service: Svc, response: Response) -> dict[str, Any]:
    """A new key for the tenant: the response is the only place it ever appears."""
    _known(service, tenant)
    key = service.registry.create_key(tenant, label=body.label)
    response.headers["Cache-Control"] = "no-store"
    return {**dataclasses.asdict(key.info), "key": key.secret}


@router.delete("/keys/{key_id}", response_model=KeyOut, responses=responses(404), operation_id="revokeKey")
def revoke_key(key_id: KeyId, service: Svc) -> dict[str, Any]:
    return dataclasses.asdict(service.registry.revoke(key_id))  # no such key: the registry's 404


def _known(service: Any, tenant: str) -> None:
    if tenant not in service.registry.tenants():
        raise ServiceError(404, "not-found", "Not found", f"tenant not found: {tenant!r}")
