"""Isolation: for every operation of the OpenAPI document, tenant A's key cannot reach tenant B's data.

The operations are read from the document itself, so an endpoint added later
without an entry here fails :func:`test_every_operation_is_covered`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .conftest import ADMIN_KEY, Api

B_USER = "bob"
MARKERS = ("B-MESSAGE-MARKER", "B-FACT-MARKER", "B-BLOCK-MARKER", "B-TITLE-MARKER")

# operationId -> request body (None: no body). Bodies are valid, so only the tenant boundary can refuse them.
BODIES: dict[str, Any] = {
    "listSessions": None,
    "createSession": {"model": "gpt-4o", "id": "secret-b"},
    "importSession": "IMPORT",
    "getSession": None,
    "updateSession": {"title": "hijacked"},
    "deleteSession": None,
    "forkSession": {"at_seq": 0},
    "exportSession": None,
    "addMessages": {"messages": [{"role": "user", "content": "intruder"}]},
    "listMessages": None,
    "addResponse": {"response": {"choices": [{"message": {"role": "assistant", "content": "x"}}]}},
    "recordUsage": {"usage": {"prompt_tokens": 1, "completion_tokens": 1}},
    "getContext": {},
    "clearSession": {"keep_system": False},
    "rollbackIncomplete": None,
    "repairSession": None,
    "getTurn": None,
    "listSummaries": None,
    "listFacts": None,
    "addFact": {"text": "intruder fact"},
    "updateFact": {"text": "hijacked fact"},
    "invalidateFact": {"reason": "hijacked"},
    "listBlocks": None,
    "getBlock": None,
    "putBlock": {"value": "hijacked", "expected_version": 1},
    "editBlock": {"op": "append", "text": "hijacked", "expected_version": 1},
    "recall": {"query": "B-MESSAGE-MARKER parked"},
    "recallModes": None,
    "forget": {"session_id": "not-a-session-of-a"},
    "listErasures": None,  # erases in A's namespace only: B's snapshot must not move
}
# Operations that list or search (or create in the caller's own namespace): they answer, without B's data.
OWN_NAMESPACE = {
    *(
        "listSessions",
        "createSession",
        "importSession",
        "listFacts",
        "addFact",
        "listBlocks",
        "recall",
        "recallModes",
        "forget",
        "listErasures",
    ),
}
ADMIN = {"listTenants", "createTenant", "listKeys", "createKey", "revokeKey"}


def operations(api: Api) -> list[tuple[str, str, str]]:
    schema = api.http.get("/openapi.json").json()
    return [
        (method.upper(), path, op["operationId"])
        for path, item in schema["paths"].items()
        for method, op in item.items()
    ]


def make_b_data(api: Api) -> dict[str, str]:
    hb = api.headers(api.key_b)
    q = f"?user_id={B_USER}"
    created = api.http.post(
        f"/v1/sessions{q}",
        json={"model": "gpt-4o", "max_tokens": 120, "id": "secret-b", "title": "B-TITLE-MARKER"},
        headers=hb,
    )
    assert created.status_code == 201
    first = {"role": "user", "content": "B-MESSAGE-MARKER I parked on level 3"}
    assert (
        api.http.post(f"/v1/sessions/secret-b/messages{q}", json={"messages": [first]}, headers=hb).status_code == 201
    )
    for i in range(8):
        body = {"messages": [{"role": "assistant", "content": f"B-MESSAGE-MARKER reply {i} " * 3}]}
        assert api.http.post(f"/v1/sessions/secret-b/messages{q}", json=body, headers=hb).status_code == 201
    fork = api.http.post(f"/v1/sessions/secret-b/fork{q}", json={"at_seq": 2}, headers=hb).json()["id"]
    fact = api.http.post(f"/v1/facts{q}", json={"text": "B-FACT-MARKER lives in Oslo"}, headers=hb).json()["id"]
    block = api.http.put(f"/v1/blocks/plan{q}", json={"value": "B-BLOCK-MARKER", "expected_version": 0}, headers=hb)
    assert block.status_code == 200
    recalled = api.http.post(f"/v1/recall{q}", json={"query": "parked"}, headers=hb).json()["items"]
    assert recalled, "B's own recall must work, or the test below proves nothing"
    return {"session": "secret-b", "fork": fork, "fact": fact, "block": "plan"}


def snapshot(api: Api) -> str:
    hb = api.headers(api.key_b)
    q = f"?user_id={B_USER}"
    parts = [
        api.http.get(f"/v1/sessions/secret-b/export{q}", headers=hb).text,
        api.http.get(f"/v1/facts{q}&history=true", headers=hb).text,
        api.http.get(f"/v1/blocks{q}", headers=hb).text,
        json.dumps([s["id"] for s in api.http.get(f"/v1/sessions{q}", headers=hb).json()["items"]]),
    ]
    return "\n".join(parts)


def fill(path: str, ids: dict[str, str], session_key: str) -> str:
    return (
        path.replace("{session_id}", ids[session_key])
        .replace("{fact_id}", ids["fact"])
        .replace("{name}", ids["block"])
        .replace("{seq}", "0")
        .replace("{tenant}", "tenant-b")
        .replace("{key_id}", "0" * 8)
    )


def send(api: Api, method: str, path: str, op: str, key: str | None, import_body: str) -> Any:
    body = BODIES.get(op)
    if body == "IMPORT":
        body = {"jsonl": import_body, "id": "imported-by-a"}
    sep = "&" if "?" in path else "?"
    return api.http.request(method, f"{path}{sep}user_id={B_USER}", json=body, headers=api.headers(key))


def test_every_operation_is_covered(api: Api) -> None:
    missing = [op for _, _, op in operations(api) if op not in BODIES and op not in ADMIN]
    assert missing == []


@pytest.mark.parametrize("session_key", ["session", "fork"])
def test_tenant_a_cannot_reach_tenant_b(api: Api, session_key: str) -> None:
    ids = make_b_data(api)
    before = snapshot(api)
    own = api.http.post(
        "/v1/sessions?user_id=x", json={"model": "gpt-4o", "id": "a-own"}, headers=api.headers(api.key_a)
    )
    assert own.status_code == 201
    api.http.post(
        "/v1/sessions/a-own/messages?user_id=x",
        json={"messages": [{"role": "user", "content": "a"}]},
        headers=api.headers(api.key_a),
    )
    exported = api.http.get("/v1/sessions/a-own/export?user_id=x", headers=api.headers(api.key_a)).text
    import_body = exported.replace('"id":"', '"id":"copy-')  # fresh ids: message ids are unique in a tenant
    ordered = sorted(operations(api), key=lambda o: o[2] in OWN_NAMESPACE)  # A's own "secret-b" is made last
    for method, path, op in ordered:
        if op in ADMIN:
            continue
        response = send(api, method, fill(path, ids, session_key), op, api.key_a, import_body)
        text = response.text
        assert not any(marker in text for marker in MARKERS), (op, text)
        if op in OWN_NAMESPACE:
            assert response.status_code in (200, 201), (op, response.status_code, text)
            continue
        assert response.status_code == 404, (op, response.status_code, text)
        # Indistinguishable from an id that exists nowhere: same status, same words.
        absent = {
            "session": "no-such-session",
            "fork": "no-such-session",
            "fact": "no-such-fact",
            "block": "nosuchblock",
        }
        other = send(api, method, fill(path, absent, session_key), op, api.key_a, import_body)
        scrub = re.compile("|".join(re.escape(v) for v in (*ids.values(), *absent.values())))
        assert other.status_code == 404
        assert scrub.sub("ID", other.json()["detail"]) == scrub.sub("ID", response.json()["detail"]), op
    assert snapshot(api) == before  # nothing of B's changed
    # B's own session id was created by A as A's own, empty, session: same id, no meeting.
    mine = api.http.get("/v1/sessions/secret-b/messages?user_id=bob", headers=api.headers(api.key_a)).json()
    assert mine["items"] == []


def test_no_key_or_a_wrong_one_is_401_everywhere(api: Api) -> None:
    ids = make_b_data(api)
    made = api.service.registry.create_key("tenant-b")
    api.service.registry.revoke(made.info.key_id)
    wrong = [None, "", "cmk_00000000_" + "x" * 43, "not-a-key", made.secret, api.key_b + "x", "Basic " + api.key_b]
    for key in wrong:
        for method, path, op in operations(api):
            response = send(api, method, fill(path, ids, "session"), op, key, "x")
            assert response.status_code == 401, (key, op, response.status_code)
            assert response.headers["content-type"] == "application/problem+json"
            assert response.headers.get("www-authenticate") == "Bearer"
            assert not any(marker in response.text for marker in MARKERS)
    assert snapshot(api)  # B's data is still there for B


def test_admin_routes_take_only_the_admin_key(api: Api) -> None:
    for method, path, op in operations(api):
        if op not in ADMIN:
            continue
        filled = fill(path, {"session": "s", "fact": "f", "block": "b"}, "session")
        body = {"name": "newco"} if op == "createTenant" else ({} if op == "createKey" else None)
        tenant = api.http.request(method, filled, json=body, headers=api.headers(api.key_a))
        assert tenant.status_code == 401, op
    made = api.http.post("/v1/admin/tenants/tenant-b/keys", json={"label": "ci"}, headers=api.headers(ADMIN_KEY))
    assert made.status_code == 201
    assert made.headers["cache-control"] == "no-store"
    key = made.json()["key"]
    assert api.http.get("/v1/sessions", headers=api.headers(key)).status_code == 200
    listed = api.http.get("/v1/admin/tenants/tenant-b/keys", headers=api.headers(ADMIN_KEY)).text
    assert key not in listed
    assert made.json()["key_id"] in listed
    revoked = api.http.delete(f"/v1/admin/keys/{made.json()['key_id']}", headers=api.headers(ADMIN_KEY))
    assert revoked.status_code == 200
    assert api.http.get("/v1/sessions", headers=api.headers(key)).status_code == 401
