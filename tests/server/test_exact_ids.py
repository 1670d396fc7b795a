"""Every session route takes the exact id: a prefix (of the tenant's name, or of another session) reaches nothing.

The stores resolve unique id prefixes, and every store id of a tenant starts
with ``<tenant>.``; the service must never let that through. Each route is
probed with the exact id (it works), a prefix of the tenant name and a prefix
of one of the user's sessions (404, and nothing stored changes), on SQLite,
PostgreSQL and Redis; reads resolve a prefix only when asked (``?prefix=true``)
and only among the caller's own ids; a fork is reachable by its exact id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convmem.server import Service, Settings, create_app

from .conftest import backend_for, drop_namespace

USER = "solo"
COMPLETION = {
    "choices": [{"message": {"role": "assistant", "content": "hello", "refusal": None}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}
# (method, path after /v1/sessions/{id}, body, a read that may resolve a prefix when asked); DELETE last.
ROUTES: list[tuple[str, str, Any, bool]] = [
    ("GET", "", None, True),
    ("GET", "/messages", None, True),
    ("GET", "/export", None, True),
    ("GET", "/turns/0", None, False),
    ("GET", "/summaries", None, False),
    ("PATCH", "", {"title": "renamed"}, False),
    ("POST", "/messages", {"messages": [{"role": "user", "content": "written"}]}, False),
    ("POST", "/responses", {"response": COMPLETION}, False),
    ("POST", "/usage", {"usage": {"prompt_tokens": 3, "completion_tokens": 1}}, False),
    ("POST", "/context", {}, False),
    ("POST", "/fork", {"at_seq": 0}, False),
    ("POST", "/rollback", None, False),
    ("POST", "/repair", None, False),
    ("POST", "/clear", {"keep_system": True}, False),
    ("DELETE", "", None, False),
]


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str], Service]]:
    settings = Settings(keys=str(tmp_path / "keys.db"))
    service = Service(settings, backend=backend_for(request.param, tmp_path))  # type: ignore[arg-type]
    key = service.registry.create_key("acme").secret
    with TestClient(create_app(settings, service=service).state.asgi) as http:
        yield http, {"Authorization": f"Bearer {key}"}, service
    service.close()
    drop_namespace(request.param, tmp_path)


def call(http: TestClient, headers: dict[str, str], method: str, sid: str, path: str, body: Any, **query: str) -> Any:
    params = {"user_id": USER, **query}
    return http.request(method, f"/v1/sessions/{sid}{path}", params=params, json=body, headers=headers)


def stored(service: Service) -> list[Any]:
    """Everything the store holds for the user: each session's info and full export."""
    store, user = service.backend.store, f"acme:{USER}"
    sessions = sorted(store.list_sessions(user_id=user), key=lambda s: s.id)
    return [(s.id, s.title, s.message_count, store.export_jsonl(s.id, user_id=user)) for s in sessions]


def make(http: TestClient, headers: dict[str, str], sid: str) -> None:
    created = http.post("/v1/sessions", params={"user_id": USER}, json={"id": sid, "model": "gpt-4o"}, headers=headers)
    assert created.status_code == 201, created.text
    added = call(http, headers, "POST", sid, "/messages", {"messages": [{"role": "user", "content": f"in {sid}"}]})
    assert added.status_code == 201, added.text


def test_every_route_takes_the_exact_id_only(served: tuple[TestClient, dict[str, str], Service]) -> None:
    http, headers, service = served
    make(http, headers, "zeta")
    make(http, headers, "zed")  # "ze" is a prefix of both; "zet" of "zeta" only
    before = stored(service)
    for probe in ("a", "acme", "acme.", "acme.zeta", "ze", "zet", "z"):
        for method, path, body, _ in ROUTES:
            answer = call(http, headers, method, probe, path, body)
            assert answer.status_code == 404, (probe, method, path, answer.status_code, answer.text)
            told = answer.json()["detail"].replace(repr(probe.removeprefix("acme.")), "")
            assert "zeta" not in told, answer.text  # no other id is revealed
            assert "zed" not in told, answer.text
    for method, path, body, read in ROUTES:  # asking for a prefix: reads only
        answer = call(http, headers, method, "zet", path, body, prefix="true")
        assert answer.status_code == (200 if read else 404), (method, path, answer.text)
        if read:
            assert call(http, headers, method, "ze", path, body, prefix="true").status_code == 409  # ambiguous
            assert call(http, headers, method, "a", path, body, prefix="true").status_code == 404  # the tenant's
    assert stored(service) == before, "a probe changed what is stored"
    for method, path, body, _ in ROUTES:
        answer = call(http, headers, method, "zeta", path, body)
        assert answer.status_code < 300, (method, path, answer.text)
    assert [s[0] for s in stored(service)] != [s[0] for s in before]  # zeta is gone, its fork is there


def test_a_fork_is_reached_by_its_exact_id_only(served: tuple[TestClient, dict[str, str], Service]) -> None:
    http, headers, service = served
    make(http, headers, "zeta")
    fork = call(http, headers, "POST", "zeta", "/fork", {"at_seq": 0}).json()["id"]
    before = stored(service)
    for probe in (fork[:3], fork[:-1]):
        for method, path, body, _ in ROUTES:
            assert call(http, headers, method, probe, path, body).status_code == 404, (probe, method, path)
    assert stored(service) == before
    for method, path, body, _ in ROUTES:
        answer = call(http, headers, method, fork, path, body)
        assert answer.status_code < 300, (method, path, answer.text)
    names = [s[0] for s in stored(service)]
    assert names.count("acme.zeta") == 1
    assert fork not in names
