"""Open memories stay open: kept between requests, used only while current, bounded by count and tokens.

Two services over one store are two workers: whatever one writes (messages,
a block, a clear), the other's next context must be exactly the context a
freshly opened ``Memory`` gives, never its kept, outdated one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.server import Service, Settings, create_app
from convmem.server.tenancy import Scope
from convmem.server.views import context_view

from .conftest import backend_for, drop_namespace

Q = {"user_id": "u"}
OPTIONS = {"model": "gpt-4o", "max_tokens": 200, "max_output_tokens": 20}


def worker(tmp_path: Path, kind: str, **options: Any) -> tuple[TestClient, Service]:
    settings = Settings(keys=str(tmp_path / "keys.db"), **options)
    service = Service(settings, backend=backend_for(kind, tmp_path))  # type: ignore[arg-type]
    http = TestClient(create_app(settings, service=service).state.asgi)
    return http, service


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[tuple[TestClient, Service]]]:
    made = [worker(tmp_path, request.param) for _ in range(2)]
    key = made[0][1].registry.create_key("acme").secret
    for http, _ in made:
        http.headers["Authorization"] = f"Bearer {key}"
    yield made
    for http, service in made:
        http.close()
        service.close()
    drop_namespace(request.param, tmp_path)


def fresh(service: Service, session: str, user: str = "u") -> dict[str, Any]:
    """The context a memory opened now gives (the service's blocks and sink), as the service answers it."""
    scope = Scope("acme", user)
    memory = Memory.open(
        scope.store_session(session),
        store=service.backend.store,
        user_id=scope.store_user,
        blocks=service.sessions.user_blocks(scope),
    )
    view = json.loads(json.dumps(context_view(memory.context()), default=str))
    return {k: v for k, v in view.items() if k != "account"} | {"account": {**view["account"], "reused": 0}}


def context(http: TestClient, session: str, q: dict[str, str] = Q) -> dict[str, Any]:
    answer = http.post(f"/v1/sessions/{session}/context", params=q, json={})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body | {"account": {**body["account"], "reused": 0}}


def add(http: TestClient, session: str, text: str, q: dict[str, str] = Q) -> None:
    body = {"messages": [{"role": "user", "content": text}]}
    answer = http.post(f"/v1/sessions/{session}/messages", params=q, json=body)
    assert answer.status_code == 201, answer.text


def test_a_kept_memory_is_reused_until_another_worker_writes(workers: list[tuple[TestClient, Service]]) -> None:
    (a, service_a), (b, _) = workers
    assert a.post("/v1/sessions", params=Q, json={"id": "s", **OPTIONS}).status_code == 201
    add(a, "s", "first")
    first = a.post("/v1/sessions/s/context", params=Q, json={}).json()
    again = a.post("/v1/sessions/s/context", params=Q, json={}).json()
    assert again["account"]["reused"] > 0  # the same memory: it knows its previous context
    assert first["request"] == again["request"]
    hits = service_a.sessions.memories.hits
    add(b, "s", "second, from the other worker")
    seen = context(a, "s")
    assert "second, from the other worker" in str(seen["request"])
    assert seen == fresh(service_a, "s")
    assert service_a.sessions.memories.hits == hits  # the kept memory was outdated, so it was opened again
    block = {"value": "Ada rides a green bike.", "expected_version": 0}
    assert b.put("/v1/blocks/persona", params=Q, json=block).status_code == 200
    seen = context(a, "s")
    assert "green bike" in str(seen["request"])
    assert seen == fresh(service_a, "s")
    assert b.post("/v1/sessions/s/clear", params=Q, json={"keep_system": True}).status_code == 204
    assert context(a, "s") == fresh(service_a, "s")


OPS = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["add", "add", "context", "block", "clear", "usage"])),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[TestClient, Service]]]:
    tmp = tmp_path_factory.mktemp("workers")
    made = [worker(tmp, "sqlite") for _ in range(2)]
    key = made[0][1].registry.create_key("acme").secret
    for http, _ in made:
        http.headers["Authorization"] = f"Bearer {key}"
    yield made
    for http, service in made:
        http.close()
        service.close()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_any_interleaving_of_two_workers_gives_the_fresh_context(
    two_workers: list[tuple[TestClient, Service]], ops: Any
) -> None:
    made = two_workers
    session = uuid.uuid4().hex  # each example its own session and user (blocks are the user's)
    q = {"user_id": session}
    assert made[0][0].post("/v1/sessions", params=q, json={"id": session, **OPTIONS}).status_code == 201
    version = 0
    for step, (who, op) in enumerate(ops):
        http, service = made[who]
        if op == "add":
            add(http, session, f"message {step} " + "words " * 12, q)
        elif op == "block":
            body = {"value": f"block text {step}", "expected_version": version}
            assert http.put("/v1/blocks/notes", params=q, json=body).status_code == 200
            version += 1
        elif op == "clear":
            assert http.post(f"/v1/sessions/{session}/clear", params=q, json={"keep_system": True}).status_code == 204
        elif op == "usage":
            usage = {"usage": {"prompt_tokens": 5, "completion_tokens": 1}}
            assert http.post(f"/v1/sessions/{session}/usage", params=q, json=usage).status_code == 200
        else:
            assert context(http, session, q) == fresh(service, session, session)
    stats = [http.get(f"/v1/sessions/{session}", params=q).json()["stats"] for http, _ in made]
    assert stats[0] == stats[1]
    for http, service in made:
        assert context(http, session, q) == fresh(service, session, session)


def test_kept_memories_are_bounded_by_count_and_tokens(tmp_path: Path) -> None:
    http, service = worker(tmp_path, "sqlite", keep_sessions=2, keep_tokens=150)
    http.headers["Authorization"] = f"Bearer {service.registry.create_key('acme').secret}"
    kept = service.sessions.memories
    for name in ("s1", "s2", "s3"):
        assert http.post("/v1/sessions", params=Q, json={"id": name, **OPTIONS}).status_code == 201
        add(http, name, "short")
    assert len(kept) == 2  # s1, the least recently used, went
    assert {k[1] for k in kept._kept} == {"acme.s2", "acme.s3"}
    assert kept.tokens == sum(e.tokens for e in kept._kept.values()) > 0
    add(http, "s2", "x " * 100)
    add(http, "s3", "y " * 100)  # the two windows now hold more than 150 tokens together
    assert kept.tokens <= 150
    assert len(kept) == 1
    add(http, "s1", "z " * 500)  # a session larger than the bound alone is not kept at all
    assert "acme.s1" not in {k[1] for k in kept._kept}
    assert kept.tokens <= 150
    http.close()
    service.close()
