"""A LlamaIndex ``BaseMemory`` kept by convmem: budgeted, the system prompt pinned, tool calls whole.

LlamaIndex's own ``Memory`` flushes the oldest messages past its token limit,
the system prompt among them. Here the messages live in a convmem memory, which
pins system messages and evicts whole units::

    agent / chat engine      ConvmemMemory
      put / put_messages  ->  memory.add_many(those it does not hold)   stored once, counted once
      get(input)          ->  memory.context() as ChatMessages          within the budget
      get_all             ->  every stored message, archived ones included
      set(messages)       ->  a history that goes on from what the memory holds: its new messages added;
                              another: memory.clear(keep_system=False), then add_many
      reset               ->  memory.clear(keep_system=False)           archived, not deleted

The memory is anything with its protocol (:mod:`convmem.memory.protocol`): ``Memory``,
``AsyncMemory``, ``Client`` or ``AsyncClient``; the async methods (``aget``, ``aput``...,
which agents call) await an async one, the sync ones need a sync one. A ``ChatMessage`` has
no id, so the messages the memory holds are known by a fingerprint chained to the message
before (:mod:`convmem.integrations._identity`), read back from the memory: a saved
``chat_history`` passed to ``agent.run(..., chat_history=...)`` in a new process (the
agent calls ``set``) adds only what is new.

Messages cross as convmem Messages: text blocks become the content, ``ToolCallBlock``
blocks the tool calls, and a ``tool`` message's ``additional_kwargs["tool_call_id"]``
the call it answers; other block types (images, audio, documents) are refused with
InvalidMessageError rather than dropped silently.

A ``FunctionAgent`` appends its in-progress tool exchange (the run's calls and results,
put into the memory when the run ends) to what ``get`` returns: give the memory a
``max_output_tokens`` that covers the reply and one round of tool results.

Example::

    from llama_index.core.agent.workflow import FunctionAgent
    from convmem import Memory
    from convmem.integrations.llamaindex import ConvmemMemory

    memory = Memory(model="gpt-4o", max_tokens=16_000, max_output_tokens=2_000)
    memory.add({"role": "system", "content": "You are a helpful assistant."})
    agent = FunctionAgent(tools=[...], llm=llm)
    await agent.run("Hi!", memory=ConvmemMemory(memory=memory))
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from ..errors import InvalidMessageError
from ..memory import Memory
from ..messages import Message, ToolCall
from . import missing
from ._bridge import AnyMemory, MemoryFlow, arun, on, run
from ._identity import Ledger, fingerprint, plan, read_ledger, sync

try:
    from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
    from llama_index.core.memory.types import BaseMemory
    from pydantic import ConfigDict, Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("llama-index-core", "llamaindex") from exc

__all__ = ["ConvmemMemory"]


_ASYNC = "the async methods (aget, aput, aput_messages, aset, areset), which agents call"


class ConvmemMemory(BaseMemory):
    """A LlamaIndex memory over a convmem memory (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    memory: Any = Field(exclude=True, description="the convmem memory holding the messages (its protocol)")
    _ledger: Ledger | None = PrivateAttr(default=None)  # what the memory holds, read from it on first use

    @classmethod
    def class_name(cls) -> str:
        return "ConvmemMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ConvmemMemory:
        """A memory over ``Memory(**kwargs)`` (e.g. ``model=``, ``max_tokens=``, ``store=``)."""
        return cls(memory=Memory(**kwargs))

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The memory's budgeted context (``input`` is already in it: agents put the user message first)."""
        return run(self._memory, _context(), what=_ASYNC)

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return await arun(self._memory, _context())

    def get_all(self) -> list[ChatMessage]:
        """Every stored message, oldest first, archived ones included."""
        return run(self._memory, _all(), what=_ASYNC)

    async def aget_all(self) -> list[ChatMessage]:
        return await arun(self._memory, _all())

    def put(self, message: ChatMessage) -> None:
        self.put_messages([message])

    async def aput(self, message: ChatMessage) -> None:
        await self.aput_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store the ones the memory does not hold, in one write; an invalid one raises InvalidMessageError."""
        run(self._memory, self._put([_message(m) for m in messages]), what=_ASYNC)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await arun(self._memory, self._put([_message(m) for m in messages]))

    def set(self, messages: list[ChatMessage]) -> None:
        """Make ``messages`` the history: what goes on from the memory adds its new messages; another history
        replaces the context (what was there stays archived)."""
        run(self._memory, self._set([_message(m) for m in messages]), what=_ASYNC)

    async def aset(self, messages: list[ChatMessage]) -> None:
        await arun(self._memory, self._set([_message(m) for m in messages]))

    def reset(self) -> None:
        run(self._memory, self._reset(), what=_ASYNC)

    async def areset(self) -> None:
        await arun(self._memory, self._reset())

    @property
    def _memory(self) -> AnyMemory:
        return self.memory  # type: ignore[no-any-return]

    def _read(self) -> MemoryFlow[Ledger]:
        if self._ledger is None:
            self._ledger = yield from read_ledger()
        return self._ledger

    def _put(self, converted: list[Message]) -> MemoryFlow[None]:
        ledger = yield from self._read()
        yield from sync(converted, [None] * len(converted), ledger, history=False)

    def _set(self, converted: list[Message]) -> MemoryFlow[None]:
        ledger = yield from self._read()
        given: list[str | None] = [None] * len(converted)
        if ledger.last is None or ledger.last in [m.id for m in plan(converted, given, ledger, history=True).messages]:
            yield from sync(converted, given, ledger, history=True)  # it goes on from the memory: only its new messages
            return
        # Another history: it replaces the context. Its ids chain from the memory's newest message, its
        # system messages' too, so none of them is taken for a message the memory archived.
        keyed, previous = [], ledger.last
        for message in converted:
            previous = fingerprint(previous, message)
            keyed.append(replace(message, id=previous))
        yield on("clear", keep_system=False)
        if keyed:
            yield on("add_many", keyed)
        self._ledger = None

    def _reset(self) -> MemoryFlow[None]:
        yield on("clear", keep_system=False)


def _context() -> MemoryFlow[list[ChatMessage]]:
    context = yield on("context", format="openai")
    return [_chat_message(d) for d in context.messages]


def _all() -> MemoryFlow[list[ChatMessage]]:
    stored = yield on("messages")
    return [_chat_message(d) for d in _openai(stored)]


def _message(chat: ChatMessage) -> Message:
    role = str(chat.role.value if hasattr(chat.role, "value") else chat.role)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(chat.blocks):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            arguments = block.tool_kwargs if isinstance(block.tool_kwargs, str) else json.dumps(block.tool_kwargs)
            calls.append(ToolCall(block.tool_call_id or f"call_{i}", block.tool_name, arguments))
        else:
            raise InvalidMessageError(f"{type(block).__name__} is not supported by ConvmemMemory", field=f"blocks[{i}]")
    text = "".join(texts)
    if role == "tool":
        call_id = chat.additional_kwargs.get("tool_call_id")
        return Message(role="tool", content=text, tool_call_id=call_id)
    if role == "assistant":
        return Message(role="assistant", content=(text or None) if calls else text, tool_calls=tuple(calls))
    if role in ("chatbot", "model"):
        return Message(role="assistant", content=text)
    return Message(role=role, content=text)  # type: ignore[arg-type]  # validated: other roles are refused


def _openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    from ..formats import render

    return cast(list[dict[str, Any]], render(list(messages), "openai"))


def _chat_message(d: Mapping[str, Any]) -> ChatMessage:
    role = d["role"]
    content = d.get("content") or ""
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    if role == "tool":
        return ChatMessage(role="tool", content=text, additional_kwargs={"tool_call_id": d["tool_call_id"]})
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    for call in d.get("tool_calls") or ():
        function = call["function"]
        blocks.append(
            ToolCallBlock(
                tool_call_id=call["id"], tool_name=function["name"], tool_kwargs=json.loads(function["arguments"])
            )
        )
    return ChatMessage(role=role, blocks=blocks)
