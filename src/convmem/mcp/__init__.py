"""The convmem MCP server (``convmem mcp``), for MCP clients such as Claude Desktop or an IDE agent.

:mod:`convmem.mcp.server` builds the server (official ``mcp`` SDK, ``pip install 'convmem[mcp]'``);
:mod:`convmem.mcp._scope` holds what its tools do, for one user over one store, with no MCP in it.
Nothing here is imported by ``import convmem``.
"""
