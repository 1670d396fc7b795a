"""Each adapter's real agent loop over a scripted model, run in turns that can stop and go on elsewhere.

A :class:`Driver` runs turns ``start .. start+count-1`` of one conversation: per turn a
user message, a model reply with two parallel tool calls, both results, and an answer
(LangChain's history, which has no tool loop, answers at once). The model's replies
depend only on the request (the turn number is in the user's words), so a new process
goes on exactly where the old one stopped. A driver keeps what the app would keep between
turns (a LangGraph checkpointer, Pydantic AI's ``all_messages()``, LlamaIndex's chat
history) and can :meth:`~Driver.save` it to a folder and :meth:`~Driver.load` it back,
as an app that restarts does.

Every model call is recorded as a list of ``(role, text, tool call ids, tool call id)``,
so a test can check that no request holds a message twice.

Run as a module, one driver goes on in this new process and writes its requests as JSON::

    python -m tests.integrations._lifecycle ADAPTER SPEC.json STATE_DIR START COUNT OUT.json
"""

from __future__ import annotations

import asyncio
import json
import pickle
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from convmem import AsyncClient, AsyncMemory, Client, Memory
from tests.integrations._checks import tool_output

SYSTEM = "You are a travel assistant. Answer in one short sentence."
OPTIONS: dict[str, Any] = {"model": "gpt-4o", "max_tokens": 2_000, "max_output_tokens": 400}
Seen = tuple[str, str, tuple[str, ...], str | None]


def question(turn: int) -> str:
    return f"Turn {turn}: how is the weather in City{turn}?"


def turn_of(text: str) -> int:
    found = re.search(r"Turn (\d+)", text)
    assert found, text
    return int(found.group(1))


# -- memories: a spec names one, each process opens it ---------------------------------------------
def memory_spec(
    kind: str, *, store: str = "", url: str = "", key: str = "", session_id: str, user_id: str
) -> dict[str, Any]:
    return {"kind": kind, "store": store, "url": url, "key": key, "session_id": session_id, "user_id": user_id}


async def open_memory(spec: dict[str, Any], *, create: bool, sync: bool, system: bool) -> Any:
    """The spec's memory, made (``create``) or opened; sync (Memory, Client) or async (AsyncMemory, AsyncClient)."""
    sid, user = spec["session_id"], spec["user_id"]
    if spec["kind"] == "memory":
        if sync:
            memory: Any = (
                Memory(store=spec["store"], session_id=sid, user_id=user, **OPTIONS)
                if create
                else (Memory.open(sid, store=spec["store"], user_id=user))
            )
        elif create:
            memory = AsyncMemory(store=spec["store"], session_id=sid, user_id=user, **OPTIONS)
        else:
            memory = await AsyncMemory.open(sid, store=spec["store"], user_id=user)
    else:
        where = {"api_key": spec["key"], "user_id": user}
        if sync:
            memory = (
                Client(spec["url"], session_id=sid, **where, **OPTIONS)
                if create
                else Client.open(sid, base_url=spec["url"], **where)
            )
        elif create:
            memory = await AsyncClient.create(spec["url"], session_id=sid, **where, **OPTIONS)
        else:
            memory = await AsyncClient.open(sid, base_url=spec["url"], **where)
    if create and system:
        result = memory.add({"role": "system", "content": SYSTEM})
        if asyncio.iscoroutine(result):
            await result
    return memory


async def close_memory(memory: Any) -> None:
    closing = getattr(memory, "aclose", None) or memory.close
    result = closing()
    if asyncio.iscoroutine(result):
        await result


async def stored(memory: Any) -> list[Seen]:
    result = memory.messages()
    messages = await result if asyncio.iscoroutine(result) else result
    return [(m.role, m.text, tuple(c.id for c in m.tool_calls), m.tool_call_id) for m in messages]


# -- drivers ---------------------------------------------------------------------------------------
class Driver:
    """One adapter's loop. ``sync`` says which kind of memory it is given; ``system``, whether the app
    gives the memory the system prompt (else the framework sends it)."""

    name = ""
    sync = True
    system = True
    per_turn = 5  # user, assistant with two calls, two results, answer
    client = True  # whether it runs on a Client (the service) as well as on a Memory
    in_flight = 0  # messages of the last turn the adapter only sees at the next model call

    def __init__(self) -> None:
        self.requests: list[list[Seen]] = []
        self.memory: Any = None
        self._adapter: Any = None

    def adapter(self, make: Any) -> Any:
        """The driver's one adapter object, made on first use (a new driver is a new adapter object)."""
        if self._adapter is None:
            self._adapter = make()
        return self._adapter

    async def run(self, start: int, count: int) -> None:
        raise NotImplementedError

    async def open(self, spec: dict[str, Any], *, create: bool) -> Any:
        """What the driver's adapter is given: the spec's memory (ADK's services take its store instead)."""
        return await open_memory(spec, create=create, sync=self.sync, system=self.system)

    def stored(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The spec of the memory the adapter stores the conversation in (the same one, but for ADK)."""
        return spec

    def save(self, folder: Path) -> None:
        """Write what the app keeps between turns (nothing: the memory is the history)."""

    def load(self, folder: Path) -> None:
        """Read it back in a new process or for a new adapter object."""

    def expected(self, turns: int) -> int:
        return (1 if self.system else 0) + self.per_turn * turns - self.in_flight


class AgentsDriver(Driver):
    name, sync, system = "agents", False, False

    async def run(self, start: int, count: int) -> None:
        from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
        from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

        from convmem.formats import parse_messages
        from convmem.integrations.agents import ConvmemSession

        set_tracing_disabled(True)

        @function_tool
        def forecast(city: str) -> str:
            """The twelve-day forecast for a city."""
            return tool_output(city)

        def record(call: Any) -> None:
            items = [{"role": "user", "content": call.input}] if isinstance(call.input, str) else call.input
            self.requests.append(seen(parse_messages(items, format="responses")))

        steps: list[Any] = []
        for turn in range(start, start + count):
            a, b = f"City{turn}A", f"City{turn}B"

            def calls(call: Any, a: str = a, b: str = b, turn: int = turn) -> Any:
                record(call)
                return [
                    function_call("forecast", {"city": a}, call_id=f"t{turn}a"),
                    function_call("forecast", {"city": b}, call_id=f"t{turn}b"),
                ]

            def answer(call: Any, a: str = a, b: str = b) -> Any:
                record(call)
                return [assistant_message(f"{a} and {b}: mild all week.")]

            steps += [ModelStep.respond(calls), ModelStep.respond(answer)]
        model = ScriptedModel(steps)
        agent = Agent(name="travel", instructions=SYSTEM, model=model, tools=[forecast])
        session = self.adapter(lambda: ConvmemSession(self.memory))
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        for turn in range(start, start + count):
            await Runner.run(agent, question(turn), session=session, run_config=config)
        model.assert_complete()


class LangChainHistoryDriver(Driver):
    """``RunnableWithMessageHistory`` over ``ConvmemChatMessageHistory``: a question and an answer per turn."""

    name, per_turn = "langchain_history", 2

    async def run(self, start: int, count: int) -> None:
        from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
        from langchain_core.runnables.history import RunnableWithMessageHistory

        from convmem.integrations.langchain import ConvmemChatMessageHistory

        model = scripted_chat_model(self, tools=False)
        history = self.adapter(lambda: ConvmemChatMessageHistory(self.memory))
        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
        with warnings.catch_warnings():  # deprecated since langchain-core 1.3, still shipped
            warnings.simplefilter("ignore")
            chain = RunnableWithMessageHistory(
                prompt | model, lambda _: history, input_messages_key="question", history_messages_key="history"
            )
            for turn in range(start, start + count):
                chain.invoke({"question": question(turn)}, {"configurable": {"session_id": "s"}})


class LangGraphDriver(Driver):
    """``create_react_agent`` with ``budgeted_messages_hook`` and a checkpointer, saved to a file between runs."""

    name, in_flight = "langgraph", 1  # the hook sees the last answer at the next turn's model call

    def __init__(self) -> None:
        super().__init__()
        from langgraph.checkpoint.memory import InMemorySaver

        self.saver = InMemorySaver()

    async def run(self, start: int, count: int) -> None:
        from langgraph.prebuilt import create_react_agent

        from convmem.integrations.langchain import budgeted_messages_hook

        model = scripted_chat_model(self, tools=True)
        with warnings.catch_warnings():  # deprecated in LangGraph 1.0 for langchain.agents.create_agent
            warnings.simplefilter("ignore")
            agent = create_react_agent(
                model,
                [forecast_tool()],
                checkpointer=self.saver,
                pre_model_hook=self.adapter(lambda: budgeted_messages_hook(self.memory)),
            )
        config = {"configurable": {"thread_id": "thread-1"}}
        for turn in range(start, start + count):
            await agent.ainvoke({"messages": [("user", question(turn))]}, config)

    def save(self, folder: Path) -> None:
        storage = {
            thread: {ns: dict(cps) for ns, cps in spaces.items()} for thread, spaces in self.saver.storage.items()
        }
        state = {"storage": storage, "writes": dict(self.saver.writes), "blobs": dict(self.saver.blobs)}
        (folder / "checkpoints.pickle").write_bytes(pickle.dumps(state))

    def load(self, folder: Path) -> None:
        state = pickle.loads((folder / "checkpoints.pickle").read_bytes())  # our own file
        for thread, spaces in state["storage"].items():
            for ns, checkpoints in spaces.items():
                self.saver.storage[thread][ns].update(checkpoints)
        self.saver.writes.update(state["writes"])
        self.saver.blobs.update(state["blobs"])


class LlamaIndexDriver(Driver):
    """``FunctionAgent`` over ``ConvmemMemory``; after a restart the app passes its saved chat history."""

    name = "llamaindex"

    def __init__(self) -> None:
        super().__init__()
        self.history: list[Any] | None = None  # what the app saved; passed to the first run after a restart

    async def run(self, start: int, count: int) -> None:
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
        from llama_index.core.llms.mock import MockFunctionCallingLLM
        from llama_index.core.tools import FunctionTool

        from convmem.integrations.llamaindex import ConvmemMemory

        def respond(messages: Any, **kwargs: Any) -> ChatMessage:
            request = []
            for m in messages:
                text = "".join(b.text for b in m.blocks if isinstance(b, TextBlock))
                calls = tuple(b.tool_call_id or "" for b in m.blocks if isinstance(b, ToolCallBlock))
                request.append((m.role.value, text, calls, m.additional_kwargs.get("tool_call_id")))
            self.requests.append(request)
            last = messages[-1]
            turn = max(turn_of(t) for r, t, _, _ in request if r == "user")
            if last.role.value == "user":
                blocks = [
                    ToolCallBlock(
                        tool_call_id=f"t{turn}{x}", tool_name="forecast", tool_kwargs={"city": f"City{turn}{x}"}
                    )
                    for x in "ab"
                ]
                return ChatMessage(role="assistant", blocks=blocks)
            return ChatMessage(role="assistant", content=f"Answer {turn}: mild all week.")

        memory = self.adapter(lambda: ConvmemMemory(memory=self.memory))
        agent = FunctionAgent(
            tools=[FunctionTool.from_defaults(forecast)], llm=MockFunctionCallingLLM(response_generator=respond)
        )
        for turn in range(start, start + count):
            history, self.history = self.history, None
            await agent.run(question(turn), memory=memory, chat_history=history)
        self.saved = [m.model_dump(mode="json") for m in await memory.aget_all()]

    def save(self, folder: Path) -> None:
        (folder / "chat_history.json").write_text(json.dumps(self.saved))

    def load(self, folder: Path) -> None:
        from llama_index.core.base.llms.types import ChatMessage

        self.history = [ChatMessage.model_validate(m) for m in json.loads((folder / "chat_history.json").read_text())]


class PydanticAIDriver(Driver):
    """A Pydantic AI agent with ``ConvmemHistory``, each run given the last one's ``all_messages()``."""

    name, sync, system = "pydantic_ai", False, False

    def __init__(self) -> None:
        super().__init__()
        self.history: list[Any] | None = None

    async def run(self, start: int, count: int) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        from convmem.integrations.pydantic_ai import ConvmemHistory

        def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
            self.requests.append(pydantic_seen(messages))
            turn = max(turn_of(t) for r, t, _, _ in self.requests[-1] if r == "user")
            if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
                return ModelResponse(parts=[TextPart(f"Answer {turn}: mild all week.")])
            return ModelResponse(
                parts=[ToolCallPart("forecast", {"city": f"City{turn}{x}"}, f"t{turn}{x}") for x in "ab"]
            )

        agent = Agent(
            FunctionModel(respond),
            system_prompt=SYSTEM,
            capabilities=[self.adapter(lambda: ConvmemHistory(self.memory))],
        )

        @agent.tool_plain
        def forecast(city: str) -> str:
            """The twelve-day forecast for a city."""
            return tool_output(city)

        for turn in range(start, start + count):
            result = await agent.run(question(turn), message_history=self.history)
            self.history = result.all_messages()

    def save(self, folder: Path) -> None:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        (folder / "messages.json").write_bytes(ModelMessagesTypeAdapter.dump_json(self.history or []))

    def load(self, folder: Path) -> None:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        self.history = ModelMessagesTypeAdapter.validate_json((folder / "messages.json").read_bytes())

    def expected(self, turns: int) -> int:
        return 1 + self.per_turn * turns  # the system prompt Pydantic AI sends, stored once


class ADKDriver(Driver):
    """ADK's Runner over ``ConvmemSessionService`` and its plugin; the app keeps only the session id.

    The service owns the sessions, so it is given the spec's store (not a memory), and it stores the
    conversation in the convmem session ``adk:<app>:<id>``; it needs a store in this process, so the
    Client side of the matrix does not apply to it.
    """

    name, system, client = "adk", False, False
    APP = "life"

    async def open(self, spec: dict[str, Any], *, create: bool) -> Any:
        from convmem.integrations.adk import ConvmemSessionService

        self.spec = spec
        return ConvmemSessionService(spec["store"], **OPTIONS)

    def stored(self, spec: dict[str, Any]) -> dict[str, Any]:
        from convmem.integrations.adk import session_key

        return {**spec, "session_id": session_key(self.APP, spec["session_id"])}

    async def run(self, start: int, count: int) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner

        from convmem.integrations.adk import ConvmemContextPlugin
        from tests.integrations._adk import ScriptedLlm, as_convmem, user_turn

        service, user, sid = self.memory, self.spec["user_id"], self.spec["session_id"]
        if await service.get_session(app_name=self.APP, user_id=user, session_id=sid) is None:
            await service.create_session(app_name=self.APP, user_id=user, session_id=sid)
        model = ScriptedLlm()
        agent = LlmAgent(name="travel", model=model, instruction=SYSTEM, tools=[forecast])
        plugin = self.adapter(lambda: ConvmemContextPlugin(service))
        runner = Runner(app=App(name=self.APP, root_agent=agent, plugins=[plugin]), session_service=service)
        for turn in range(start, start + count):
            async for _ in runner.run_async(user_id=user, session_id=sid, new_message=user_turn(question(turn))):
                pass
        self.requests += [seen(as_convmem(contents, system)) for contents, system in model.requests]


DRIVERS: dict[str, type[Driver]] = {
    d.name: d
    for d in (AgentsDriver, LangChainHistoryDriver, LangGraphDriver, LlamaIndexDriver, PydanticAIDriver, ADKDriver)
}


# -- the fakes the drivers share -----------------------------------------------------------------
def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


def forecast_tool() -> Any:
    from langchain_core.tools import tool

    return tool(forecast)


def seen(messages: list[Any]) -> list[Seen]:
    return [(m.role, m.text, tuple(c.id for c in m.tool_calls), m.tool_call_id) for m in messages]


def pydantic_seen(messages: list[Any]) -> list[Seen]:
    from pydantic_ai.messages import (
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Seen] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            out.append(("assistant", text, tuple(p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart)), None))
            continue
        for p in m.parts:
            if isinstance(p, SystemPromptPart):
                out.append(("system", p.content, (), None))
            elif isinstance(p, UserPromptPart):
                out.append(("user", str(p.content), (), None))
            elif isinstance(p, ToolReturnPart):
                out.append(("tool", str(p.content), (), p.tool_call_id))
    return out


def scripted_chat_model(driver: Driver, *, tools: bool) -> Any:
    """A LangChain chat model: two parallel calls after a user message (``tools``), an answer otherwise."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            request: list[Seen] = []
            for m in messages:
                role = {SystemMessage: "system", HumanMessage: "user", ToolMessage: "tool"}.get(type(m), "assistant")
                calls = tuple(c["id"] or "" for c in getattr(m, "tool_calls", ()))
                request.append((role, m.text, calls, getattr(m, "tool_call_id", None)))
            driver.requests.append(request)
            turn = max(turn_of(t) for r, t, _, _ in request if r == "user")
            if tools and isinstance(messages[-1], HumanMessage):
                calls_out = [
                    {"name": "forecast", "args": {"city": f"City{turn}{x}"}, "id": f"t{turn}{x}"} for x in "ab"
                ]
                reply = AIMessage("", tool_calls=calls_out)
            else:
                reply = AIMessage(f"Answer {turn}: mild all week.")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return Scripted()


# -- a new process ---------------------------------------------------------------------------------
async def _go_on(adapter: str, spec: dict[str, Any], folder: Path, start: int, count: int) -> list[Any]:
    driver = DRIVERS[adapter]()
    driver.load(folder)
    driver.memory = await driver.open(spec, create=False)
    try:
        await driver.run(start, count)
    finally:
        await close_memory(driver.memory)
    return driver.requests


if __name__ == "__main__":
    name, spec_file, where, first, how_many, output = sys.argv[1:]
    spec = json.loads(Path(spec_file).read_text())
    requests = asyncio.run(_go_on(name, spec, Path(where), int(first), int(how_many)))
    Path(output).write_text(json.dumps(requests))
