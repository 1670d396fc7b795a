"""Pydantic AI memory kept by convmem: budgeted requests, the system prompt pinned, tool calls whole.

Pydantic AI leaves trimming to history processors, and the usual one (keep the last
N messages) can start the history with a tool return whose call was cut, or drop the
first request and with it the system prompt. :class:`ConvmemHistory` hands the
history to a convmem memory and sends the model the memory's context::

    as a capability: Agent(..., capabilities=[ConvmemHistory(memory)])
      before each model request  messages the memory does not hold -> memory.add_many(...)
                                 memory.context() -> the request's messages (the run's history is untouched)
      after each model response  the response -> memory.add_many(...)   (a run's last answer is stored at once)
    as a history processor: ProcessHistory(ConvmemHistory(memory))  (``history_processors=`` in Pydantic AI 1.x)
      the same, but Pydantic AI then keeps the returned context as the run's history

Pass a run's ``all_messages()`` to the next run (the usual pattern: save it as JSON,
load it in another process, pass it as ``message_history=``), or pass nothing and let
the memory supply the history. The memory is anything with its protocol
(:mod:`convmem.memory.protocol`): ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.

Which messages the memory holds is known by a durable identity, never by this object
(:mod:`convmem.integrations._identity`): each ``ModelRequest`` and ``ModelResponse`` it
stores gets the ids of its messages in its ``metadata`` (``{"convmem": {"ids": [...]}}``,
which Pydantic AI keeps in ``all_messages()`` and its JSON and never sends to the model),
and a message made from the memory's context says so (``{"convmem": {"context": true}}``);
a message without either is known by a fingerprint. So a saved history passed to a new
process, or to a new ``ConvmemHistory`` per request, stores nothing twice, and a system
prompt the memory already pins is not stored again.

Parts cross as: ``SystemPromptPart`` -> system, ``UserPromptPart`` (text) -> user,
``ToolReturnPart`` and a tool's ``RetryPromptPart`` -> tool results, another
``RetryPromptPart`` -> user, ``TextPart`` and ``ToolCallPart`` -> the assistant message.
``ThinkingPart`` is not sent back (chat formats have no place for it); other parts
(files, images, built-in tool parts) raise InvalidMessageError rather than vanish.
Instructions (``Agent(instructions=...)``) travel outside the history and are not counted.

Example::

    from pydantic_ai import Agent
    from convmem import AsyncMemory
    from convmem.integrations.pydantic_ai import ConvmemHistory

    memory = AsyncMemory(model="gpt-4o", max_tokens=16_000, max_output_tokens=1_000)
    agent = Agent("openai:gpt-4o", system_prompt="Be brief.", capabilities=[ConvmemHistory(memory)])
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidMessageError
from ..messages import Message, ToolCall
from . import missing
from ._bridge import AnyMemory, MemoryFlow, arun, on
from ._identity import Ledger, read_ledger, sync

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("pydantic-ai-slim", "pydantic-ai") from exc

__all__ = ["ConvmemHistory"]


KEY = "convmem"  # the metadata key of the ids (and the context mark) on Pydantic AI messages


class ConvmemHistory(AbstractCapability[Any]):
    """A capability and a history processor over one conversation's memory (use one per conversation)."""

    def __init__(self, memory: AnyMemory) -> None:
        self.memory = memory
        self._ledger: Ledger | None = None  # what the memory holds, read from it on first use

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # not spec-serializable: it holds a memory

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await arun(self.memory, self._absorb(request_context.messages))
        request_context.messages = await arun(self.memory, _context())  # request-only: the run keeps its history
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        await arun(self.memory, self._absorb([response], history=False))  # it follows the memory's newest message
        return response

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """As a history processor: Pydantic AI replaces the run's history with what this returns."""
        await arun(self.memory, self._absorb(messages))
        return await arun(self.memory, _context())

    def _absorb(self, messages: Sequence[ModelMessage], *, history: bool = True) -> MemoryFlow[None]:
        """Store what the memory does not hold, and stamp every message with the ids of its messages."""
        if self._ledger is None:
            self._ledger = yield from read_ledger()
        batch: list[Message] = []
        given: list[str | None] = []
        owners: list[tuple[ModelMessage, int]] = []  # (its Pydantic AI message, how many messages it made)
        for index, message in enumerate(messages):
            stamp = (message.metadata or {}).get(KEY) or {}
            if stamp.get("context"):
                continue  # made from the memory's own context: the memory holds it (or it is a summary)
            try:
                converted = _to_convmem([message])
            except InvalidMessageError as exc:
                raise exc.at(index) from None
            ids = stamp.get("ids")
            if isinstance(ids, list) and len(ids) == len(converted) and all(isinstance(i, str) for i in ids):
                given += ids
            else:  # never stamped (or stamped by hand): a fingerprint
                given += [None] * len(converted)
            batch += converted
            owners.append((message, len(converted)))
        planned = yield from sync(batch, given, self._ledger, history=history)
        keyed = iter(planned.messages)
        for message, count in owners:
            if count:
                message.metadata = {**(message.metadata or {}), KEY: {"ids": [next(keyed).id for _ in range(count)]}}


def _context() -> MemoryFlow[list[ModelMessage]]:
    context = yield on("context", format="openai")
    out = _from_openai(context.messages)
    for message in out:
        message.metadata = {KEY: {"context": True}}
    return out


def _to_convmem(messages: Sequence[ModelMessage]) -> list[Message]:
    out: list[Message] = []
    for index, message in enumerate(messages):
        try:
            if isinstance(message, ModelResponse):
                out += _response(message.parts)
            else:
                out += [_request_part(part) for part in message.parts]
        except InvalidMessageError as exc:
            raise exc.at(index) from None
    return out


def _request_part(part: ModelRequestPart) -> Message:
    if isinstance(part, SystemPromptPart):
        return Message(role="system", content=part.content)
    if isinstance(part, UserPromptPart):
        if not isinstance(part.content, str):
            raise InvalidMessageError("only text user prompts are supported by ConvmemHistory", field="content")
        return Message(role="user", content=part.content)
    if isinstance(part, ToolReturnPart):
        return Message(role="tool", content=part.model_response_str(), tool_call_id=part.tool_call_id)
    if isinstance(part, RetryPromptPart):
        if part.tool_name is not None:
            return Message(role="tool", content=part.model_response(), tool_call_id=part.tool_call_id)
        return Message(role="user", content=part.model_response())
    raise InvalidMessageError(f"{type(part).__name__} is not supported by ConvmemHistory", field="parts")


def _response(parts: Sequence[ModelResponsePart]) -> list[Message]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ToolCallPart):
            calls.append(ToolCall(part.tool_call_id, part.tool_name, part.args_as_json_str()))
        elif not isinstance(part, ThinkingPart):  # reasoning is not resent in chat formats
            raise InvalidMessageError(f"{type(part).__name__} is not supported by ConvmemHistory", field="parts")
    text = "".join(texts)
    if not text and not calls:
        return []  # a thinking-only response carries nothing the chat formats can send
    return [Message(role="assistant", content=text or None, tool_calls=tuple(calls))]


def _from_openai(dicts: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """OpenAI chat dicts -> alternating requests and responses (consecutive non-assistant dicts share a request)."""
    names: dict[str, str] = {}
    out: list[ModelMessage] = []
    request: list[ModelRequestPart] = []
    for d in dicts:
        role = d["role"]
        content = d.get("content") or ""
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        if role == "assistant":
            if request:
                out.append(ModelRequest(parts=request))
                request = []
            parts: list[ModelResponsePart] = [TextPart(text)] if text else []
            for call in d.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
                parts.append(
                    ToolCallPart(call["function"]["name"], json.loads(call["function"]["arguments"]), call["id"])
                )
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            call_id = d["tool_call_id"]
            request.append(ToolReturnPart(names[call_id], text, call_id))
        elif role == "user":
            request.append(UserPromptPart(text))
        else:
            request.append(SystemPromptPart(text))
    if request:
        out.append(ModelRequest(parts=request))
    return out
