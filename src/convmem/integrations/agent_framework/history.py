"""Microsoft Agent Framework's history provider kept by convmem: every model call within the budget.

Agent Framework keeps a session's messages through a ``HistoryProvider`` (its chat message store),
by default ``InMemoryHistoryProvider``, which sends every message ever stored and writes a run's
messages only when the run ends: an error mid-run loses the run, input included. Here a convmem memory
keeps them::

    before each model call   ->  the call's new inputs (the user's message, or the tool results) are stored
                                 first, then the memory's budgeted context is the history the call sends
                                 (pinned system prompt, summary, whole tool units)
    after each model call    ->  its response messages (tool calls, the answer) are stored

A run that failed before its answer leaves its input and what it did in the memory, and its input in
the session's state (the provider's one key, ``unanswered``); the next run with the same input is its
retry: nothing is stored again, and the model goes on from what the failed run stored (no tool runs
twice). Any other input is a new turn.

Give the agent ``require_per_service_call_history_persistence=True`` so both happen around every model
call of the function loop (each call fits the budget, and what a failing call leaves is stored); without
it they happen once per run, as for the framework's own providers. The memory is one memory or a
function from the session id to that session's memory (``Memory(store=..., session_id=sid)``), so an
``AgentSession`` serialized with ``to_dict`` and restored with ``from_dict``, in a new process, goes on
with the same convmem session: the provider keeps nothing in the session's state.

Example::

    from agent_framework import Agent
    from convmem import Memory
    from convmem.integrations.agent_framework import ConvmemHistoryProvider

    history = ConvmemHistoryProvider(lambda sid: Memory("gpt-4o", store="chat.db", session_id=sid, max_tokens=16_000))
    agent = Agent(client=client, tools=[...], context_providers=[history],
                  require_per_service_call_history_persistence=True)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from weakref import WeakKeyDictionary

from ...errors import InvalidMessageError
from ...formats import parse_messages
from ...memory.protocol import AsyncMemoryLike, MemoryLike
from .. import missing
from .._bridge import AnyMemory, MemoryFlow, arun, on
from .._identity import Ledger, read_ledger, sync

try:
    from agent_framework import Content, HistoryProvider, Message
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("agent-framework-core", "agent-framework") from exc

__all__ = ["ConvmemHistoryProvider"]

MemoryFor = AnyMemory | Callable[[str], AnyMemory]
_UNANSWERED = "unanswered"  # the session state's key: the user input of a run that has no answer yet


class ConvmemHistoryProvider(HistoryProvider):
    """An Agent Framework ``HistoryProvider`` whose history is a convmem memory's budgeted context.

    Args:
        memory: one memory, or a function from the ``AgentSession``'s id to that session's memory.
        source_id: the provider's id among the agent's context providers.
    """

    DEFAULT_SOURCE_ID = "convmem"

    def __init__(self, memory: MemoryFor, *, source_id: str = DEFAULT_SOURCE_ID) -> None:
        super().__init__(source_id)
        self.memory = memory
        self._memories: dict[str, AnyMemory] = {}
        self._ledgers: WeakKeyDictionary[Any, Ledger] = WeakKeyDictionary()  # each memory's reading, kept

    def memory_for(self, session_id: str | None) -> AnyMemory:
        if isinstance(self.memory, (MemoryLike, AsyncMemoryLike)):
            return self.memory
        key = session_id or ""
        if key not in self._memories:
            self._memories[key] = self.memory(key)
        return self._memories[key]

    # -- the HistoryProvider contract --------------------------------------------------------------------
    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kw: Any
    ) -> list[Message]:
        """The memory's budgeted context, as Agent Framework messages."""
        return await arun(self.memory_for(session_id), _context(0))

    async def save_messages(
        self, session_id: str | None, messages: Sequence[Message], *, state: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        """Store the messages the memory does not hold, in one write."""
        memory = self.memory_for(session_id)
        await arun(memory, self._store(memory, messages))

    async def before_run(self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]) -> None:
        memory = self.memory_for(context.session_id)
        inputs = list(context.input_messages)
        asked = [m.text for m in inputs if str(m.role) == "user"]
        if asked and state.get(_UNANSWERED) == asked:
            # The last run stored this input and ended without its answer (an error): this run is its retry.
            # The memory holds the input and whatever the failed run stored after it; the model goes on from there.
            context.input_messages[:] = []
            context.extend_messages(self, await arun(memory, _context(0)))
            return
        await arun(memory, self._store(memory, inputs))  # stored first: an error in the call loses nothing
        if asked:
            state[_UNANSWERED] = asked  # until a response without tool calls answers it (after_run)
        # The framework sends its inputs after the history: the history is the context without them.
        rendered = sum(len(_dicts(m)) for m in inputs)
        context.extend_messages(self, await arun(memory, _context(rendered)))

    async def after_run(self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]) -> None:
        response = context.response
        if response is None or not response.messages:
            return
        await self.save_messages(context.session_id, list(response.messages))
        if not any(c.type == "function_call" for c in response.messages[-1].contents):
            state.pop(_UNANSWERED, None)

    def _store(self, memory: AnyMemory, messages: Sequence[Message]) -> MemoryFlow[list[Message]]:
        """Add the messages the memory does not hold; returns those of ``messages`` that were new."""
        ledger = self._ledgers.get(memory)
        if ledger is None:
            ledger = yield from read_ledger()
            self._ledgers[memory] = ledger
        batch: list[Any] = []
        given: list[str | None] = []
        owners: list[Message] = []
        for message in messages:
            dicts = _dicts(message)
            batch += parse_messages(dicts, format="openai") if dicts else []
            ids: list[str | None] = [message.message_id] if len(dicts) == 1 else [None] * len(dicts)
            if message.message_id is not None and len(dicts) > 1:  # a tool message of several results
                ids = [f"{message.message_id}#{n}" for n in range(len(dicts))]
            given += ids
            owners += [message] * len(dicts)
        planned = yield from sync(batch, given, ledger, history=False)
        new = {id(m) for m in planned.new}
        return list({id(o): o for o, m in zip(owners, planned.messages, strict=True) if id(m) in new}.values())


def _context(drop: int) -> MemoryFlow[list[Message]]:
    context = yield on("context", format="openai")
    kept = context.messages[: len(context.messages) - drop] if drop else context.messages
    return [_message(d) for d in kept]


# -- Agent Framework messages <-> OpenAI chat dicts (the memory's format) --------------------------------
def _dicts(message: Message) -> list[dict[str, Any]]:
    """A message as OpenAI chat messages: one, or one per function result of a tool message."""
    role = str(message.role)
    texts, calls, results = [], [], []
    for c in message.contents:
        if c.type == "text":
            texts.append(c.text or "")
        elif c.type == "function_call":
            args = c.arguments if isinstance(c.arguments, str) else json.dumps(dict(c.arguments or {}))
            calls.append({"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": args}})
        elif c.type == "function_result":
            result = c.result if isinstance(c.result, str) else json.dumps(c.result, default=str)
            results.append({"role": "tool", "tool_call_id": c.call_id, "content": c.exception or result})
        elif c.type in ("usage", "text_reasoning"):
            continue  # usage is no message; reasoning text is the provider's, not sent back by this format
        else:
            raise InvalidMessageError(
                f"ConvmemHistoryProvider stores text, function calls and function results; a {role} message "
                f"holds a {c.type!r} content"
            )
    if results:
        return results
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
        return [out | {"tool_calls": calls}] if calls else ([out] if texts else [])
    return [{"role": role, "content": "".join(texts)}] if texts or role != "tool" else []


def _message(d: Mapping[str, Any]) -> Message:
    role, content = d["role"], d.get("content")
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    if role == "tool":
        return Message("tool", [Content.from_function_result(d["tool_call_id"], result=text)])
    contents: list[Any] = [text] if text else []
    for call in d.get("tool_calls") or []:
        fn = call["function"]
        contents.append(Content.from_function_call(call["id"], fn["name"], arguments=fn["arguments"]))
    return Message("system" if role == "developer" else role, contents)
