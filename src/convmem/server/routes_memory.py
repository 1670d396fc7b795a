"""``/v1/facts``, ``/v1/blocks`` and ``/v1/recall``: a user's long-term memory."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BeforeValidator

from ..errors import InvalidMessageError
from .deps import UserScope, service_of
from .problems import responses
from .schemas import (
    BlockEditIn,
    BlockOut,
    BlockPutIn,
    FactIn,
    FactInvalidateIn,
    FactOut,
    FactUpdateIn,
    RecallIn,
    RecallModesOut,
    RecallOut,
)
from .views import block_view, fact_view, hit_view

__all__ = ["router"]

_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def iso_only(value: object) -> object:
    """A date-time is written as one: a bare number (``0.5``, read as seconds since 1970) is refused."""
    if isinstance(value, str) and not _DATE_TIME.match(value):
        # A ConvmemError that is a ValueError: pydantic reports it as this parameter's validation error (422).
        raise InvalidMessageError("must be an RFC 3339 date-time such as 2026-01-31T12:00:00Z")
    return value


router = APIRouter(prefix="/v1")
Svc = Annotated[Any, Depends(service_of)]
FactId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,200}$")]
BlockName = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


@router.get("/facts", response_model=list[FactOut], responses=responses(), tags=["facts"], operation_id="listFacts")
def list_facts(
    scope: UserScope,
    service: Svc,
    valid_at: Annotated[
        datetime | None,
        BeforeValidator(iso_only),
        Query(description="What held at this time, an RFC 3339 date-time (default: now; without an offset: UTC)."),
    ] = None,
    history: Annotated[bool, Query(description="Every fact ever recorded, ended ones included.")] = False,
) -> list[dict[str, Any]]:
    """The user's facts: those valid at a time, or the whole history with validity and replacements."""
    return [fact_view(scope, f) for f in service.memories.list_facts(scope, valid_at=valid_at, history=history)]


@router.post(
    "/facts",
    status_code=201,
    response_model=FactOut,
    responses=responses(404, 409),
    tags=["facts"],
    operation_id="addFact",
)
def add_fact(body: FactIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Record a fact (a duplicate of an open fact is merged into it)."""
    return fact_view(scope, service.memories.add_fact(scope, body.model_dump()))


@router.post(
    "/facts/{fact_id}/update",
    status_code=201,
    response_model=FactOut,
    responses=responses(404, 409),
    tags=["facts"],
    operation_id="updateFact",
)
def update_fact(fact_id: FactId, body: FactUpdateIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """End a fact and record its new version (returned; the old one names it in ``replaced_by``)."""
    fact = service.memories.update_fact(scope, fact_id, text=body.text, subject=body.subject, reason=body.reason)
    return fact_view(scope, fact)


@router.post(
    "/facts/{fact_id}/invalidate",
    response_model=FactOut,
    responses=responses(404, 409),
    tags=["facts"],
    operation_id="invalidateFact",
)
def invalidate_fact(fact_id: FactId, body: FactInvalidateIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """End a fact (nothing is deleted)."""
    fact = service.memories.invalidate_fact(scope, fact_id, reason=body.reason, replaced_by=body.replaced_by)
    return fact_view(scope, fact)


@router.get("/blocks", response_model=list[BlockOut], responses=responses(), tags=["blocks"], operation_id="listBlocks")
def list_blocks(scope: UserScope, service: Svc) -> list[dict[str, Any]]:
    """The user's working blocks (shown in every context of the user's sessions)."""
    return [block_view(scope, r) for r in service.memories.list_blocks(scope)]


@router.get(
    "/blocks/{name}", response_model=BlockOut, responses=responses(404), tags=["blocks"], operation_id="getBlock"
)
def get_block(name: BlockName, scope: UserScope, service: Svc) -> dict[str, Any]:
    return block_view(scope, service.memories.get_block(scope, name))


@router.put(
    "/blocks/{name}", response_model=BlockOut, responses=responses(404, 409), tags=["blocks"], operation_id="putBlock"
)
def put_block(name: BlockName, body: BlockPutIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Create a block (``expected_version`` 0) or replace its value (the version you read)."""
    return block_view(scope, service.memories.put_block(scope, name, body.model_dump()))


@router.post(
    "/blocks/{name}/edit",
    response_model=BlockOut,
    responses=responses(404, 409),
    tags=["blocks"],
    operation_id="editBlock",
)
def edit_block(name: BlockName, body: BlockEditIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Append to a block, or replace the one occurrence of a text in it, at the version you read."""
    return block_view(scope, service.memories.edit_block(scope, name, body.model_dump()))


@router.post("/recall", response_model=RecallOut, responses=responses(404, 409), tags=["recall"], operation_id="recall")
def recall(body: RecallIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Search the user's archived messages; each hit gives its fused score and each retriever's signal."""
    mode, hits = service.memories.search(scope, body.query, k=body.k, mode=body.mode, session_id=body.session_id)
    return {"mode": mode, "items": [hit_view(scope, h) for h in hits]}


@router.get(
    "/recall/modes", response_model=RecallModesOut, responses=responses(), tags=["recall"], operation_id="recallModes"
)
def recall_modes(scope: UserScope, service: Svc) -> dict[str, Any]:
    """The recall modes this service can serve (the inspector offers only these)."""
    modes, default = service.memories.modes()
    return {"modes": modes, "default": default}
