"""ConvmemHistoryProvider under Agent Framework's own agent loop (Agent, its function loop, AgentSession).

An offline chat client (a ``BaseChatClient`` with the framework's ``FunctionInvocationLayer``) answers a
user message with two parallel tool calls and the results with a sentence; every request it gets is
checked (within the limit, tool calls whole, the system prompt first). The same loop over the
framework's own ``InMemoryHistoryProvider`` is the comparison.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    InMemoryHistoryProvider,
    Message,
    tool,
)
from agent_framework._tools import FunctionInvocationLayer

from convmem import ConfigurationError, InvalidMessageError, Memory
from convmem.formats import parse_messages
from convmem.integrations.agent_framework import ConvmemContextProvider, ConvmemHistoryProvider
from convmem.integrations.agent_framework.history import _dicts
from convmem.longterm.facts import Facts
from convmem.stores import open_store
from tests.integrations._checks import check_request, request_tokens, tool_output

SYSTEM = "You are a travel assistant. Answer in one short sentence."
LIMIT = 2_000 - 300


@tool
def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    """Two tool calls after a user message, an answer after the results; fails once when told to.

    Function invocation is the outer layer, chat middleware the inner one: the framework's per-call history
    persistence is chat middleware, so it runs around each model call of the function loop."""

    def __init__(self, *, fail_at: int | None = None) -> None:
        super().__init__()
        self.requests: list[list[Message]] = []
        self.instructions: list[str | None] = []
        self.fail_at = fail_at  # the request number (1-based) that raises

    async def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        self.instructions.append((options or {}).get("instructions"))
        n = len(self.requests)
        if n == self.fail_at:
            raise RuntimeError("the model service failed mid-run")
        if messages[-1].role == "user":
            contents = [
                Content.from_function_call(f"c{n}{x}", "forecast", arguments={"city": f"C{n}{x}"}) for x in "ab"
            ]
        else:
            contents = [Content.from_text(f"Answer {n}: mild all week.")]
        if stream:

            async def updates() -> Any:
                for c in contents:  # one update per content: the framework assembles the message
                    yield ChatResponseUpdate(role="assistant", contents=[c])

            return self._build_response_stream(updates())
        return ChatResponse(messages=[Message("assistant", contents)])


def _convmem(request: list[Message]) -> list[Any]:
    return parse_messages([d for m in request for d in _dicts(m)], format="openai")


def _memory_for(url: str) -> Any:
    def memory_for(session_id: str) -> Memory:
        store = open_store(url)
        new = all(info.id != session_id for info in store.list_sessions())
        memory = Memory(model="gpt-4o", max_tokens=2_000, max_output_tokens=300, store=store, session_id=session_id)
        if new:
            memory.add({"role": "system", "content": SYSTEM})
        return memory

    return memory_for


def _agent(client: ScriptedClient, provider: Any) -> Agent:
    return Agent(
        client=client,
        tools=[forecast],
        context_providers=[provider],
        require_per_service_call_history_persistence=True,
    )


async def test_every_call_fits_and_a_restored_session_goes_on(tmp_path: Path, offline_tiktoken: Path) -> None:
    url = f"sqlite:///{tmp_path}/af.db"
    client = ScriptedClient()
    agent = _agent(client, ConvmemHistoryProvider(_memory_for(url)))
    session = agent.create_session()
    for turn in range(6):
        result = await agent.run(f"Turn {turn}: how is the weather?", session=session)
        assert result.text.endswith("mild all week.")
    saved = json.dumps(session.to_dict())

    # New provider, memories, client and agent; the session restored from its JSON; streamed runs.
    client2 = ScriptedClient()
    agent2 = _agent(client2, ConvmemHistoryProvider(_memory_for(url)))
    restored = AgentSession.from_dict(json.loads(saved))
    for turn in range(6, 12):
        stream = agent2.run(f"Turn {turn}: how is the weather?", session=restored, stream=True)
        async for _ in stream:
            pass
        assert (await stream.get_final_response()).text.endswith("mild all week.")

    counter = Memory(model="gpt-4o").counter
    sizes = [
        check_request(counter, _convmem(r), limit=LIMIT, system=SYSTEM) for r in client.requests + client2.requests
    ]
    assert len(sizes) == 2 * 12
    assert max(sizes) > LIMIT // 2
    store = open_store(url)
    stored = [m.message for m in store.messages(restored.session_id)]
    store.close()
    assert len(stored) == 1 + 12 * 5  # system, then per turn: user, the two calls, two results, the answer
    assert len({m.id for m in stored}) == len(stored)
    assert [m.text for m in stored if m.role == "user"] == [f"Turn {t}: how is the weather?" for t in range(12)]
    assert "Turn 5: how is the weather?" in [
        m.text for m in client2.requests[0]
    ]  # the restored session's first call had the earlier turns

    bare = ScriptedClient()
    theirs = Agent(client=bare, instructions=SYSTEM, tools=[forecast], context_providers=[InMemoryHistoryProvider()])
    bare_session = theirs.create_session()
    for turn in range(12):
        await theirs.run(f"Turn {turn}: how is the weather?", session=bare_session)
    bare_max = max(request_tokens(counter, _convmem(r)) for r in bare.requests)
    assert bare_max > 3 * LIMIT
    print(f"\nagent-framework: limit {LIMIT}; convmem max {max(sizes)}; InMemoryHistoryProvider max {bare_max}")


async def test_an_error_mid_run_loses_nothing_and_its_retry_stores_nothing_twice(
    tmp_path: Path, offline_tiktoken: Path
) -> None:
    url = f"sqlite:///{tmp_path}/af.db"
    client = ScriptedClient(fail_at=4)  # turn 1's second call: after its tools ran
    agent = _agent(client, ConvmemHistoryProvider(_memory_for(url)))
    session = agent.create_session()
    await agent.run("Turn 0: how is the weather?", session=session)
    ask = Message("user", ["Turn 1: and tomorrow?"])
    with pytest.raises(Exception, match="failed mid-run"):
        await agent.run(ask, session=session)
    store = open_store(url)
    held = [m.message for m in store.messages(session.session_id)]
    assert [m.role for m in held[-4:]] == ["user", "assistant", "tool", "tool"]  # the input, the calls, the results
    assert held[-4].text == "Turn 1: and tomorrow?"

    result = await agent.run(ask, session=session)  # the same Message again: a retry
    assert result.text.endswith("mild all week.")
    retry = _convmem(client.requests[-1])
    check_request(Memory(model="gpt-4o").counter, retry, limit=LIMIT, system=SYSTEM)
    assert [m.text for m in retry].count("Turn 1: and tomorrow?") == 1
    assert retry[-1].role == "tool"  # the model goes on from the stored results: no tool ran twice
    assert len(client.requests) == 5
    after = [m.message for m in store.messages(session.session_id)]
    store.close()
    assert [m.text for m in after if m.role == "user"] == ["Turn 0: how is the weather?", "Turn 1: and tomorrow?"]
    assert len(after) == 1 + 5 + 5

    bare = ScriptedClient(fail_at=4)
    theirs = Agent(client=bare, tools=[forecast], context_providers=[InMemoryHistoryProvider()])
    bare_session = theirs.create_session()
    await theirs.run("Turn 0: how is the weather?", session=bare_session)
    with pytest.raises(Exception, match="failed mid-run"):
        await theirs.run(Message("user", ["Turn 1: and tomorrow?"]), session=bare_session)
    kept = bare_session.state["in_memory"]["messages"]
    assert all("Turn 1" not in str(m) for m in kept)  # the framework's own store lost the whole run


def test_a_content_it_cannot_store_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="'uri' content"):
        _dicts(Message("user", [Content.from_uri("https://example.com/a.png", media_type="image/png")]))


async def test_the_context_provider_brings_the_users_memory_into_another_session(
    tmp_path: Path, offline_tiktoken: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path}/memory.db")
    Facts(store.facts()).add("Alice is vegetarian", user_id="alice")
    provider = ConvmemContextProvider(store, user_id="alice", max_tokens=200)
    client = ScriptedClient()
    agent = Agent(client=client, tools=[forecast], context_providers=[InMemoryHistoryProvider(), provider])
    first = agent.create_session()
    await agent.run("My sister lives in Lisbon and plays the cello.", session=first)
    indexed = len(store.recall().load_docs("alice"))
    assert indexed >= 3  # the user's message, the tool results, the answer: the calls carry no text

    # The session restored from its JSON goes on with the same chain of ids: the earlier messages stay once.
    again = AgentSession.from_dict(json.loads(json.dumps(first.to_dict())))
    await agent.run("Thanks!", session=again)
    assert len(store.recall().load_docs("alice")) == 2 * indexed

    second = agent.create_session()
    await agent.run("Where does my sister live?", session=second)
    told = client.instructions[-2] or ""  # the run's first call: the instructions the provider added
    assert "Lisbon" in told
    assert "Alice is vegetarian" in told
    assert Memory(model="gpt-4o").counter.count_text(told) <= 200
    bob = ConvmemContextProvider(store, user_id="bob")
    assert bob.recall("bob", "Where does my sister live?") == ""  # alice's memory is alice's
    with pytest.raises(ConfigurationError, match="max_tokens"):
        ConvmemContextProvider(store, user_id="alice", max_tokens=0)
    store.close()
