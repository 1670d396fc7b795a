"""ConvmemChatMessageHistory under RunnableWithMessageHistory, and the hook under LangGraph's prebuilt agent."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from convmem import ConfigurationError, Memory
from convmem.integrations.langchain import ConvmemChatMessageHistory, budgeted_messages_hook
from convmem.messages import Message, ToolCall
from tests.integrations._checks import check_request, request_tokens, tool_output

SYSTEM = "You are a travel assistant. Answer in one short sentence."
TURNS = 12


@tool
def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


class ScriptedChatModel(BaseChatModel):
    """A fake chat model: two parallel tool calls after a user message, an answer after the results.

    With ``tools=False`` it only answers. It records every request it gets.
    """

    calls: list[list[BaseMessage]] = []  # noqa: RUF012  # pydantic field, replaced per instance
    tools: bool = True

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.calls.append(list(messages))
        n = len(self.calls)
        last = messages[-1]
        if self.tools and isinstance(last, HumanMessage):
            calls = [{"name": "forecast", "args": {"city": f"City{n}{x}"}, "id": f"c{n}{x}"} for x in "ab"]
            reply = AIMessage("", tool_calls=calls)
        else:
            reply = AIMessage(f"Answer {n}: mild all week.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def as_convmem(messages: list[BaseMessage]) -> list[Message]:
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
            calls = tuple(ToolCall(c["id"] or "", c["name"], _json(c["args"])) for c in m.tool_calls)
            out.append(Message(role="assistant", content=m.text or None, tool_calls=calls))
    return out


def _json(args: Any) -> str:
    import json

    return json.dumps(args)


def _memory() -> Memory:
    memory = Memory(model="gpt-4o", max_tokens=2_000, max_output_tokens=300)
    memory.add({"role": "system", "content": SYSTEM})
    return memory


def _react_agent(model: ScriptedChatModel, **options: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # deprecated in LangGraph 1.0 for langchain.agents.create_agent; still shipped
        warnings.simplefilter("ignore")
        return create_react_agent(model, [forecast], checkpointer=InMemorySaver(), **options)


def test_langgraph_agent_keeps_every_call_within_budget_where_the_bare_agent_does_not() -> None:
    memory = _memory()
    limit = memory.budget - memory.reserved_output
    model = ScriptedChatModel(calls=[])
    agent = _react_agent(model, pre_model_hook=budgeted_messages_hook(memory))
    config = {"configurable": {"thread_id": "t1"}}
    for turn in range(TURNS):
        result = agent.invoke({"messages": [("user", f"Turn {turn}: how is the weather?")]}, config)
        assert result["messages"][-1].text.endswith("mild all week.")
    sizes = [check_request(memory.counter, as_convmem(call), limit=limit, system=SYSTEM) for call in model.calls]
    assert len(sizes) == 2 * TURNS
    assert max(sizes) > limit // 2
    assert len(result["messages"]) == 5 * TURNS  # the graph state keeps everything; only the request is cut

    bare_model = ScriptedChatModel(calls=[])
    bare = _react_agent(bare_model, prompt=SYSTEM)
    for turn in range(TURNS):
        bare.invoke({"messages": [("user", f"Turn {turn}: how is the weather?")]}, config)
    theirs = [request_tokens(memory.counter, as_convmem(call)) for call in bare_model.calls]
    assert max(theirs) > 3 * limit
    print(f"\nlanggraph: limit {limit}; convmem max {max(sizes)}; bare agent max {max(theirs)}")


def test_one_memory_per_thread() -> None:
    memories: dict[str, Memory] = {}

    def memory_for(thread: str) -> Memory:
        return memories.setdefault(thread, _memory())

    model = ScriptedChatModel(calls=[], tools=False)
    agent = _react_agent(model, pre_model_hook=budgeted_messages_hook(memory_for))
    agent.invoke({"messages": [("user", "alpha")]}, {"configurable": {"thread_id": "a"}})
    agent.invoke({"messages": [("user", "beta")]}, {"configurable": {"thread_id": "b"}})
    agent.invoke({"messages": [("user", "alpha again")]}, {"configurable": {"thread_id": "a"}})
    assert [m.text for m in memories["a"].messages()][1:] == ["alpha", "Answer 1: mild all week.", "alpha again"]
    assert [m.text for m in memories["b"].messages()][1:] == ["beta"]  # the answer is added on b's next turn
    assert [m.text for m in model.calls[-1]] == [SYSTEM, "alpha", "Answer 1: mild all week.", "alpha again"]


def test_the_hook_refuses_a_history_it_cannot_follow() -> None:
    hook = budgeted_messages_hook(_memory())
    config: Any = {"configurable": {"thread_id": "t"}}
    hook.invoke({"messages": [HumanMessage("one", id="1")]}, config)
    with pytest.raises(ConfigurationError, match="removed or replaced"):
        hook.invoke({"messages": [HumanMessage("other", id="9"), HumanMessage("two", id="2")]}, config)


# Both RunnableWithMessageHistory and InMemoryChatMessageHistory are deprecated since langchain-core 1.3 / 1.6
# (for LangGraph persistence), and still shipped; the issue asks for this path, so it is tested.
@pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")
def test_runnable_with_message_history_stays_within_budget_where_in_memory_history_does_not() -> None:
    question = "Turn {}: " + "tell me more " * 20

    def run(history: Any) -> list[list[BaseMessage]]:
        model = ScriptedChatModel(calls=[], tools=False)
        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
        chain = RunnableWithMessageHistory(
            prompt | model, lambda _: history, input_messages_key="question", history_messages_key="history"
        )
        for turn in range(3 * TURNS):
            chain.invoke({"question": question.format(turn)}, {"configurable": {"session_id": "s"}})
        return model.calls

    memory = _memory()
    # The history is read before the input is appended, so the context leaves room for the reply only; the
    # input comes on top (give the memory a max_output_tokens that covers both).
    input_tokens = memory.counter.count_message(Message(role="user", content=question.format(99)))
    limit = memory.budget - memory.reserved_output + input_tokens
    ours = [
        check_request(memory.counter, as_convmem(c), limit=limit, system=SYSTEM)
        for c in run(ConvmemChatMessageHistory(memory))
    ]
    theirs = [
        request_tokens(memory.counter, as_convmem(c))
        for c in run(InMemoryChatMessageHistory(messages=[SystemMessage(SYSTEM)]))
    ]
    assert max(ours) > limit // 2
    assert max(theirs) > memory.budget
    assert len(memory.messages()) == 1 + 2 * 3 * TURNS
    print(f"\nRunnableWithMessageHistory: limit {limit}; convmem max {max(ours)}; in-memory history max {max(theirs)}")


def test_history_round_trip_and_clear() -> None:
    memory = _memory()
    history = ConvmemChatMessageHistory(memory)
    calls = [{"name": "forecast", "args": {"city": "Paris"}, "id": "c1"}]
    history.add_messages(
        [HumanMessage("hi"), AIMessage("", tool_calls=calls), ToolMessage("sunny", tool_call_id="c1"), AIMessage("ok")]
    )
    got = history.messages
    assert [type(m).__name__ for m in got] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert isinstance(got[2], AIMessage)
    assert got[2].tool_calls[0]["args"] == {"city": "Paris"}
    history.clear()
    assert history.messages == []
    assert len(memory.messages()) == 5  # archived, not deleted
