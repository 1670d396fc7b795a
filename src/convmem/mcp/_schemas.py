"""What each MCP tool returns, as pydantic models: the output schemas an agent reads, every field described.

What comes in: the plain dicts of :mod:`convmem.mcp._scope`. What happens: each tool's
result is validated into its model here, so the schema its ``tools/list`` entry declares
(``outputSchema``) is the shape its results have (``tests/integrations/test_mcp_tools.py``
validates every result against it). What goes out: the models, which the MCP SDK sends as
structured content and as JSON text.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BlockOut",
    "BlockSummary",
    "BlocksOut",
    "ContextOut",
    "FactOut",
    "FactsOut",
    "HitOut",
    "HitsOut",
    "LeftOutOut",
    "RememberedOut",
    "SessionOut",
    "SessionsOut",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HitOut(_Out):
    text: str = Field(description="What was said, as stored.")
    role: str = Field(description="Who said it: user, assistant or tool.")
    session_id: str = Field(description="The session it was said in (pass it to session_context).")
    seq: int = Field(description="Its position in that session, from 0.")
    said_at: str | None = Field(description="When it was said (ISO 8601), if known.")
    score: float = Field(description="How well it matches the query; higher is better, comparable within one search.")


class HitsOut(_Out):
    hits: list[HitOut] = Field(description="The best matches first; empty when nothing matches.")


class RememberedOut(_Out):
    session_id: str = Field(description="The session the text was stored in.")
    message_id: str = Field(
        description="Its id: the same text remembered again has the same id and is not stored twice."
    )
    stored: bool = Field(description="False when the same text was remembered before (nothing new was stored).")


class FactOut(_Out):
    id: str = Field(description="The fact's id (pass it to facts_invalidate).")
    text: str = Field(description="The statement.")
    subject: str | None = Field(description="What it is about, e.g. 'alice.home', if given.")
    valid_from: str | None = Field(description="Since when it holds (ISO 8601).")
    valid_to: str | None = Field(description="When it stopped holding (ISO 8601); null while it holds.")
    invalid_reason: str | None = Field(description="Why it stopped holding, if it did.")
    replaced_by: str | None = Field(description="The id of the fact that replaced it, if any.")


class FactsOut(_Out):
    facts: list[FactOut] = Field(description="The facts, oldest first.")


class BlockOut(_Out):
    name: str = Field(description="The block's name.")
    value: str = Field(description="Its whole text.")
    version: int = Field(description="Its version: pass it as expected_version to block_edit.")
    priority: int = Field(description="Cut order when a context is over budget: 0 is never cut, higher is cut first.")
    max_tokens: int | None = Field(description="The most tokens its text may have; null: no cap.")
    position: str = Field(
        description="'system' (a quoted note right after the system prompt: an edited block never gets the system"
        " role) or 'user' (with the user's message)."
    )
    description: str | None = Field(description="What the block is for.")


class BlockSummary(BlockOut):
    chars: int = Field(description="The length of its text in characters.")


class BlocksOut(_Out):
    blocks: list[BlockSummary] = Field(description="The user's working blocks.")


class SessionOut(_Out):
    id: str = Field(description="The session's id (a unique prefix of it is enough for session_context).")
    title: str | None = Field(description="Its title, if it has one.")
    model: str | None = Field(description="The model it counts tokens for, if any.")
    messages: int = Field(description="How many messages it holds.")
    updated_at: str = Field(description="When it last changed (ISO 8601).")


class SessionsOut(_Out):
    sessions: list[SessionOut] = Field(description="The user's sessions, most recently updated first.")


class LeftOutOut(_Out):
    reason: str = Field(description="Why these messages are not in the context (e.g. evicted, summarized).")
    messages: int = Field(description="How many messages.")
    tokens: int = Field(description="How many tokens they hold.")


class ContextOut(_Out):
    session_id: str = Field(description="The session.")
    format: str = Field(description="The provider format of the messages: openai, anthropic or responses.")
    system: str | list[dict[str, Any]] | None = Field(description="Anthropic's separate system prompt; else null.")
    messages: list[dict[str, Any]] = Field(description="The request's messages, in the provider's format.")
    tokens: int = Field(description="Tokens of the whole request.")
    budget: int = Field(description="The session's budget for a request and its reply.")
    left_out: list[LeftOutOut] = Field(description="What did not fit, and why.")
