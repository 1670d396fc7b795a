"""``OpenAICompatibleFactExtractor``: fact operations as validated structured output.

The model receives the user's facts that hold now (with their ids) and the
new messages (with their ids and times), and must answer with JSON that
matches :data:`SCHEMA` (sent as an OpenAI ``json_schema`` response format,
strict; ``json_object`` for servers without schema support). The reply is
checked twice:

1. **The envelope** (pydantic): malformed JSON, or a reply that ignores the
   schema, is rejected as a whole with the reason, as an
   :class:`~convmem.errors.LLMError`. No fact changes (invariant 8).
2. **Each operation**, against what the model was shown. An operation is
   dropped, and listed in :attr:`Extraction.rejected` with the reason, when it
   names no source message or only ids that were not among the new messages,
   when an update or invalidation names a fact that is not one of the valid
   facts shown, when a second operation targets a fact already targeted, or
   when an invalidation has no reason.

Two failure modes of other systems shaped the operations. Mem0 once deleted a
contradicted fact without adding its replacement: here a changed fact is an
*update*, which ends the old version and records the new one in one
operation, so "forgot to add the new value" cannot be expressed; *invalidate*
is only for facts that stopped holding with no replacement, and needs a
reason. Graphiti invalidates facts loosely related to a new one: here an
invalidation must name the exact id of a fact that was shown and is still
valid, and must cite the new messages that end it.

Example::

    extractor = OpenAICompatibleFactExtractor("gpt-4o-mini")
    facts = Facts(extractor=extractor)          # an eviction sink: Memory(..., sinks=[facts])
    ops = extractor.extract(messages, facts.list(user_id="alice", valid_at=now), user_id="alice")
    ops.rejected, ops.usage
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigurationError, LLMError
from ..longterm.facts.model import Fact, FactAdd, FactInvalidate, FactOperation, FactUpdate
from ..messages import Message
from ..usage import ModelUsage
from ._render import render
from .client import AsyncChatBackend, ChatBackend, Completion, OpenAIChat, RetryPolicy

__all__ = ["EXTRACT_PROMPT", "SCHEMA", "Extraction", "OpenAICompatibleFactExtractor", "Rejected"]

EXTRACT_PROMPT = """\
You keep a list of durable facts about a user. You receive the facts that hold now, each with its id, and new \
conversation messages, each with its id and time. Reply with JSON operations that bring the list up to date:
- "add": a new fact that is not known yet. "text" is one self-contained sentence that names the person (no \
pronouns); "subject" is a short dotted key such as "user.home_city".
- "update": a known fact changed (a move, a new job, a new preference). Give its "fact_id", the new "text" and \
the "reason". Always use update, never invalidate, when a message states a new value: the old one is kept as history.
- "invalidate": a known fact stopped holding and nothing replaces it (for example "I sold my car"). Give its \
"fact_id" and the "reason".
Every operation lists in "source_message_ids" the ids of the new messages that state it. Touch a known fact only \
when a new message directly changes or ends it; never invalidate facts the messages do not talk about. Ignore \
small talk, questions, the assistant's own suggestions and passing states. Set unused fields to null. If there \
is nothing to record, reply {"operations": []}."""

#: The response schema (OpenAI strict structured outputs: every field required, nullable where unused).
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["operations"],
    "properties": {
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["op", "fact_id", "text", "subject", "reason", "source_message_ids"],
                "properties": {
                    "op": {"type": "string", "enum": ["add", "update", "invalidate"]},
                    "fact_id": {"type": ["string", "null"]},
                    "text": {"type": ["string", "null"]},
                    "subject": {"type": ["string", "null"]},
                    "reason": {"type": ["string", "null"]},
                    "source_message_ids": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}
_FENCE = re.compile(r"^```[a-z]*\n(.*)\n```$", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


class _Operation(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    op: Literal["add", "update", "invalidate"]
    fact_id: str | None = None
    text: str | None = None
    subject: str | None = None
    reason: str | None = None
    source_message_ids: list[str]


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    operations: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Rejected:
    """An operation the model proposed that was dropped, and why."""

    operation: Mapping[str, Any]
    reason: str


class Extraction(list[FactOperation]):
    """The accepted operations (a list), with ``rejected`` ones and the calls' ``usage``."""

    def __init__(
        self,
        operations: Sequence[FactOperation] = (),
        rejected: Sequence[Rejected] = (),
        usage: Sequence[ModelUsage] = (),
    ) -> None:
        super().__init__(operations)
        self.rejected = tuple(rejected)
        self.usage = tuple(usage)


class OpenAICompatibleFactExtractor:
    """A :class:`~convmem.longterm.facts.FactExtractor` (and its async twin) over an OpenAI-compatible model.

    Args:
        model: default ``$CONVMEM_LLM_MODEL``.
        base_url: default ``$CONVMEM_LLM_BASE_URL``, else the OpenAI API.
        api_key: default ``$CONVMEM_LLM_API_KEY`` (then ``$OPENAI_API_KEY``).
        response_format: ``"json_schema"`` (strict structured output) or ``"json_object"`` for
            servers that only guarantee JSON; the reply is validated the same way either way.
        max_output_tokens: the reply's token limit.
        timeout: seconds per attempt.
        retry: the :class:`~convmem.llm.client.RetryPolicy`.
        chat: a ready client instead of the options above.
        **client_options: more :class:`~convmem.llm.client.OpenAIChat` options.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        response_format: Literal["json_schema", "json_object"] = "json_schema",
        max_output_tokens: int = 2048,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        chat: ChatBackend | AsyncChatBackend | None = None,
        **client_options: Any,
    ) -> None:
        if response_format not in ("json_schema", "json_object"):
            raise ConfigurationError(f"response_format must be 'json_schema' or 'json_object', got {response_format!r}")
        if chat is None:
            chat = OpenAIChat(model, base_url=base_url, api_key=api_key, timeout=timeout, retry=retry, **client_options)
        self.chat: Any = chat
        self.model: str = chat.model
        self.max_output_tokens = max_output_tokens
        if response_format == "json_schema":
            schema = {"name": "fact_operations", "strict": True, "schema": SCHEMA}
            self.response_format: dict[str, Any] = {"type": "json_schema", "json_schema": schema}
        else:
            self.response_format = {"type": "json_object"}

    def __repr__(self) -> str:
        return f"OpenAICompatibleFactExtractor(model={self.model!r}, endpoint={self.chat.endpoint!r})"

    def extract(self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None) -> Extraction:
        """Operations implied by ``messages`` against ``facts``; raises LLMError on a failed or malformed reply."""
        if not messages:
            return Extraction()
        completion = self.chat.complete(
            prompt(messages, facts), max_tokens=self.max_output_tokens, response_format=self.response_format
        )
        return self._check(completion, messages, facts)

    async def aextract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> Extraction:
        """The async twin of :meth:`extract`."""
        if not messages:
            return Extraction()
        completion = await self.chat.acomplete(
            prompt(messages, facts), max_tokens=self.max_output_tokens, response_format=self.response_format
        )
        return self._check(completion, messages, facts)

    def _check(self, completion: Completion, messages: Sequence[Message], facts: Sequence[Fact]) -> Extraction:
        usage = (completion.usage,) if completion.usage is not None else ()
        try:
            raw = parse_reply(completion.text)
        except ValueError as exc:
            raise LLMError(
                f"{self.chat.endpoint}: fact extraction reply rejected: {exc}", endpoint=self.chat.endpoint, usage=usage
            ) from None
        accepted, rejected = validate(raw, messages, facts)
        return Extraction(accepted, rejected, usage)

    def close(self) -> None:
        close = getattr(self.chat, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        aclose = getattr(self.chat, "aclose", None)
        if callable(aclose):
            await aclose()
        else:
            self.close()


def prompt(messages: Sequence[Message], facts: Sequence[Fact]) -> list[dict[str, Any]]:
    """The request: the instructions, the valid facts with their ids, the new messages with theirs."""
    known = [f"[{f.id}] ({f.subject or '-'}) {f.text}" for f in facts if f.valid_to is None]
    lines = [render(m, with_id=True) for m in messages]
    user = (
        "<known_facts>\n"
        + ("\n".join(known) or "(none)")
        + "\n</known_facts>\n\n<new_messages>\n"
        + "\n".join(lines)
        + "\n</new_messages>"
    )
    return [{"role": "system", "content": EXTRACT_PROMPT}, {"role": "user", "content": user}]


def parse_reply(text: str) -> list[dict[str, Any]]:
    """The raw operations of a reply; ValueError names why a reply is malformed or off-schema."""
    text = _THINK.sub("", text).strip()
    if fenced := _FENCE.match(text):
        text = fenced.group(1).strip()
    if not text:
        raise ValueError("empty reply")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"malformed JSON ({exc}): {text[:80]!r}") from None
    try:
        return _Reply.model_validate(data).operations
    except ValidationError as exc:
        raise ValueError(f"the reply does not match the schema: {_first_error(exc)}") from None


def validate(
    raw: Sequence[Mapping[str, Any]], messages: Sequence[Message], facts: Sequence[Fact]
) -> tuple[list[FactOperation], list[Rejected]]:
    """Keep the operations that are well-formed and grounded; reject the rest with a reason each."""
    message_ids = {m.id for m in messages if m.id is not None}
    valid = {f.id for f in facts if f.valid_to is None}
    targeted: set[str] = set()
    accepted: list[FactOperation] = []
    rejected: list[Rejected] = []
    for item in raw:
        try:
            op = _Operation.model_validate(item)
        except ValidationError as exc:
            rejected.append(Rejected(item, f"malformed operation: {_first_error(exc)}"))
            continue
        sources = tuple(i for i in op.source_message_ids if i in message_ids)
        problem = None
        if not sources:
            problem = f"cites no new message (source_message_ids {op.source_message_ids!r})"
        elif op.op != "add" and op.fact_id not in valid:
            problem = f"{op.op} names {op.fact_id!r}, which is not a valid known fact"
        elif op.op != "add" and op.fact_id in targeted:
            problem = f"a second operation on fact {op.fact_id!r} in one reply"
        if problem is None:
            try:
                accepted.append(_build(op, sources))
            except ValueError as exc:  # e.g. an invalidation without a reason, an empty text
                problem = str(exc)
        if problem is not None:
            rejected.append(Rejected(item, problem))
        elif op.fact_id is not None and op.op != "add":
            targeted.add(op.fact_id)
    return accepted, rejected


def _build(op: _Operation, sources: tuple[str, ...]) -> FactOperation:
    if op.op == "add":
        return FactAdd(op.text or "", source_message_ids=sources, subject=op.subject or None)
    assert op.fact_id is not None
    if op.op == "update":
        return FactUpdate(
            op.fact_id,
            op.text or "",
            source_message_ids=sources,
            subject=op.subject or None,
            reason=op.reason or "updated",
        )
    return FactInvalidate(op.fact_id, op.reason or "", source_message_ids=sources)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "reply"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {error['msg']}{more}"
