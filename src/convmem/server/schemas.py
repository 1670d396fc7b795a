"""The request and response bodies of the HTTP API (pydantic models; they make the OpenAPI document).

Messages travel as JSON objects in any of the three provider formats on the
way in (detected exactly as ``Memory.add`` detects them), or in convmem's own
lossless codec (``format: "convmem"``, what :class:`convmem.Client` sends so
that ids and timestamps made by the client are kept). On the way out a stored
message is always in convmem's codec (:mod:`convmem.stores.codec`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .json_rules import BUDGET_KNOWN, EDIT_NEEDS, Scalar
from .json_rules import METADATA as _METADATA
from .json_rules import VISIBLE as _VISIBLE
from .tenancy import SESSION_ID

__all__ = [
    "AccountOut",
    "BlockEditIn",
    "BlockOut",
    "BlockPutIn",
    "ClearIn",
    "ContextIn",
    "ContextOut",
    "FactIn",
    "FactInvalidateIn",
    "FactOut",
    "FactUpdateIn",
    "ForkIn",
    "ImportIn",
    "KeyCreated",
    "KeyOut",
    "LeftOutOut",
    "MessageOut",
    "MessagePage",
    "MessagesAdded",
    "MessagesIn",
    "RecallHitOut",
    "RecallIn",
    "RecallOut",
    "ResponseIn",
    "SessionCreate",
    "SessionDetail",
    "SessionList",
    "SessionOut",
    "SessionUpdate",
    "SummaryOut",
    "TenantIn",
    "TurnOut",
    "UsageIn",
]

Format = Literal["openai", "anthropic", "responses"]
Strategy = Literal["token_budget", "sliding_window", "summary_buffer", "compaction"]
Status = Literal["pinned", "active", "archived", "summarized", "cleared"]
_EXAMPLE_MESSAGE: dict[str, Any] = {"role": "user", "content": "What's the weather in Paris?"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionCreate(_Strict):
    """A new session and the options that decide its context (saved with it, like ``Memory``'s)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"model": "gpt-4o", "max_output_tokens": 1024, "title": "Trip planning"}],
            # The budget must be known: a model, or max_tokens. Which model names the registry knows (snapshots,
            # vendor prefixes) and that max_output_tokens stays under the budget are rules JSON Schema cannot
            # state; the service refuses them with the library's own 422 (tests/server/test_schema_strictness.py).
            "anyOf": BUDGET_KNOWN,
        },
    )
    id: str | None = Field(default=None, pattern=SESSION_ID, description="Chosen by the client, or made up.")
    model: str | None = Field(default=None, max_length=200)
    max_tokens: int | None = Field(default=None, ge=1, le=100_000_000)
    max_output_tokens: int | None = Field(default=None, ge=0, le=100_000_000)
    strategy: Strategy = "token_budget"
    strategy_options: dict[str, Scalar] = Field(default_factory=dict, max_length=20)
    summary_max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    on_overflow: Literal["truncate", "raise"] = "truncate"
    format: Format = "openai"
    title: str | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_METADATA)


class SessionOut(BaseModel):
    id: str
    user_id: str | None
    title: str | None
    model: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    message_count: int
    tokens: int
    parent_id: str | None = None
    fork_seq: int | None = None


class SessionDetail(SessionOut):
    """A session with the options it is opened with and its running figures (``Memory.stats()``)."""

    budget: int
    reserved_output: int
    options: dict[str, Any]
    stats: dict[str, Any]
    pending_tool_calls: list[str]


class SessionList(BaseModel):
    items: list[SessionOut]


class SessionUpdate(_Strict):
    title: str | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"anyOf": [{"type": "object", **_METADATA}, {"type": "null"}]}
    )


class ForkIn(_Strict):
    at_seq: int = Field(ge=0, le=2**53, description="The last seq the fork shares with its parent.")


class ImportIn(_Strict):
    jsonl: str = Field(min_length=1, description="An export (``GET .../export``), all or nothing.")
    id: str | None = Field(default=None, pattern=SESSION_ID, description="Import under this id instead.")


class MessagesIn(_Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"messages": [_EXAMPLE_MESSAGE]}]})
    messages: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=1000,
        # A message has a role (OpenAI, Anthropic, a Responses message) or a type (a Responses item): the
        # formats' own rules beyond that are the library's parsers' (the same 422 in process and over HTTP).
        json_schema_extra={"items": {"type": "object", "anyOf": [{"required": ["role"]}, {"required": ["type"]}]}},
    )
    format: Literal["auto", "convmem"] = Field(
        default="auto", description="auto: OpenAI, Anthropic or Responses dicts, detected; convmem: the codec."
    )


class MessagesAdded(BaseModel):
    # The session and user they went into, so that a link to the next call resolves from the response even
    # when the request named no user (``$request.query.user_id`` does not resolve then).
    session_id: str = Field(description="The session the messages are in.")
    user_id: str | None = Field(description="The user within the key's tenant (null: the anonymous user).")
    messages: list[dict[str, Any]] = Field(description="The messages as stored (convmem codec), with id and time.")


class MessageOut(BaseModel):
    seq: int
    tokens: int
    status: Status
    message: dict[str, Any]


class MessagePage(BaseModel):
    items: list[MessageOut]
    next_cursor: int | None = Field(description="Pass as ``cursor`` for the next page; null at the end.")


class ContextIn(_Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"input": "And tomorrow?", "format": "anthropic"}]}
    )
    input: str | dict[str, Any] | list[dict[str, Any]] | None = Field(
        default=None, description="The new turn, not stored: text, a message, or messages."
    )
    format: Format | None = Field(default=None, description="Default: the session's format.")


class AccountOut(BaseModel):
    budget: int
    reserved_output: int
    pinned: int
    summary: int
    blocks: dict[str, int]
    window: int
    input: int
    overhead: int
    total: int
    free: int
    exact: bool
    counter: str
    reused: int = Field(
        description="Prefix tokens shared with the session's previous context (the service keeps each session's "
        "memory open between requests; 0 after it was opened again)."
    )
    breakpoints: list[int] = Field(description="Token offsets where the stable parts of the context end.")
    tools: int = Field(default=0, description="Tokens of the tool definitions sent with the request.")
    tools_changed: bool = Field(default=False, description="The tools differ from the previous context's.")


class LeftOutOut(BaseModel):
    reason: str
    messages: int
    tokens: int
    first_seq: int | None
    last_seq: int | None
    detail: str


class ContextOut(BaseModel):
    format: Format
    request: dict[str, Any] = Field(description="Keyword arguments for the provider SDK call.")
    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None
    account: AccountOut
    left_out: list[LeftOutOut]
    truncated: list[dict[str, Any]]
    window: list[int] | None
    warnings: list[str]


class ResponseIn(_Strict):
    response: dict[str, Any] = Field(
        description="A provider response object (chat completion, message, response).",
        json_schema_extra={
            "anyOf": [{"required": ["choices"]}, {"required": ["output"]}, {"required": ["content", "role"]}]
        },
    )
    format: Format | None = Field(default=None, description="Default: detected from the response's shape.")


class UsageIn(_Strict):
    usage: dict[str, Any] = Field(description="A provider usage object (OpenAI, Responses or Anthropic).")
    model: str | None = Field(default=None, max_length=200)


class ClearIn(_Strict):
    keep_system: bool = True


class SummaryOut(BaseModel):
    after_seq: int = Field(description="The message whose add made this summary.")
    text: str
    first_seq: int
    last_seq: int
    tokens: int


class TurnOut(BaseModel):
    seq: int = Field(description="The context is the one built right after this message was added.")
    last_seq: int
    context: ContextOut
    summary: SummaryOut | None
    exact: bool = Field(description="False if the session's options cannot be replayed exactly (see the docs).")
    notes: list[str]


class FactIn(_Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"text": "Alice lives in Lisbon", "subject": "alice.home"}]},
    )
    text: str = Field(min_length=1, max_length=4000, pattern=_VISIBLE)
    subject: str | None = Field(default=None, max_length=500)
    valid_from: datetime | None = None  # without an offset: UTC, as everywhere in convmem
    source_message_ids: list[str] = Field(default_factory=list, max_length=100)
    session_id: str | None = Field(default=None, pattern=SESSION_ID)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    metadata: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_METADATA)


class FactUpdateIn(_Strict):
    text: str = Field(min_length=1, max_length=4000, pattern=_VISIBLE)
    subject: str | None = Field(default=None, max_length=500)
    reason: str = Field(default="updated", min_length=1, max_length=500)


class FactInvalidateIn(_Strict):
    reason: str = Field(min_length=1, max_length=500)
    replaced_by: str | None = Field(default=None, max_length=200)


class FactOut(BaseModel):
    id: str
    user_id: str | None
    text: str
    subject: str | None
    valid_from: datetime
    valid_to: datetime | None
    created_at: datetime
    session_id: str | None
    source_message_ids: list[str]
    confidence: float | None
    invalid_reason: str | None
    replaced_by: str | None
    invalidated_by: list[str]
    metadata: dict[str, Any]


class BlockOut(BaseModel):
    name: str
    user_id: str | None = Field(description="The user the block belongs to (null: the tenant's anonymous user).")
    value: str
    version: int
    priority: int
    position: str
    max_tokens: int | None
    description: str | None
    tokens: int


class BlockPutIn(_Strict):
    value: str = Field(max_length=200_000)
    expected_version: int = Field(ge=0, le=2**53, description="0 creates the block; else the version you read.")
    priority: int | None = Field(default=None, ge=0, le=1000)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    position: Literal["system", "user"] | None = None
    description: str | None = Field(default=None, max_length=1000)


class BlockEditIn(_Strict):
    model_config = ConfigDict(
        extra="forbid",
        # What each op needs, stated where a client reads it (the service refuses the rest as invalid-edit).
        json_schema_extra={"anyOf": EDIT_NEEDS},
    )
    op: Literal["append", "replace"]
    expected_version: int = Field(ge=1, le=2**53)
    text: str | None = Field(default=None, max_length=200_000, description="append: the text to add.")
    old: str | None = Field(default=None, min_length=1, max_length=200_000, description="replace: the text to find.")
    new: str | None = Field(default=None, max_length=200_000, description="replace: its replacement.")


class RecallIn(_Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"query": "where did I park?", "k": 5}]})
    query: str = Field(min_length=1, max_length=2000)
    k: int = Field(default=10, ge=1, le=100)
    mode: Literal["lexical", "dense", "hybrid"] | None = None
    session_id: str | None = Field(default=None, pattern=SESSION_ID)


class RecallHitOut(BaseModel):
    session_id: str
    seq: int
    message_id: str
    role: str
    text: str
    created_at: datetime
    score: float = Field(description="The fused score (or the single retriever's).")
    signals: dict[str, dict[str, float | int | None]] = Field(
        description="Per signal (lexical, dense, fused): its rank among the candidates and its score; lexical also "
        "gives the raw BM25 of the query's own words. A signal that did not rank the hit has nulls."
    )
    boosts: dict[str, float] = Field(
        default_factory=dict, description="What each ranking step added (feedback, neighbour) or multiplied (date)."
    )
    rank: int = Field(description="Its place in the results (1 = best).")
    ranked_by: str = Field(description="lexical, dense or fused.")
    reason: str = Field(description="Why it was kept, in one line.")


class RecallOut(BaseModel):
    mode: str
    items: list[RecallHitOut]


class RecallModesOut(BaseModel):
    modes: list[Literal["lexical", "dense", "hybrid"]] = Field(description="The modes this service can search in.")
    default: Literal["lexical", "dense", "hybrid"] = Field(description="The mode of a search that names none.")


class TenantIn(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")


class KeyOut(BaseModel):
    key_id: str
    tenant: str
    label: str | None
    created_at: str
    revoked_at: str | None


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, stored only as a hash.")


class KeyCreateIn(_Strict):
    label: str | None = Field(default=None, max_length=200)
