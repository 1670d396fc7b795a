"""ConvmemSessionService, ConvmemContextPlugin and ConvmemMemoryService in ADK's own Runner (offline model)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkSessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.load_memory_tool import load_memory_tool
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import ConfigurationError
from convmem.integrations.adk import ConvmemContextPlugin, ConvmemMemoryService, ConvmemSessionService
from convmem.stores import open_store
from tests.integrations._adk import PRELOADED, ScriptedLlm, as_convmem, user_turn
from tests.integrations._checks import check_request, request_tokens, tool_output

INSTRUCTION = "You are a travel assistant. Answer in one short sentence."
TURNS = 12
APP = "travel"


def forecast(city: str) -> str:
    """The twelve-day forecast for a city."""
    return tool_output(city)


def runner(model: ScriptedLlm, sessions: Any, *, plugin: bool = True, memory: Any = None, tools: Any = None) -> Runner:
    agent = LlmAgent(name="travel", model=model, instruction=INSTRUCTION, tools=tools or [forecast])
    plugins = [ConvmemContextPlugin(sessions)] if plugin else []
    app = App(name=APP, root_agent=agent, plugins=plugins)
    return Runner(app=app, session_service=sessions, memory_service=memory)


async def turns(run: Runner, user: str, session_id: str, start: int, count: int) -> list[Event]:
    out = []
    for turn in range(start, start + count):
        async for event in run.run_async(
            user_id=user,
            session_id=session_id,
            new_message=user_turn(f"Turn {turn}: how is the weather in City{turn}?"),
        ):
            out.append(event)
    return out


@pytest.fixture
def service(tmp_path: Path, offline_tiktoken: Path) -> Any:
    sessions = ConvmemSessionService(
        f"sqlite:///{tmp_path}/adk.db", model="gpt-4o", max_tokens=2_000, max_output_tokens=300
    )
    yield sessions
    sessions.close()


async def test_every_model_call_within_budget_where_adk_sends_every_event(service: ConvmemSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="alice")
    model = ScriptedLlm()
    await turns(runner(model, service), "alice", session.id, 0, TURNS)
    memory = service.memory(session)
    limit = memory.budget - memory.reserved_output
    system = model.requests[0][1]
    assert system.startswith(INSTRUCTION)
    sizes = [check_request(memory.counter, as_convmem(c, s), limit=limit, system=system) for c, s in model.requests]
    assert len(sizes) == 2 * TURNS
    assert max(sizes) > limit // 2
    for contents, _ in model.requests:  # the newest user turn is always sent whole
        assert contents[0].role in ("user", "model")
    stored = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
    assert stored is not None
    assert len(stored.events) == 4 * TURNS
    assert len(memory.messages()) == 5 * TURNS  # user, two calls, two results, answer

    bare = ScriptedLlm()
    plain = InMemorySessionService()
    other = await plain.create_session(app_name=APP, user_id="alice")
    await turns(runner(bare, plain, plugin=False), "alice", other.id, 0, TURNS)
    largest = max(request_tokens(memory.counter, as_convmem(c, s)) for c, s in bare.requests)
    assert largest > 3 * limit
    print(f"\nadk: limit {limit}; convmem max {max(sizes)}; InMemorySessionService max {largest}")


async def test_a_new_service_object_and_a_restart_see_the_same_sessions(tmp_path: Path, offline_tiktoken: Path) -> None:
    url = f"sqlite:///{tmp_path}/adk.db"
    first = ConvmemSessionService(url, model="gpt-4o", max_tokens=2_000, max_output_tokens=300)
    state = {"city": "Lisbon", "user:name": "Alice", "app:version": 3, "temp:scratch": 1}
    session = await first.create_session(app_name=APP, user_id="alice", state=state, session_id="trip")
    await turns(runner(ScriptedLlm(), first), "alice", "trip", 0, 2)
    before = await first.get_session(app_name=APP, user_id="alice", session_id="trip")
    first.close()

    again = ConvmemSessionService(url)
    after = await again.get_session(app_name=APP, user_id="alice", session_id="trip")
    assert before is not None
    assert after is not None
    assert [e.model_dump() for e in after.events] == [e.model_dump() for e in before.events]
    assert after.state == {"city": "Lisbon", "user:name": "Alice", "app:version": 3}  # temp: is never kept
    model = ScriptedLlm()
    await turns(runner(model, again), "alice", "trip", 2, 2)
    assert len(again.memory(session).messages()) == 5 * 4
    assert all(len({(c.role, str(c.parts)) for c in contents}) == len(contents) for contents, _ in model.requests)
    listed = await again.list_sessions(app_name=APP, user_id="alice")
    assert [s.id for s in listed.sessions] == ["trip"]
    again.close()


async def test_many_sessions_of_many_users_stay_apart(service: ConvmemSessionService) -> None:
    users = [f"user{u}" for u in range(4)]
    ids: dict[str, list[str]] = {u: [] for u in users}
    for user in users:
        for n in range(5):
            created = await service.create_session(app_name=APP, user_id=user, state={"n": n})
            ids[user].append(created.id)
    other = await service.create_session(app_name="other", user_id="user0")

    async def one(user: str, session_id: str, turn: int) -> None:
        await turns(runner(ScriptedLlm(), service), user, session_id, turn, 1)

    await asyncio.gather(*(one(u, s, i) for u in users for i, s in enumerate(ids[u])))
    for user in users:
        listed = (await service.list_sessions(app_name=APP, user_id=user)).sessions
        assert sorted(s.id for s in listed) == sorted(ids[user])
        assert [s.last_update_time for s in listed] == sorted(s.last_update_time for s in listed)
        for n, session_id in enumerate(ids[user]):
            got = await service.get_session(app_name=APP, user_id=user, session_id=session_id)
            assert got is not None
            assert got.state == {"n": n}
            texts = [e.content.parts[0].text for e in got.events if e.author == "user" and e.content]
            assert texts == [f"Turn {n}: how is the weather in City{n}?"]
    assert await service.get_session(app_name=APP, user_id="user1", session_id=ids["user0"][0]) is None
    assert [s.id for s in (await service.list_sessions(app_name="other", user_id="user0")).sessions] == [other.id]
    await service.delete_session(app_name=APP, user_id="user0", session_id=ids["user0"][0])
    assert await service.get_session(app_name=APP, user_id="user0", session_id=ids["user0"][0]) is None
    assert len((await service.list_sessions(app_name=APP, user_id="user0")).sessions) == 4


async def test_state_scopes_and_events_the_model_never_reads(service: ConvmemSessionService) -> None:
    a = await service.create_session(app_name=APP, user_id="alice", state={"user:tier": "gold"})
    b = await service.create_session(app_name=APP, user_id="alice")
    c = await service.create_session(app_name=APP, user_id="bob")
    marker = Event(author="travel", actions=EventActions(state_delta={"step": 2, "app:flag": True, "temp:x": 1}))
    await service.append_event(a, marker)
    assert a.state["temp:x"] == 1  # ADK's rule: temp state lives for the invocation, in the session object only
    await service.append_event(a, marker)  # re-delivered: stored once
    got = await service.get_session(app_name=APP, user_id="alice", session_id=a.id)
    assert got is not None
    assert [e.id for e in got.events] == [marker.id]
    assert got.state == {"step": 2, "app:flag": True, "user:tier": "gold"}
    assert (await service.get_session(app_name=APP, user_id="alice", session_id=b.id)).state == {  # type: ignore[union-attr]
        "app:flag": True,
        "user:tier": "gold",
    }
    assert (await service.get_session(app_name=APP, user_id="bob", session_id=c.id)).state == {"app:flag": True}  # type: ignore[union-attr]
    assert await service.get_user_state(app_name=APP, user_id="alice") == {"tier": "gold"}


async def test_get_session_filters_and_the_refusals(service: ConvmemSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="alice", session_id="s1")
    await turns(runner(ScriptedLlm(), service), "alice", "s1", 0, 2)
    whole = await service.get_session(app_name=APP, user_id="alice", session_id="s1")
    assert whole is not None
    assert len(whole.events) == 8
    recent = await service.get_session(
        app_name=APP, user_id="alice", session_id="s1", config=GetSessionConfig(num_recent_events=3)
    )
    assert recent is not None
    assert [e.id for e in recent.events] == [e.id for e in whole.events[-3:]]
    none = await service.get_session(
        app_name=APP, user_id="alice", session_id="s1", config=GetSessionConfig(num_recent_events=0)
    )
    assert none is not None
    assert none.events == []
    since = whole.events[5].timestamp
    later = await service.get_session(
        app_name=APP, user_id="alice", session_id="s1", config=GetSessionConfig(after_timestamp=since)
    )
    assert later is not None
    assert [e.id for e in later.events] == [e.id for e in whole.events[5:]]
    # s1 is a prefix of s10: the store resolves prefixes, the service never does
    assert await service.get_session(app_name=APP, user_id="alice", session_id="s") is None
    await service.create_session(app_name=APP, user_id="alice", session_id="s10")
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="alice", session_id="s1")
    with pytest.raises(ConfigurationError, match="needs a user_id"):
        await service.list_sessions(app_name=APP)
    with pytest.raises(ConfigurationError, match="app name"):
        await service.create_session(app_name="a:b", user_id="alice")
    await service.delete_session(app_name=APP, user_id="alice", session_id="s1")
    with pytest.raises(AdkSessionNotFoundError):
        await service.append_event(session, Event(author="user", content=user_turn("Turn 9: late")))


async def test_preload_memory_and_load_memory_search_the_users_archive_facts_and_blocks(
    tmp_path: Path, offline_tiktoken: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path}/adk.db")
    sessions = ConvmemSessionService(store, model="gpt-4o", max_tokens=4_000, max_output_tokens=300)
    memory = ConvmemMemoryService(store)
    store.facts().write_facts([], [])  # the stores exist; a fact and a block of alice's:
    from convmem.longterm.blocks.store import BlockRecord
    from convmem.longterm.facts import Facts

    Facts(store.facts()).add("Alice is allergic to peanuts", user_id="alice")
    store.blocks().save_block(BlockRecord("alice", "persona", "Prefers trains", 0), expected_version=0)
    first = await sessions.create_session(app_name=APP, user_id="alice")
    await turns(runner(ScriptedLlm(), sessions), "alice", first.id, 0, 1)
    done = await sessions.get_session(app_name=APP, user_id="alice", session_id=first.id)
    assert done is not None
    await memory.add_session_to_memory(done)
    await memory.add_session_to_memory(done)  # added again: nothing indexed twice
    bob = await sessions.create_session(app_name=APP, user_id="bob")
    await turns(runner(ScriptedLlm(), sessions), "bob", bob.id, 7, 1)
    await memory.add_session_to_memory(await sessions.get_session(app_name=APP, user_id="bob", session_id=bob.id))  # type: ignore[arg-type]

    found = await memory.search_memory(app_name=APP, user_id="alice", query="weather in City0")
    texts = [p.text for m in found.memories for p in m.content.parts or ()]
    assert texts[:2] == ["persona: Prefers trains", "Alice is allergic to peanuts"]
    recalled = [m for m in found.memories if (m.id or "").startswith("recall:")]
    assert recalled
    assert "City0" in (recalled[0].content.parts[0].text or "")
    assert len({m.id for m in recalled}) == len(recalled)
    assert not any("City7" in t for t in texts)  # bob's archive is bob's

    model = ScriptedLlm()
    second = await sessions.create_session(app_name=APP, user_id="alice")
    await turns(runner(model, sessions, memory=memory, tools=[forecast, PreloadMemoryTool()]), "alice", second.id, 0, 1)
    preloaded = [c for c in model.requests[0][0] if (c.parts[0].text or "").startswith(PRELOADED)]
    assert len(preloaded) == 1
    assert "allergic to peanuts" in (preloaded[0].parts[0].text or "")
    assert model.requests[0][0][-1].parts[0].text.startswith("Turn 0:")  # type: ignore[union-attr]

    loader = ScriptedLlm(tool="load_memory", arguments={"query": "peanuts"})
    third = await sessions.create_session(app_name=APP, user_id="alice")
    await turns(runner(loader, sessions, memory=memory, tools=[load_memory_tool]), "alice", third.id, 3, 1)
    results = [
        p.function_response for c, _ in loader.requests[1:] for x in c for p in x.parts or () if p.function_response
    ]
    assert results
    assert "allergic to peanuts" in str(results[0].response)
    memory.close()
    sessions.close()
    store.close()


# -- the event log against ADK's own in-memory service -------------------------------------------
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
_state = st.dictionaries(st.sampled_from(["a", "b", "user:u", "app:p", "temp:t"]), st.integers(0, 9), max_size=3)
_event = st.one_of(
    st.tuples(st.just("user"), _text, _state),
    st.tuples(st.just("model"), _text, _state),
    st.tuples(st.just("call"), _text, _state),
    st.tuples(st.just("state"), st.just(""), _state),
)


def _make(kind: str, text: str, delta: dict[str, int], number: int) -> Event:
    actions = EventActions(state_delta=dict(delta))
    if kind == "state":
        return Event(author="agent", actions=actions)
    if kind == "call":
        call = types.FunctionCall(id=f"c{number}", name="lookup", args={"q": text})
        answer = types.FunctionResponse(id=f"c{number}", name="lookup", response={"result": text})
        parts = [types.Part(function_call=call)]
        return Event(author="agent", content=types.Content(role="model", parts=parts), actions=actions), Event(  # type: ignore[return-value]
            author="agent", content=types.Content(role="user", parts=[types.Part(function_response=answer)])
        )
    role = "user" if kind == "user" else "model"
    return Event(author=role, content=types.Content(role=role, parts=[types.Part(text=text)]), actions=actions)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(_event, max_size=8))
async def test_events_and_state_read_back_as_adks_in_memory_service_keeps_them(
    script: list[tuple[str, str, dict[str, int]]], offline_tiktoken: Path
) -> None:
    ours = ConvmemSessionService("memory", max_tokens=100_000, counter="approximate")
    theirs = InMemorySessionService()
    sid = uuid.uuid4().hex
    mine = await ours.create_session(app_name=APP, user_id="u", session_id=sid, state={"user:u": 0})
    ref = await theirs.create_session(app_name=APP, user_id="u", session_id=sid, state={"user:u": 0})
    for number, (kind, text, delta) in enumerate(script):
        made = _make(kind, text, delta, number)
        for event in made if isinstance(made, tuple) else (made,):
            await ours.append_event(mine, event.model_copy(deep=True))
            await theirs.append_event(ref, event.model_copy(deep=True))
    got = await ours.get_session(app_name=APP, user_id="u", session_id=sid)
    want = await theirs.get_session(app_name=APP, user_id="u", session_id=sid)
    assert got is not None
    assert want is not None
    assert [e.model_dump() for e in got.events] == [e.model_dump() for e in want.events]
    assert got.state == want.state
    assert mine.state == ref.state
    ours.close()
