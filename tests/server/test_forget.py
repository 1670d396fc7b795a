"""``POST /v1/forget`` through HTTP: one user of one tenant erased; the other user and the other tenant untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convmem.server import audit

from .conftest import Api, make_api


@pytest.fixture(params=["memory", "sqlite"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    store = "memory" if request.param == "memory" else f"sqlite://{tmp_path / 'data.db'}"
    made = make_api(tmp_path, store)
    yield made
    made.http.close()
    made.service.close()


def _seed(api: Api, key: str, user: str) -> None:
    h, q = api.headers(key), f"?user_id={user}"
    for sid in ("s1", "s2"):
        assert api.http.post(f"/v1/sessions{q}", json={"id": sid, "model": "gpt-4o", "max_tokens": 120}, headers=h)
        for i in range(10):  # enough to archive the first ones into the recall documents
            body = {"messages": [{"role": "user", "content": f"{user} parks at gate {i} " * 4, "id": f"m{i}"}]}
            assert api.http.post(f"/v1/sessions/{sid}/messages{q}", json=body, headers=h).status_code == 201
    assert api.http.post(f"/v1/facts{q}", json={"text": f"{user} cycles"}, headers=h).status_code == 201
    block = {"value": f"{user} is terse", "expected_version": 0}
    assert api.http.put(f"/v1/blocks/persona{q}", json=block, headers=h).status_code == 200


def _view(api: Api, key: str, user: str) -> dict[str, Any]:
    h, q = api.headers(key), f"?user_id={user}"
    out: dict[str, Any] = {"sessions": api.http.get(f"/v1/sessions{q}", headers=h).json()}
    for sid in ("s1", "s2"):
        out[sid] = api.http.get(f"/v1/sessions/{sid}/messages{q}", headers=h).json()
    out["facts"] = [(f["id"], f["text"]) for f in api.http.get(f"/v1/facts{q}", headers=h).json()]
    out["blocks"] = api.http.get(f"/v1/blocks{q}", headers=h).json()
    out["recall"] = api.http.post(f"/v1/recall{q}", json={"query": "gate parks"}, headers=h).json()["items"]
    return out


def test_forget_a_user_over_http(api: Api) -> None:
    for key in (api.key_a, api.key_b):
        for user in ("alice", "bob"):
            _seed(api, key, user)
    before = {(k, u): _view(api, k, u) for k in (api.key_a, api.key_b) for u in ("alice", "bob")}
    assert before[(api.key_a, "alice")]["recall"]  # there are recall documents to erase

    answer = api.http.post("/v1/forget?user_id=alice", json={}, headers=api.headers(api.key_a))
    assert answer.status_code == 200, answer.text
    receipt = answer.json()
    assert receipt["user_id"] == "alice"
    assert sorted(receipt["sessions"]) == ["s1", "s2"]  # the client's ids, not the tenant-scoped ones
    assert receipt["removed"]["messages"] == 20
    assert receipt["removed"]["facts"] == 1
    assert receipt["removed"]["blocks"] == 1
    assert "tenant-a" not in answer.text

    gone = _view(api, api.key_a, "alice")
    assert gone["sessions"]["items"] == []
    assert (gone["facts"], gone["blocks"], gone["recall"]) == ([], [], [])
    for k, u in before:
        if (k, u) != (api.key_a, "alice"):
            assert _view(api, k, u) == before[(k, u)], (k, u)
    again = api.http.post("/v1/forget?user_id=alice", json={}, headers=api.headers(api.key_a)).json()
    assert sum(again["removed"].values()) == 0

    trail = api.http.get("/v1/erasures", headers=api.headers(api.key_a)).json()
    assert [row["action"] for row in trail] == ["forget-user", "forget-user"]
    assert trail[1]["counts"] == receipt["removed"]  # oldest last
    assert trail[0]["key_id"] == api.key_a.split("_")[1]
    assert trail[0]["subject"] == audit.subject("tenant-a", "alice", None)
    assert "alice" not in json.dumps(trail)  # who was erased is a hash, not a name
    assert api.http.get("/v1/erasures", headers=api.headers(api.key_b)).json() == []  # B sees only its own


def test_forget_one_session_over_http(api: Api) -> None:
    _seed(api, api.key_a, "alice")
    h = api.headers(api.key_a)
    answer = api.http.post("/v1/forget?user_id=alice", json={"session_id": "s1"}, headers=h)
    assert answer.status_code == 200, answer.text
    assert answer.json()["sessions"] == ["s1"]
    assert api.http.get("/v1/sessions/s1/messages?user_id=alice", headers=h).status_code == 404
    hits = api.http.post("/v1/recall?user_id=alice", json={"query": "gate parks"}, headers=h).json()["items"]
    assert hits
    assert {hit["session_id"] for hit in hits} == {"s2"}
    missing = api.http.post("/v1/forget?user_id=alice", json={"session_id": "nope"}, headers=h)
    assert missing.status_code == 200
    assert sum(missing.json()["removed"].values()) == 0
    bad = api.http.post("/v1/forget?user_id=alice", json={"session_id": "../x"}, headers=h)
    assert bad.status_code == 422
