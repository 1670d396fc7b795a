"""A LangGraph agent loop on ConvmemSaver and convmem's pre-model hook, run in turns, in this process or a new one.

The graph is LangGraph's own ``StateGraph`` over ``MessagesState``: an agent node that sends the model
the memory's budgeted context (``budgeted_messages_hook``), a ``ToolNode``, and ``tools_condition``
between them; the checkpointer and the memory live in the same convmem store. The fake chat model
answers a user message with two parallel tool calls and the results with a sentence, and records
each request's size and checks (``check_request``), so the caller sees every request of every process.

Run as ``python -m tests.integrations._langgraph_loop URL FIRST COUNT OUT``: turns FIRST..FIRST+COUNT-1
of thread ``t1`` on the store at URL (the system prompt added to the memory only when the session is
new), each request's tokens written to OUT as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from convmem import Memory, Message
from convmem.integrations.langchain import budgeted_messages_hook
from convmem.integrations.langgraph_checkpoint import ConvmemSaver
from convmem.messages import ToolCall
from convmem.stores import open_store
from tests.integrations._checks import check_request, tool_output

SYSTEM = "You are a travel assistant. Answer in one short sentence."
THREAD = {"configurable": {"thread_id": "t1"}}


@tool
def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


class ScriptedModel(BaseChatModel):
    """Two parallel tool calls after a user message, an answer after the results; every request checked."""

    memory: Any
    sizes: list[int] = []  # noqa: RUF012  # pydantic field, given per instance

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        limit = self.memory.budget - self.memory.reserved_output
        self.sizes.append(check_request(self.memory.counter, _as_convmem(messages), limit=limit, system=SYSTEM))
        n = sum(isinstance(m, HumanMessage) for m in messages), len(self.sizes)
        if isinstance(messages[-1], HumanMessage):
            calls = [{"name": "forecast", "args": {"city": f"City{n[1]}{x}"}, "id": f"c{n[1]}{x}"} for x in "ab"]
            reply = AIMessage("", tool_calls=calls)
        else:
            reply = AIMessage(f"Answer {n[1]}: mild all week.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _as_convmem(messages: list[BaseMessage]) -> list[Message]:
    """An explicit mapping, independent of the adapter's conversion."""
    out = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append(Message(role="system", content=m.text))
        elif isinstance(m, HumanMessage):
            out.append(Message(role="user", content=m.text))
        elif isinstance(m, ToolMessage):
            out.append(Message(role="tool", content=m.text, tool_call_id=m.tool_call_id))
        else:
            assert isinstance(m, AIMessage)
            calls = tuple(ToolCall(c["id"] or "", c["name"], json.dumps(c["args"])) for c in m.tool_calls)
            out.append(Message(role="assistant", content=m.text or None, tool_calls=calls))
    return out


def memory_on(store: Any) -> Memory:
    """The thread's memory: the system prompt is added once, when the session is new."""
    new = all(info.id != "t1" for info in store.list_sessions())
    memory = Memory(model="gpt-4o", max_tokens=2_000, max_output_tokens=300, store=store, session_id="t1")
    if new:
        memory.add({"role": "system", "content": SYSTEM})
    return memory


def graph_on(store: Any, memory: Memory, model: ScriptedModel) -> Any:
    hook = budgeted_messages_hook(memory)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        request = hook.invoke(state, config)["llm_input_messages"]
        return {"messages": [model.invoke(request)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([forecast]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=ConvmemSaver(store))


def run_turns(url: str, first: int, count: int) -> tuple[list[int], list[BaseMessage]]:
    """Turns ``first``.. on new objects (store, memory, saver, graph); each request's tokens and the final state."""
    store = open_store(url)
    try:
        memory = memory_on(store)
        model = ScriptedModel(memory=memory, sizes=[])
        graph = graph_on(store, memory, model)
        state: dict[str, Any] = {}
        for turn in range(first, first + count):
            state = graph.invoke({"messages": [("user", f"Turn {turn}: how is the weather?")]}, THREAD)
            assert state["messages"][-1].text.endswith("mild all week.")
        memory.close()
        return model.sizes, list(state["messages"])
    finally:
        store.close()


if __name__ == "__main__":
    url, first, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    sizes, messages = run_turns(url, first, count)
    with open(out, "w") as f:
        json.dump({"sizes": sizes, "messages": len(messages)}, f)
