"""The service is the library: one scripted scenario through ``Memory`` and through HTTP, compared in full.

Blocks (one capped), a summary strategy, recall indexing, tool calls and
usage: the same steps go to a ``Memory`` on one store and to the service on
another store of the same kind, and after every step the two contexts must be
equal (messages, system, the whole account, what was left out and why); at the
end everything stored must be equal too: each message with its seq, tokens and
status, the session state (window start, fold, summary, stats) and the recall
documents. On SQLite, PostgreSQL and Redis.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convmem import Memory
from convmem.longterm.blocks.base import StaticBlock
from convmem.longterm.recall.index import RecallIndex
from convmem.server import Service, Settings, create_app
from convmem.server.backends import Backend
from convmem.server.views import context_view
from convmem.session import status_of

from .conftest import backend_for, drop_namespace

OPTIONS: dict[str, Any] = {"model": "gpt-4o", "max_tokens": 300, "max_output_tokens": 40, "strategy": "summary_buffer"}
PERSONA = "The user is Ada, a cyclist who parks at the north gate and prefers short answers. " * 2
NOTES = "Ada's bike is a green Brompton; she commutes on Tuesdays and Thursdays."
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}],
}


def script() -> list[list[dict[str, Any]]]:
    steps: list[list[dict[str, Any]]] = [[{"role": "system", "content": "You are terse.", "id": "sys"}]]
    for i in range(16):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"turn {i}: the bike at the north gate, " + "lorem ipsum " * (4 + i % 5)
        steps.append([{"role": role, "content": text, "id": f"m{i}"}])
    steps.append([{**CALL, "id": "call"}, {"role": "tool", "tool_call_id": "c1", "content": "rain " * 12, "id": "res"}])
    steps.append([{"role": "assistant", "content": "Rain in Oslo; take the Brompton's cover.", "id": "end"}])
    return steps


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, TestClient, Service, str]]:
    kind = request.param
    (tmp_path / "lib").mkdir()
    (tmp_path / "svc").mkdir()
    library = backend_for(kind, tmp_path / "lib")
    settings = Settings(keys=str(tmp_path / "keys.db"))
    service = Service(settings, backend=backend_for(kind, tmp_path / "svc"))  # type: ignore[arg-type]
    key = service.registry.create_key("acme").secret
    with TestClient(create_app(settings, service=service).state.asgi) as http:
        http.headers["Authorization"] = f"Bearer {key}"
        yield library, http, service, kind  # type: ignore[misc]
    service.close()
    library.close()  # type: ignore[attr-defined]
    drop_namespace(kind, tmp_path / "lib")
    drop_namespace(kind, tmp_path / "svc")


def everything_stored(backend: Backend, session_id: str, user: str, rename: Any) -> dict[str, Any]:
    store = backend.store
    loaded = store.load(session_id, user_id=user)
    state = loaded.state
    rows = [
        (s.seq, s.tokens, rename(s.message.id), s.message.role, s.message.content, status_of(s, state))
        for s in store.messages(session_id, user_id=user)
    ]
    summary = state.summary
    docs = backend.index.docs if backend.index is not None else backend.recall_store.load_docs(user)  # type: ignore[union-attr]
    return {
        "messages": rows,
        "state": (state.window_start, state.folded_to, state.pinned_start, dict(state.stats)),
        "summary": None if summary is None else (summary.text, summary.tokens),
        "recall": sorted((d.seq, rename(d.message_id), d.role, d.text, d.key, d.context) for d in docs),
    }


def test_one_scenario_through_the_library_and_the_service(pair: tuple[Backend, TestClient, Service, str]) -> None:
    library, http, service, _ = pair
    assert library.recall_store is not None
    # The service renders a user's blocks in name order, so the library gets them in that order; their text is what
    # a client wrote over the API, so the service never trusts it (it goes into the blocks' user note).
    blocks = [
        StaticBlock("notes", NOTES, priority=2, trusted=False),
        StaticBlock("persona", PERSONA, priority=0, max_tokens=48, trusted=False),
    ]
    memory = Memory(
        store=library.store,
        session_id="s",
        user_id="u",
        blocks=blocks,
        sinks=[RecallIndex(store=library.recall_store)],
        **OPTIONS,
    )
    q = {"user_id": "u"}
    assert http.post("/v1/sessions", params=q, json={"id": "s", **OPTIONS}).status_code == 201
    for block in blocks:
        body = {"value": block.text, "expected_version": 0, "priority": block.priority, "max_tokens": block.max_tokens}
        assert http.put(f"/v1/blocks/{block.name}", params=q, json=body).status_code == 200
    for number, step in enumerate(script()):
        memory.add_many(step)
        assert http.post("/v1/sessions/s/messages", params=q, json={"messages": step}).status_code == 201
        mine = json.loads(json.dumps(context_view(memory.context()), default=str))
        theirs = http.post("/v1/sessions/s/context", params=q, json={}).json()
        for part in mine:
            assert theirs[part] == mine[part], f"step {number}: {part}: {theirs[part]} != {mine[part]}"
        assert theirs == mine, f"step {number}"
    usage = {"prompt_tokens": 120, "completion_tokens": 9}
    memory.record_usage(usage)
    assert http.post("/v1/sessions/s/usage", params=q, json={"usage": usage}).status_code == 200
    with_input = {"input": "where is the bike?"}
    mine = json.loads(json.dumps(context_view(memory.context("where is the bike?")), default=str))
    assert http.post("/v1/sessions/s/context", params=q, json=with_input).json() == mine

    scope_user = "acme:u"
    lib = everything_stored(library, "s", "u", lambda i: i)
    svc = everything_stored(service.backend, "acme.s", scope_user, lambda i: i and i.removeprefix("acme."))
    assert svc == lib
    assert lib["summary"] is not None  # the scenario summarized,
    assert lib["recall"]  # indexed for recall,
    assert {"summarized", "active", "pinned"} <= {kind for *_, kind in lib["messages"]}  # and evicted
    found = http.post("/v1/recall", params=q, json={"query": "green Brompton cover rain"}).json()["items"]
    local = RecallIndex(store=library.recall_store).search("green Brompton cover rain", user_id="u")
    assert [h["message_id"] for h in found] == [h.doc.message_id for h in local]
