"""The convmem MCP server: long-term memory for any MCP client (Claude Desktop, IDE agents...).

What comes in: tool calls and resource reads from one MCP client, over stdio or
streamable HTTP (where every request needs a key of the service: :mod:`convmem.mcp._http`).
What happens: each is answered by the :class:`~convmem.mcp._scope.UserScope` of the
user the server was started for, over one store. What goes out: results of a declared
shape (every tool has an output schema, :mod:`convmem.mcp._schemas`, and its results
validate against it); a bad argument or a refused operation comes back as an MCP tool
error (``isError``) naming what is wrong and the limit, in the client's names, and the
server goes on.

Tools, each with every argument described and annotations (read-only, destructive,
idempotent): to recall, ``recall_search``, ``facts_list``, ``block_list``, ``block_read``,
``sessions_list``, ``session_context``; to remember, ``remember`` (a note or a message into
the user's archive, found again by recall), ``facts_add``, ``facts_invalidate``,
``block_edit`` (optimistic versions; the settings an edit does not name are kept; a
never-cut block that could not fit a session is refused). Resources:
``convmem://sessions/{session_id}`` (the session as lossless JSONL) and, for a fixed
user, ``convmem://sessions``.

Who the user is: ``build_server(scope=...)`` takes the fixed :class:`UserScope` of
``convmem mcp --user`` over stdio, or a ``scope_for(ctx)`` function called on every
request with the MCP request context (over HTTP: the tenant of the request's key).

Example::

    convmem mcp --user alice --db ~/memory.db                                    # stdio
    convmem mcp --user alice --transport streamable-http --port 8765             # http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from ..errors import ConvmemError
from ..integrations import missing
from ._schemas import BlockOut, BlocksOut, ContextOut, FactOut, FactsOut, HitsOut, RememberedOut, SessionsOut
from ._scope import Settings, UserScope

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp.types import ToolAnnotations
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("mcp", "mcp") from exc

__all__ = ["ScopeFor", "build_server"]

ScopeFor = Callable[[Context], UserScope]
F = TypeVar("F", bound=Callable[..., Any])
INSTRUCTIONS = (
    "Long-term memory of one user, across all of their conversations. Before answering about the past, search "
    "it with recall_search; remember what the user tells you to keep (remember), and durable facts about them "
    "(facts_add; end a fact that no longer holds with facts_invalidate: nothing is deleted). Working blocks are "
    "notes that go into every context: read a block, then edit it with the version you read (block_edit). "
    "session_context shows what a session's next request would hold within its token budget."
)
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

SessionId = Annotated[
    str, Field(min_length=1, max_length=200, description="A session id from sessions_list (a unique prefix is enough).")
]
BlockName = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="The block's name: letters, digits, '_' and '-'.")
]


def _answered(scope_for: ScopeFor) -> Callable[[F], F]:
    """A refused operation is the caller's to fix: an MCP tool error with convmem's message, in the client's names."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (ConvmemError, ValueError) as exc:  # ValueError: e.g. a fact with empty text
                raise ToolError(scope_for(kwargs["ctx"]).scrub(str(exc))) from exc

        return wrapper  # type: ignore[return-value]

    return decorate


def build_server(scope: UserScope | ScopeFor) -> MCPServer:
    """An MCP server answering for one user (``scope``), or for whoever ``scope(ctx)`` says."""
    fixed = scope if isinstance(scope, UserScope) else None
    scope_for: ScopeFor = (lambda ctx: fixed) if fixed is not None else scope  # type: ignore[assignment]
    server = MCPServer(name="convmem", instructions=INSTRUCTIONS)
    answered = _answered(scope_for)

    @server.tool(
        description="Search everything the user said before (every session, archived messages too), by meaning "
        "and words; the best matches first. Use it before answering about the past.",
        annotations=READ,
    )
    @answered
    def recall_search(
        query: Annotated[str, Field(min_length=1, max_length=2_000, description="What to look for, in words.")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="How many matches to return (1 to 50).")] = 5,
        session_id: Annotated[
            str | None, Field(min_length=1, max_length=200, description="Search only this session (default: all).")
        ] = None,
    ) -> HitsOut:
        return HitsOut.model_validate({"hits": scope_for(ctx).recall(query, k, session_id)})

    @server.tool(
        description="Remember a note or a message in the user's archive, where recall_search finds it later. The "
        "same text remembered again is stored once.",
        annotations=ADD,
    )
    @answered
    def remember(
        text: Annotated[str, Field(min_length=1, max_length=20_000, description="What to remember, in full.")],
        ctx: Context,
        role: Annotated[
            Literal["user", "assistant"],
            Field(description="'user' for what the user said or asked to keep, 'assistant' for your own conclusion."),
        ] = "user",
        session_id: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="The session to add it to (default: the 'notes' session)."),
        ] = None,
    ) -> RememberedOut:
        return RememberedOut.model_validate(scope_for(ctx).remember(text, role, session_id))

    @server.tool(
        description="The user's facts that hold now (or every fact ever, with include_ended).", annotations=READ
    )
    @answered
    def facts_list(
        ctx: Context,
        include_ended: Annotated[
            bool, Field(description="Also list facts that stopped holding, with why and when.")
        ] = False,
    ) -> FactsOut:
        return FactsOut.model_validate({"facts": scope_for(ctx).list_facts(include_ended)})

    @server.tool(
        description="Record a durable fact about the user; a duplicate of a fact that holds is merged into it.",
        annotations=ADD,
    )
    @answered
    def facts_add(
        text: Annotated[
            str, Field(min_length=1, max_length=4_000, description="The fact, as one statement: 'Lives in Lisbon'.")
        ],
        ctx: Context,
        subject: Annotated[
            str | None, Field(max_length=500, description="What it is about, e.g. 'alice.home' (optional).")
        ] = None,
    ) -> FactOut:
        return FactOut.model_validate(scope_for(ctx).add_fact(text, subject))

    @server.tool(
        description="End a fact that no longer holds; it stays in the history with the reason (nothing is deleted).",
        annotations=CHANGE,
    )
    @answered
    def facts_invalidate(
        fact_id: Annotated[str, Field(min_length=1, max_length=200, description="The fact's id, from facts_list.")],
        reason: Annotated[str, Field(min_length=1, max_length=500, description="Why it no longer holds.")],
        ctx: Context,
        replaced_by: Annotated[
            str | None, Field(max_length=200, description="The id of the fact that replaces it (optional).")
        ] = None,
    ) -> FactOut:
        return FactOut.model_validate(scope_for(ctx).invalidate_fact(fact_id, reason, replaced_by))

    @server.tool(description="The user's working blocks: name, version, size and settings.", annotations=READ)
    @answered
    def block_list(ctx: Context) -> BlocksOut:
        return BlocksOut.model_validate({"blocks": scope_for(ctx).list_blocks()})

    @server.tool(
        description="Read a working block: its text, settings and the version to pass to block_edit.", annotations=READ
    )
    @answered
    def block_read(name: BlockName, ctx: Context) -> BlockOut:
        return BlockOut.model_validate(scope_for(ctx).read_block(name))

    @server.tool(
        description=(
            "Edit a working block at the version you read (0 creates it): update replaces the whole text, append "
            "adds a line, replace swaps the exact text 'old' for 'text'. Settings you do not name stay as they are. "
            "A stale version is refused (read again), and so is a never-cut block (priority 0) that would not fit "
            "one of the user's sessions."
        ),
        annotations=CHANGE,
    )
    @answered
    def block_edit(
        name: BlockName,
        operation: Annotated[
            Literal["update", "append", "replace"], Field(description="update, append or replace (see above).")
        ],
        text: Annotated[
            str, Field(max_length=200_000, description="The new text, the line to add, or the replacement.")
        ],
        expected_version: Annotated[
            int, Field(ge=0, le=2**53, description="The version you read (block_read); 0 to create the block.")
        ],
        ctx: Context,
        old: Annotated[
            str | None, Field(min_length=1, max_length=200_000, description="replace: the exact text to replace.")
        ] = None,
        priority: Annotated[
            int | None, Field(ge=0, le=1_000, description="Cut order: 0 is never cut, higher is cut first.")
        ] = None,
        max_tokens: Annotated[
            int | None, Field(ge=1, le=1_000_000, description="The most tokens the text may have.")
        ] = None,
        description: Annotated[str | None, Field(max_length=1_000, description="What the block is for.")] = None,
    ) -> BlockOut:
        settings = Settings(priority=priority, max_tokens=max_tokens, description=description)
        return BlockOut.model_validate(
            scope_for(ctx).edit_block(name, operation, text, expected_version, old, settings)
        )

    @server.tool(description="The user's sessions (conversations), most recently updated first.", annotations=READ)
    @answered
    def sessions_list(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=1_000, description="List at most this many (1 to 1000).")] = 20,
    ) -> SessionsOut:
        return SessionsOut.model_validate({"sessions": scope_for(ctx).sessions(limit)})

    @server.tool(
        description="What a session's next request would hold, within its token budget, and what was left out.",
        annotations=READ,
    )
    @answered
    def session_context(
        session_id: SessionId,
        ctx: Context,
        format: Annotated[
            Literal["openai", "anthropic", "responses"], Field(description="The provider format of the messages.")
        ] = "openai",
        max_tokens: Annotated[
            int | None, Field(ge=1, le=100_000_000, description="Another budget to fit (default: the session's).")
        ] = None,
    ) -> ContextOut:
        return ContextOut.model_validate(scope_for(ctx).context(session_id, format, max_tokens))

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
        user = scope_for(ctx)
        try:
            return user.session_export(session_id)
        except ConvmemError as exc:
            raise ResourceError(user.scrub(str(exc))) from exc

    return server
