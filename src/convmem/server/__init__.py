"""The convmem service: ``Memory`` over HTTP, for many tenants, with a web inspector.

What comes in, what happens, what goes out::

    request --Limits (body size 413, time 503)--> key check (401; admin routes: $CONVMEM_ADMIN_KEY)
            --Scope (tenant, ?user_id)--> tenancy: user 'u' -> store user 't:u', session 's' -> store id 't.s'
            --route--> SessionService / MemoryService: Memory.open(...) + one Memory call (or Facts,
                       WorkingBlock, RecallIndex); no policy of their own
            --> JSON body (store ids mapped back), or application/problem+json from the ConvmemError tree
    /ui     --> the inspector (static files shipped in this package; it calls the same /v1 API)

Modules: :mod:`.app` (app, middleware, error handlers, OpenAPI), :mod:`.routes_sessions`,
:mod:`.routes_memory`, :mod:`.routes_admin` (HTTP), :mod:`.sessions`, :mod:`.memories`
(the adapters), :mod:`.replay` (the context at turn N), :mod:`.replays` (kept per worker),
:mod:`.blocklog` (block versions by time), :mod:`.tenancy`, :mod:`.keys`,
:mod:`.backends`, :mod:`.problems`, :mod:`.schemas`, :mod:`.views`, :mod:`.settings`.

Install with ``pip install 'convmem[server]'``; run with ``convmem serve`` and make a key with
``convmem keys create --tenant T``. Example (in process, for tests)::

    from convmem.server import Settings, create_app

    app = create_app(Settings(store="memory", keys="/tmp/keys.db"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .app import Service, app_from_env, create_app
    from .settings import Settings

__all__ = ["Service", "Settings", "app_from_env", "create_app"]

INSTALL_HINT = "pip install 'convmem[server]'"


def require_server_extra() -> None:
    """Raise ConfigurationError naming the pip command if FastAPI or uvicorn is missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"the convmem service needs {exc.name}: {INSTALL_HINT}") from None


def __getattr__(name: str) -> Any:
    if name == "Settings":
        from .settings import Settings

        return Settings
    if name in ("Service", "app_from_env", "create_app"):
        require_server_extra()
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module 'convmem.server' has no attribute {name!r}")
