"""LangChain and LangGraph memory kept by convmem: budgeted messages, tool calls never orphaned.

LangChain's ``trim_messages`` and the usual summarizing wrappers cut by message
count or by tokens without knowing which messages belong together, so a tool
result can lose its call and the provider answers 400. Here the messages live in
a :class:`~convmem.Memory`, which evicts whole units::

    LangGraph agent state  ->  budgeted_messages_hook(memory)  ->  {"llm_input_messages": context}
                               (new state messages: memory.add_many; the state itself is untouched)
    RunnableWithMessageHistory -> ConvmemChatMessageHistory(memory)
                               .messages      -> memory.context() as LangChain messages
                               .add_messages  -> memory.add_many(...)
                               .clear()       -> memory.clear(keep_system=False)  (archived, not deleted)

Messages cross as OpenAI chat dicts, through LangChain's own ``convert_to_openai_messages`` and
``convert_to_messages``. Give the system prompt to the memory (a system message), not to the
agent's ``prompt=``: the memory then pins it and counts it in the budget.

Example::

    from langgraph.prebuilt import create_react_agent
    from convmem import Memory
    from convmem.integrations.langchain import budgeted_messages_hook

    memory = Memory(model="gpt-4o", max_tokens=16_000, max_output_tokens=1_000)
    memory.add({"role": "system", "content": "You are a helpful assistant."})
    agent = create_react_agent(model, tools, pre_model_hook=budgeted_messages_hook(memory))
    agent.invoke({"messages": [("user", "Hi!")]})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

from ..errors import ConfigurationError
from ..memory import Memory
from . import missing

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
    from langchain_core.runnables import RunnableConfig
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("langchain-core", "langchain") from exc

__all__ = ["ConvmemChatMessageHistory", "budgeted_messages_hook"]

MemoryFor = Memory | Callable[[str], Memory]


class ConvmemChatMessageHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` whose ``messages`` are the memory's budgeted context.

    ``RunnableWithMessageHistory`` reads ``messages`` *before* it appends the new input, so
    the context cannot count that input: give the memory a ``max_output_tokens`` that covers
    the reply and the longest new input you send.
    """

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a read-only view of the context
        return convert_to_messages(self.memory.context(format="openai").messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages in one write; an invalid one raises InvalidMessageError and nothing is stored."""
        self.memory.add_many(_dicts(messages))

    def clear(self) -> None:
        """Empty the context; the messages stay archived in the store."""
        self.memory.clear(keep_system=False)


def budgeted_messages_hook(memory: MemoryFor) -> Callable[[dict[str, Any], RunnableConfig], dict[str, Any]]:
    """A LangGraph ``pre_model_hook`` that sends the model the memory's budgeted context.

    Args:
        memory: one Memory, or a function from the run's ``thread_id`` to that thread's Memory.

    The hook adds the state's new messages to the memory (the state keeps every message, as
    LangGraph's checkpointer wants) and returns ``{"llm_input_messages": ...}``, which the agent
    sends instead of the state's messages.

    Raises:
        ConfigurationError: the state's history no longer starts with what the memory holds (a
            node removed or replaced messages), so the memory cannot follow it.
    """
    seen: WeakKeyDictionary[Memory, list[str | None]] = WeakKeyDictionary()  # ids of the messages each holds

    def hook(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        thread = str((config.get("configurable") or {}).get("thread_id", ""))
        target = memory if isinstance(memory, Memory) else memory(thread)
        held = seen.setdefault(target, [])
        messages: list[BaseMessage] = list(state["messages"])
        if [m.id for m in messages[: len(held)]] != held:
            raise ConfigurationError(
                "budgeted_messages_hook: the graph removed or replaced messages this memory already holds; "
                "give each thread its own memory and let the memory, not the graph, trim"
            )
        new = messages[len(held) :]
        if new:
            target.add_many(_dicts(new))
            held.extend(m.id for m in new)
        return {"llm_input_messages": convert_to_messages(target.context(format="openai").messages)}

    return hook


def _dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    converted = convert_to_openai_messages(list(messages))
    return converted if isinstance(converted, list) else [converted]
