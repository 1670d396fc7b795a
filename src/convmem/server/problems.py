"""Errors as RFC 9457 ``application/problem+json``, written from the one error table (``convmem.errors.PROBLEMS``).

The table decides the status, the ``type`` and the title of every convmem
error, and which of its attributes travel as members of the document; the
routes never build error responses themselves, and ``convmem.client`` reads
the same table to raise the same class again. The ``detail`` is the error's
own message with store-side ids turned back into the client's
(:meth:`~convmem.server.tenancy.Scope.scrub`, applied to every text the
document carries), so a tenant never sees another tenant's namespace; a store
failure's text, which may name a host, a path or a driver, is replaced by the
table's fixed text. A bug (any other exception) is a bare 500 whose detail says
nothing about the request.

=======================  ======  =====================================================
ConvmemError             status  type (+ members)
=======================  ======  =====================================================
InvalidMessageError      422     ``invalid-message`` (+ reason, field, index)
InvalidFactError         422     ``invalid-fact``
TranscriptError          422     ``invalid-transcript`` (+ path, line, reason)
ContextOverflowError     422     ``context-overflow`` (+ needed, budget)
UnknownModelError        422     ``unknown-model`` (+ model, suggestions)
ConfigurationError       422     ``invalid-options``
BlockEditError           422     ``block-edit``
SessionNotFoundError     404     ``not-found`` (+ session_id)
MissingDatabaseError     404     ``missing-database``
AmbiguousSessionError    409     ``ambiguous-session`` (+ prefix, matches)
SessionLostError         409     ``session-lost``
DamagedSessionError      409     ``damaged-session`` (+ session_id)
ConflictError            409     ``conflict``
StaleSessionError        409     ``stale-session``
DecryptionError          500     ``undecryptable``
StoreError               503     ``store-unavailable``
LLMError                 502     ``llm-failed`` (+ endpoint, llm_status, usage)
ServiceError             own     its own (+ its extra members)
ConvmemError             500     ``internal``
=======================  ======  =====================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import ConvmemError, ServiceError, problem_for

__all__ = ["MEDIA_TYPE", "PROBLEM_SCHEMA", "ServiceError", "problem", "problem_of", "responses"]

MEDIA_TYPE = "application/problem+json"
BASE = "https://convmem.dev/problems/"


def problem(status: int, kind: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    """A problem document; members whose value is None are left out."""
    body = {"type": BASE + kind, "title": title, "status": status, "detail": detail}
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def problem_of(exc: ConvmemError, scrub: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The problem document for a convmem error; ``scrub`` rewrites store-side ids in every text it carries."""
    row = problem_for(exc)
    clean = scrub or (lambda text: text)
    if isinstance(exc, ServiceError):
        return problem(exc.status, exc.kind, exc.title, clean(exc.detail), **_jsonable(exc.extra, clean))
    body = problem(row.status, row.type, row.title, row.hidden or clean(str(exc)))
    for name in row.fields:  # sent even when None: the client rebuilds the error from every one of them
        body[row.member(name)] = _jsonable(getattr(exc, name), clean)
    return body


def _jsonable(value: Any, clean: Callable[[str], str]) -> Any:
    """``value`` as JSON: texts scrubbed, sequences as lists, dataclasses (``ModelUsage``) as objects."""
    if isinstance(value, str):
        return clean(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value), clean)
    if isinstance(value, dict):
        return {key: _jsonable(item, clean) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item, clean) for item in value]
    return value


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "reason": {"type": "string"},
        "field": {"type": ["string", "null"]},
        "index": {"type": ["integer", "null"]},
        "needed": {"type": "integer"},
        "budget": {"type": "integer"},
        "model": {"type": "string"},
        "suggestions": {"type": "array", "items": {"type": "string"}},
        "session_id": {"type": "string"},
        "prefix": {"type": "string"},
        "matches": {"type": "array", "items": {"type": "string"}},
        "endpoint": {"type": ["string", "null"]},
        "llm_status": {"type": ["integer", "null"]},
        "usage": {"type": "array", "items": {"type": "object"}},
        "path": {"type": "string"},
        "line": {"type": ["integer", "null"]},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
}

_DESCRIPTIONS = {
    400: "Bad request",
    401: "No API key, or an unknown or revoked one",
    403: "The key may not do this (a tenant key on an admin route)",
    404: "No such session, fact or block for this tenant and user",
    409: "Conflict: a version check lost, an id is taken, an id prefix is ambiguous, or the session was lost",
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
