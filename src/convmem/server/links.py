"""OpenAPI links: how one operation's response feeds the next (schemathesis follows them statefully).

Every expression reads the source response's body or a path parameter, never ``$request.query.*``: an
optional query parameter the request left out does not resolve, and the link then loses the user it was
about. Each body it reads is a required member of that response's schema (``user_id`` is null for the
anonymous user, which a link sends as no ``user_id`` at all). tests/server/test_openapi_links.py resolves
every expression against every documented response.
"""

from __future__ import annotations

from typing import Any

__all__ = ["add_links"]

_SESSION = {"session_id": "$response.body#/id", "user_id": "$response.body#/user_id"}
_SAME_SESSION = {"session_id": "$response.body#/session_id", "user_id": "$response.body#/user_id"}
_FROM_SESSION = (
    "getSession",
    "updateSession",
    "deleteSession",
    "forkSession",
    "exportSession",
    "addMessages",
    "listMessages",
    "getContext",
    "clearSession",
    "repairSession",
    "rollbackIncomplete",
    "listSummaries",
    "recordUsage",
    "addResponse",
)
_LINKS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("/v1/sessions", "post", "201"): dict.fromkeys(_FROM_SESSION, _SESSION),
    ("/v1/sessions/import", "post", "201"): dict.fromkeys(("getSession", "exportSession", "getContext"), _SESSION),
    ("/v1/sessions/{session_id}/fork", "post", "201"): dict.fromkeys(
        ("getSession", "addMessages", "getContext"), _SESSION
    ),
    ("/v1/sessions/{session_id}/messages", "post", "201"): dict.fromkeys(
        ("getContext", "listMessages", "forkSession", "getSession", "listSummaries", "exportSession"), _SAME_SESSION
    ),
    ("/v1/facts", "post", "201"): {
        op: {"fact_id": "$response.body#/id", "user_id": "$response.body#/user_id"}
        for op in ("invalidateFact", "updateFact")
    },
    ("/v1/blocks/{name}", "put", "200"): {
        op: {"name": "$response.body#/name", "user_id": "$response.body#/user_id"} for op in ("getBlock", "editBlock")
    },
    ("/v1/admin/tenants/{tenant}/keys", "post", "201"): {"revokeKey": {"key_id": "$response.body#/key_id"}},
}


def add_links(schema: dict[str, Any]) -> None:
    """Add the links above to ``schema`` in place (only between operations it has)."""
    operations = {op.get("operationId") for path in schema["paths"].values() for op in path.values()}
    for (path, method, status), links in _LINKS.items():
        response = schema["paths"].get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is None:
            continue
        response["links"] = {
            f"To{op[0].upper()}{op[1:]}": {"operationId": op, "parameters": params}
            for op, params in links.items()
            if op in operations
        }
