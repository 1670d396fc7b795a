"""``convmem mcp``: serve one user's long-term memory to MCP clients (stdio or streamable HTTP).

The first run creates its database (the default one, or the ``--db`` file), so an MCP
client configured from the README starts on a fresh machine. Over streamable HTTP every
request needs a key of the service (``convmem keys create --tenant T``; the registry is
found as ``convmem serve`` finds it), and the user served is that tenant's.
Needs the ``mcp`` extra (``pip install 'convmem[mcp]'``); see :mod:`convmem.mcp.server`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from .serve import KeysOption
from .sessions import DbOption, _store

__all__ = ["mcp"]


def mcp(
    user: Annotated[
        str, typer.Option("--user", "-u", metavar="USER", help="The one user whose memory this server serves.")
    ],
    db: DbOption = None,
    transport: Annotated[
        Literal["stdio", "streamable-http"],
        typer.Option(
            "--transport",
            metavar="NAME",
            help="stdio, or streamable-http at /mcp (every request needs an API key).",
        ),
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Address for streamable-http.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=1, max=65535, help="Port for streamable-http.")
    ] = 8765,
    keys: KeysOption = None,
) -> None:
    """Serve one user's recall, facts, working blocks and sessions as MCP tools and resources."""
    with _store(db, creates=True) as store:
        from ..mcp._scope import UserScope
        from ..mcp.server import build_server

        if transport == "stdio":
            build_server(UserScope(store, user)).run("stdio")
            return
        import uvicorn

        from ..mcp._http import KeyGuard, tenant_scopes
        from ..server.keys import open_registry

        registry = open_registry(keys)
        try:
            app = build_server(tenant_scopes(store, user)).streamable_http_app(host=host)
            uvicorn.run(KeyGuard(app, registry), host=host, port=port, log_level="warning")
        finally:
            registry.close()
