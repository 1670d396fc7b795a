"""Errors as RFC 9457 ``application/problem+json``, mapped from the :class:`~convmem.errors.ConvmemError` tree.

One table decides the status and the ``type`` of every convmem error; the
routes never build error responses themselves. The ``detail`` is the error's
own message with store-side ids turned back into the client's
(:meth:`~convmem.server.tenancy.Scope.scrub`), so a tenant never sees another
tenant's namespace. A bug (any other exception) is a bare 500 whose detail
says nothing about the request.

======================  ======  ================================
ConvmemError            status  type
======================  ======  ================================
InvalidMessageError     422     ``invalid-message`` (+ field, index)
ContextOverflowError    422     ``context-overflow`` (+ needed, budget)
UnknownModelError       422     ``unknown-model`` (+ suggestions)
ConfigurationError      422     ``invalid-options``
BlockEditError          422     ``block-edit``
SessionNotFoundError    404     ``not-found``
AmbiguousSessionError   409     ``ambiguous-session``
ConflictError           409     ``conflict``
StoreError              503     ``store-unavailable``
LLMError                502     ``llm-failed``
======================  ======  ================================
"""

from __future__ import annotations

from typing import Any

from ..errors import (
    AmbiguousSessionError,
    BlockEditError,
    ConfigurationError,
    ConflictError,
    ContextOverflowError,
    ConvmemError,
    InvalidMessageError,
    LLMError,
    SessionNotFoundError,
    StoreError,
    UnknownModelError,
)

__all__ = ["MEDIA_TYPE", "PROBLEM_SCHEMA", "ServiceError", "problem", "problem_of", "responses"]

MEDIA_TYPE = "application/problem+json"
BASE = "https://convmem.dev/problems/"

_TABLE: tuple[tuple[type[ConvmemError], int, str, str], ...] = (
    (InvalidMessageError, 422, "invalid-message", "Invalid message"),
    (ContextOverflowError, 422, "context-overflow", "Context does not fit"),
    (UnknownModelError, 422, "unknown-model", "Unknown model"),
    (ConfigurationError, 422, "invalid-options", "Invalid options"),
    (BlockEditError, 422, "block-edit", "Block edit refused"),
    (SessionNotFoundError, 404, "not-found", "Not found"),
    (AmbiguousSessionError, 409, "ambiguous-session", "Ambiguous session id"),
    (ConflictError, 409, "conflict", "Conflict"),
    (StoreError, 503, "store-unavailable", "Store unavailable"),
    (LLMError, 502, "llm-failed", "Model call failed"),
)


class ServiceError(Exception):
    """An error the service itself raises (auth, limits, not found), with its status and problem type."""

    def __init__(self, status: int, kind: str, title: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.kind, self.title, self.detail, self.extra = status, kind, title, detail, extra


def problem(status: int, kind: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    body = {"type": BASE + kind, "title": title, "status": status, "detail": detail}
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def problem_of(exc: ConvmemError, scrub: Any = None) -> dict[str, Any]:
    """The problem document for a convmem error; ``scrub`` rewrites store-side ids in its text."""
    status, kind, title = next(
        ((s, k, t) for cls, s, k, t in _TABLE if isinstance(exc, cls)), (500, "internal", "Internal error")
    )
    text = str(exc)
    extra: dict[str, Any] = {}
    if isinstance(exc, InvalidMessageError):
        extra = {"field": exc.field, "index": exc.index}
    elif isinstance(exc, ContextOverflowError):
        extra = {"needed": exc.needed, "budget": exc.budget}
    elif isinstance(exc, UnknownModelError):
        extra = {"suggestions": list(exc.suggestions)}
    elif isinstance(exc, StoreError) and not isinstance(
        exc, (SessionNotFoundError, AmbiguousSessionError, ConflictError)
    ):
        text = "the store could not complete the request; retry later"  # never a host, path or driver text
    if scrub is not None:
        text = scrub(text)
    return problem(status, kind, title, text, **extra)


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "field": {"type": ["string", "null"]},
        "index": {"type": ["integer", "null"]},
        "needed": {"type": "integer"},
        "budget": {"type": "integer"},
        "suggestions": {"type": "array", "items": {"type": "string"}},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
}

_DESCRIPTIONS = {
    400: "Bad request",
    401: "No API key, or an unknown or revoked one",
    403: "The key may not do this (a tenant key on an admin route)",
    404: "No such session, fact or block for this tenant and user",
    409: "Conflict: an optimistic version check lost, an id is taken, or an id prefix is ambiguous",
    413: "The request body is larger than the service allows",
    415: "The body is not JSON",
    422: "Invalid input: names the field and the limit",
    502: "A model call failed",
    503: "The store is unavailable, or the request took longer than the service allows",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for these problem statuses (401, 413 and 422 are always added)."""
    wanted = sorted({401, 413, 422, 503, *statuses})
    return {
        status: {
            "description": _DESCRIPTIONS[status],
            "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in wanted
    }
