"""The MCP server over streamable HTTP, behind the service's API keys.

What comes in: HTTP requests to ``/mcp``. What happens: each must carry ``Authorization:
Bearer <key>`` with a key of the service's registry (``convmem keys create --tenant T``,
:mod:`convmem.server.keys`); a missing, malformed, unknown or revoked key gets the same
401 and reaches no tool. A known key names its tenant, and the user the server serves is
that tenant's user, under the service's names (``server/tenancy.py``), so the MCP server and
the HTTP service over one store see the same memory, and one tenant's key never reaches
another tenant's. What goes out: the MCP SDK's streamable HTTP app, wrapped.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..errors import ConfigurationError
from ..server.keys import KeyRegistry
from ..stores.base import SessionStore
from ._scope import UserScope

__all__ = ["KeyGuard", "tenant_scopes"]

ASGI = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]
_STATE = "convmem_tenant"
_REFUSED = json.dumps(
    {"error": "invalid_token", "error_description": "a valid convmem API key is required (Authorization: Bearer)"}
).encode()


class KeyGuard:
    """An ASGI app that lets a request through to ``app`` only with a known key, and records its tenant."""

    def __init__(self, app: ASGI, registry: KeyRegistry) -> None:
        self.app, self.registry = app, registry

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":  # the lifespan of the SDK's session manager
            await self.app(scope, receive, send)
            return
        import anyio.to_thread

        tenant = await anyio.to_thread.run_sync(self.registry.tenant_of, _bearer(scope))
        if tenant is None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                        (b"content-length", str(len(_REFUSED)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": _REFUSED})
            return
        scope.setdefault("state", {})[_STATE] = tenant
        await self.app(scope, receive, send)


def _bearer(scope: MutableMapping[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            kind, _, key = value.decode("latin-1").partition(" ")
            return key.strip() if kind.lower() == "bearer" and key.strip() else None
    return None


def tenant_scopes(store: SessionStore, user_id: str) -> Callable[[Any], UserScope]:
    """``scope_for(ctx)``: the user's scope within the tenant of the request's key (one scope per tenant)."""
    scopes: dict[str, UserScope] = {}

    def scope_for(ctx: Any) -> UserScope:
        request = ctx.request_context.request
        tenant = getattr(request.state, _STATE, None) if request is not None else None
        if tenant is None:  # KeyGuard lets no such request through; a transport without it is refused here too
            raise ConfigurationError("this MCP server needs a convmem API key on every request")
        if tenant not in scopes:
            scopes[tenant] = UserScope(store, user_id, tenant=tenant)
        return scopes[tenant]

    return scope_for
