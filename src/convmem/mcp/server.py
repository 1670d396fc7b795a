"""The convmem MCP server: long-term memory for any MCP client (Claude Desktop, IDE agents...).

What comes in: tool calls and resource reads from one MCP client, over stdio or
streamable HTTP. What happens: each is answered by the :class:`~convmem.mcp._scope.UserScope`
of the user the server was started for, over one store. What goes out: JSON results;
a bad argument or a refused operation comes back as an MCP tool error (``isError``)
naming what is wrong, and the server goes on.

Tools: ``recall_search``, ``facts_list``, ``facts_add``, ``facts_invalidate``,
``block_list``, ``block_read``, ``block_edit`` (optimistic versions),
``sessions_list``, ``session_context``. Resources: ``convmem://sessions/{session_id}``
(the session as lossless JSONL) and, for a fixed user, ``convmem://sessions``.

Who the user is: ``build_server(scope=...)`` takes the fixed :class:`UserScope` of
``convmem mcp --user``, or a ``scope_for(ctx)`` function called on every request
with the MCP request context; the HTTP service (issue 15) plugs its tenant keys in
there, mapping the request's key to that tenant's scope.

Example::

    convmem mcp --user alice --store sqlite:///~/memory.db                       # stdio
    convmem mcp --user alice --transport streamable-http --port 8765             # http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from ..errors import ConvmemError
from ..integrations import missing
from ._scope import UserScope

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("mcp", "mcp") from exc

__all__ = ["ScopeFor", "build_server"]

ScopeFor = Callable[[Context], UserScope]
F = TypeVar("F", bound=Callable[..., Any])
INSTRUCTIONS = (
    "Long-term memory of one user. Search what was said before with recall_search; keep durable facts with "
    "facts_add / facts_invalidate (nothing is deleted, ended facts keep their history); keep working notes in "
    "blocks (read a block, then edit it with the version you read); session_context shows what a session's "
    "next request would hold within its token budget."
)


def _tool_errors(fn: F) -> F:
    """A refused operation is the caller's to fix: an MCP tool error with convmem's message, not a crash."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConvmemError, ValueError) as exc:  # ValueError: e.g. a fact with empty text
            raise ToolError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def build_server(scope: UserScope | ScopeFor) -> MCPServer:
    """An MCP server answering for one user (``scope``), or for whoever ``scope(ctx)`` says."""
    fixed = scope if isinstance(scope, UserScope) else None
    scope_for: ScopeFor = (lambda ctx: fixed) if fixed is not None else scope  # type: ignore[assignment]
    server = MCPServer(name="convmem", instructions=INSTRUCTIONS)

    @server.tool(description="Search the user's past messages (every session) by meaning and words; best first.")
    @_tool_errors
    def recall_search(
        query: Annotated[str, Field(min_length=1, max_length=2_000)],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50)] = 5,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        return {"hits": scope_for(ctx).recall(query, k, session_id)}

    @server.tool(description="The user's facts that hold now (or every fact ever, with include_ended).")
    @_tool_errors
    def facts_list(ctx: Context, include_ended: bool = False) -> dict[str, Any]:
        return {"facts": scope_for(ctx).list_facts(include_ended)}

    @server.tool(description="Record a durable fact about the user; a duplicate of a fact that holds is merged.")
    @_tool_errors
    def facts_add(
        text: Annotated[str, Field(min_length=1, max_length=4_000)], ctx: Context, subject: str | None = None
    ) -> dict[str, Any]:
        return scope_for(ctx).add_fact(text, subject)

    @server.tool(description="End a fact that no longer holds (it stays in the history with the reason).")
    @_tool_errors
    def facts_invalidate(
        fact_id: str, reason: Annotated[str, Field(min_length=1)], ctx: Context, replaced_by: str | None = None
    ) -> dict[str, Any]:
        return scope_for(ctx).invalidate_fact(fact_id, reason, replaced_by)

    @server.tool(description="The user's working blocks: name, version, size.")
    @_tool_errors
    def block_list(ctx: Context) -> dict[str, Any]:
        return {"blocks": scope_for(ctx).list_blocks()}

    @server.tool(description="Read a working block: its value and the version to pass to block_edit.")
    @_tool_errors
    def block_read(name: Annotated[str, Field(min_length=1)], ctx: Context) -> dict[str, Any]:
        return scope_for(ctx).read_block(name)

    @server.tool(
        description=(
            "Edit a working block at the version you read (0 creates it): update replaces the whole value, append "
            "adds a line, replace swaps the exact text 'old' for 'text'. A stale version is refused: read again."
        )
    )
    @_tool_errors
    def block_edit(
        name: Annotated[str, Field(min_length=1)],
        operation: Literal["update", "append", "replace"],
        text: str,
        expected_version: Annotated[int, Field(ge=0)],
        ctx: Context,
        old: str | None = None,
    ) -> dict[str, Any]:
        return scope_for(ctx).edit_block(name, operation, text, expected_version, old)

    @server.tool(description="The user's sessions, most recent first.")
    @_tool_errors
    def sessions_list(ctx: Context, limit: Annotated[int, Field(ge=1, le=1_000)] = 20) -> dict[str, Any]:
        return {"sessions": scope_for(ctx).sessions(limit)}

    @server.tool(
        description="What a session's next request would hold, within its token budget, and what was left out."
    )
    @_tool_errors
    def session_context(
        session_id: Annotated[str, Field(min_length=1)],
        ctx: Context,
        format: Literal["openai", "anthropic", "responses"] = "openai",
        max_tokens: Annotated[int | None, Field(ge=1)] = None,
    ) -> dict[str, Any]:
        return scope_for(ctx).context(session_id, format, max_tokens)

    if isinstance(scope, UserScope):  # a static resource gets no request context, so only a fixed user has it

        @server.resource("convmem://sessions", mime_type="application/json", description="The user's sessions.")
        def sessions_resource() -> str:
            return json.dumps(scope.sessions())

    @server.resource(
        "convmem://sessions/{session_id}",
        mime_type="application/jsonl",
        description="One session, every message, as convmem's lossless JSONL export.",
    )
    def session_resource(session_id: str, ctx: Context) -> str:
        try:
            return scope_for(ctx).session_export(session_id)
        except ConvmemError as exc:
            raise ResourceError(str(exc)) from exc

    return server
