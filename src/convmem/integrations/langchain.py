"""LangChain and LangGraph memory kept by convmem: budgeted messages, tool calls never orphaned.

LangChain's ``trim_messages`` and the usual summarizing wrappers cut by message
count or by tokens without knowing which messages belong together, so a tool
result can lose its call and the provider answers 400. Here the messages live in
a convmem memory, which evicts whole units::

    LangGraph agent state  ->  budgeted_messages_hook(memory)  ->  {"llm_input_messages": context}
                               (state messages the memory does not hold: add_many; the state is untouched)
    RunnableWithMessageHistory -> ConvmemChatMessageHistory(memory)
                               .messages      -> memory.context() as LangChain messages
                               .add_messages  -> memory.add_many(the ones it does not hold)
                               .clear()       -> memory.clear(keep_system=False)  (archived, not deleted)

The memory is anything with its protocol (:mod:`convmem.memory.protocol`): ``Memory``,
``AsyncMemory``, ``Client`` or ``AsyncClient``; an async one is used through the async
API (``ainvoke``, ``aget_messages``...). Which messages the memory holds is known by a
durable identity (:mod:`convmem.integrations._identity`): a LangChain message's own id
(LangGraph gives every state message one, and its checkpointer keeps it), else a
fingerprint, read back from the memory itself. So a new process whose graph state comes
back from a checkpointer, or a new hook or history object, adds no message twice.

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

from ..formats import parse_messages
from ..memory.protocol import AsyncMemoryLike, MemoryLike
from ..messages import Message
from . import missing
from ._bridge import AnyMemory, MemoryFlow, arun, on, run
from ._identity import Ledger, read_ledger, sync

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages, convert_to_openai_messages
    from langchain_core.runnables import RunnableConfig, RunnableLambda
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("langchain-core", "langchain") from exc

__all__ = ["ConvmemChatMessageHistory", "budgeted_messages_hook"]

MemoryFor = AnyMemory | Callable[[str], AnyMemory]
_ASYNC = "the async API (ainvoke, astream, aget_messages, aadd_messages)"


class ConvmemChatMessageHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` whose ``messages`` are the memory's budgeted context.

    ``RunnableWithMessageHistory`` reads ``messages`` *before* it appends the new input, so
    the context cannot count that input: give the memory a ``max_output_tokens`` that covers
    the reply and the longest new input you send.
    """

    def __init__(self, memory: AnyMemory) -> None:
        self.memory = memory
        self._ledger: Ledger | None = None  # what the memory holds, read from it on first use

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a read-only view of the context
        return run(self.memory, _context(), what=_ASYNC)

    async def aget_messages(self) -> list[BaseMessage]:
        return await arun(self.memory, _context())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the ones the memory does not hold, in one write; an invalid one raises InvalidMessageError."""
        run(self.memory, self._add(messages), what=_ASYNC)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await arun(self.memory, self._add(messages))

    def clear(self) -> None:
        """Empty the context; the messages stay archived in the store."""
        run(self.memory, _one(on("clear", keep_system=False)), what=_ASYNC)

    async def aclear(self) -> None:
        await arun(self.memory, _one(on("clear", keep_system=False)))

    def _add(self, messages: Sequence[BaseMessage]) -> MemoryFlow[None]:
        if self._ledger is None:
            self._ledger = yield from read_ledger()
        yield from sync(_converted(messages), [m.id for m in messages], self._ledger, history=False)


def budgeted_messages_hook(memory: MemoryFor) -> RunnableLambda[dict[str, Any], dict[str, Any]]:
    """A LangGraph ``pre_model_hook`` that sends the model the memory's budgeted context.

    Args:
        memory: one memory, or a function from the run's ``thread_id`` to that thread's memory.

    The hook adds the state messages the memory does not hold (known by their LangChain ids,
    so a state restored by a checkpointer in a new process adds nothing twice; the state keeps
    every message, as the checkpointer wants) and returns ``{"llm_input_messages": ...}``, which
    the agent sends instead of the state's messages. It runs sync under ``invoke`` and async
    under ``ainvoke`` (an async memory needs ``ainvoke``).

    Raises:
        ConfigurationError: the state no longer holds the newest message the memory holds (a node
            removed or replaced messages), so the memory cannot follow it.
    """
    ledgers: WeakKeyDictionary[Any, Ledger] = WeakKeyDictionary()  # a cache of each memory's reading

    def target(config: RunnableConfig) -> AnyMemory:
        thread = str((config.get("configurable") or {}).get("thread_id", ""))
        return memory if isinstance(memory, (MemoryLike, AsyncMemoryLike)) else memory(thread)

    def flow(chosen: AnyMemory, state: dict[str, Any]) -> MemoryFlow[dict[str, Any]]:
        ledger = ledgers.get(chosen)
        if ledger is None:
            ledger = yield from read_ledger()
            ledgers[chosen] = ledger
        messages: list[BaseMessage] = list(state["messages"])
        yield from sync(_converted(messages, ledger), [m.id for m in messages], ledger, history=True, strict=True)
        return {"llm_input_messages": (yield from _context())}

    def hook(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        chosen = target(config)
        return run(chosen, flow(chosen, state), what="agent.ainvoke / agent.astream")

    async def ahook(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        chosen = target(config)
        return await arun(chosen, flow(chosen, state))

    return RunnableLambda(hook, afunc=ahook, name="convmem_budgeted_messages")


def _context() -> MemoryFlow[list[BaseMessage]]:
    context = yield on("context", format="openai")
    return convert_to_messages(context.messages)


def _one(call: Any) -> MemoryFlow[Any]:
    return (yield call)


def _converted(messages: Sequence[BaseMessage], ledger: Ledger | None = None) -> list[Message]:
    """The messages as convmem Messages; one whose id the ledger holds is not converted (only its role counts)."""
    held = ledger.ids if ledger is not None else set()
    todo = [m for m in messages if m.id is None or m.id not in held]
    converted = iter(parse_messages(_dicts(todo), format="openai") if todo else [])
    out = []
    for m in messages:
        if m.id is not None and m.id in held:
            out.append(Message(role="system" if isinstance(m, SystemMessage) else "user", content=""))
        else:
            out.append(next(converted))
    return out


def _dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    converted = convert_to_openai_messages(list(messages))
    return converted if isinstance(converted, list) else [converted]
