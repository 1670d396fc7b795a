"""Pydantic AI memory kept by convmem: budgeted requests, the system prompt pinned, tool calls whole.

Pydantic AI leaves trimming to history processors, and the usual one (keep the last
N messages) can start the history with a tool return whose call was cut, or drop the
first request and with it the system prompt. :class:`ConvmemHistory` hands the
history to a :class:`~convmem.Memory` and sends the model the memory's context::

    as a capability: Agent(..., capabilities=[ConvmemHistory(memory)])
      before each model request  messages the memory has not seen -> memory.add_many(...)
                                 memory.context() -> the request's messages (the run's history is untouched)
      after each model response  the response -> memory.add_many(...)   (a run's last answer is stored at once)
    as a history processor: ProcessHistory(ConvmemHistory(memory))  (``history_processors=`` in Pydantic AI 1.x)
      the same, but Pydantic AI then keeps the returned context as the run's history

Pass a run's ``all_messages()`` to the next run, or pass nothing and let the memory
supply the history: a system prompt the memory already pins is not stored again.

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
from ..memory import AsyncMemory
from ..messages import Message, ToolCall
from . import missing
from ._bridge import AnyMemory, aadd_many, acontext

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


class ConvmemHistory(AbstractCapability[Any]):
    """A capability and a history processor over one conversation's memory (use one per conversation)."""

    def __init__(self, memory: AnyMemory) -> None:
        self.memory = memory
        self._held: list[ModelMessage] = []  # the history the memory holds, as Pydantic AI last showed it
        self._pinned: set[str] | None = None  # texts of the system messages the memory holds

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # not spec-serializable: it holds a memory

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await self._absorb(request_context.messages)
        request_context.messages = await self._context()  # request-only: the run's history keeps everything
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        await self._absorb([*self._held, response])
        return response

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """As a history processor: Pydantic AI replaces the run's history with what this returns."""
        await self._absorb(messages)
        self._held = await self._context()
        return list(self._held)

    async def _absorb(self, messages: Sequence[ModelMessage]) -> None:
        held = len(self._held)
        # The history goes on from what the memory holds (same run, or all_messages() passed on); anything
        # else is a run started without history, whose messages are all new.
        new = messages[held:] if held and list(messages[:held]) == self._held else messages
        if self._pinned is None:
            self._pinned = {m.text for m in await _pinned(self.memory)}
        converted = [m for m in _to_convmem(new) if not (m.role == "system" and m.text in self._pinned)]
        if converted:
            await aadd_many(self.memory, converted)
            self._pinned.update(m.text for m in converted if m.role == "system")
        self._held = list(messages)

    async def _context(self) -> list[ModelMessage]:
        return _from_openai((await acontext(self.memory, format="openai")).messages)


async def _pinned(memory: AnyMemory) -> list[Message]:
    if isinstance(memory, AsyncMemory):
        return await memory.messages("pinned")
    return memory.messages("pinned")


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
