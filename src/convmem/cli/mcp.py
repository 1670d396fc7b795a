"""``convmem mcp``: serve one user's long-term memory to MCP clients (stdio or streamable HTTP).

Needs the ``mcp`` extra (``pip install 'convmem[mcp]'``); see :mod:`convmem.mcp.server`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from .sessions import DbOption, _store

__all__ = ["mcp"]


def mcp(
    user: Annotated[str, typer.Option("--user", "-u", help="The one user whose memory this server serves.")],
    db: DbOption = None,
    transport: Annotated[
        Literal["stdio", "streamable-http"], typer.Option("--transport", help="stdio, or streamable-http at /mcp.")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="Address for streamable-http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port for streamable-http.")] = 8765,
) -> None:
    """Serve recall, facts, working blocks and session contexts of one user as MCP tools and resources."""
    with _store(db) as store:
        from ..mcp._scope import UserScope
        from ..mcp.server import build_server

        server = build_server(UserScope(store, user))
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)
