"""The service on every persistent backend: SQLite, PostgreSQL and Redis (the real servers), same behaviour."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_a_session_with_long_term_memory_on_each_backend(client: tuple[TestClient, str, str]) -> None:
    http, key_a, key_b = client
    a = {"Authorization": f"Bearer {key_a}"}
    b = {"Authorization": f"Bearer {key_b}"}
    q = "?user_id=alice"
    for headers in (a, b):  # both tenants own "same": ids are scoped per tenant
        created = http.post(
            f"/v1/sessions{q}", json={"id": "same", "model": "gpt-4o", "max_tokens": 150}, headers=headers
        )
        assert created.status_code == 201
    block = http.put(f"/v1/blocks/persona{q}", json={"value": "terse", "expected_version": 0, "priority": 0}, headers=a)
    assert block.status_code == 200, block.text
    park = {"role": "user", "content": "I left the bike at the north gate", "id": "m-0"}
    first = http.post(f"/v1/sessions/same/messages{q}", json={"messages": [park], "format": "convmem"}, headers=a)
    assert first.status_code == 201, first.text
    for i in range(1, 12):
        body = {"messages": [{"role": "assistant", "content": f"reply {i} " * 6, "id": f"m-{i}"}], "format": "convmem"}
        assert http.post(f"/v1/sessions/same/messages{q}", json=body, headers=a).status_code == 201
    same_ids = {"messages": [{"role": "user", "content": "mine", "id": "m-0"}], "format": "convmem"}
    assert http.post(f"/v1/sessions/same/messages{q}", json=same_ids, headers=b).status_code == 201
    ctx = http.post(f"/v1/sessions/same/context{q}", json={}, headers=a).json()
    assert ctx["account"]["blocks"].get("persona", 0) > 0, ctx
    assert "archived" in [item["reason"] for item in ctx["left_out"]]
    found = http.post(f"/v1/recall{q}", json={"query": "where is the bike?"}, headers=a).json()["items"]
    assert found[0]["message_id"] == "m-0"
    assert found[0]["session_id"] == "same"
    assert http.post(f"/v1/recall{q}", json={"query": "bike"}, headers=b).json()["items"] == []
    statuses = {i["status"] for i in http.get(f"/v1/sessions/same/messages{q}", headers=a).json()["items"]}
    assert statuses == {"archived", "active"}
    assert len(http.get(f"/v1/sessions/same/messages{q}", headers=b).json()["items"]) == 1
    fact = http.post(f"/v1/facts{q}", json={"text": "Alice cycles to work"}, headers=a).json()
    assert [f["id"] for f in http.get(f"/v1/facts{q}", headers=a).json()] == [fact["id"]]
    assert http.get(f"/v1/facts{q}", headers=b).json() == []
    turn = http.get(f"/v1/sessions/same/turns/11{q}", headers=a).json()
    assert turn["context"]["account"]["window"] == ctx["account"]["window"]
    fork = http.post(f"/v1/sessions/same/fork{q}", json={"at_seq": 3}, headers=a).json()
    assert http.get(f"/v1/sessions/{fork['id']}{q}", headers=b).status_code == 404
    exported = http.get(f"/v1/sessions/same/export{q}", headers=a).text
    imported = http.post("/v1/sessions/import?user_id=alice", json={"jsonl": exported, "id": "copy"}, headers=b)
    # Message ids are scoped by user and session, so B's own m-0 does not clash with the imported copy.
    assert imported.status_code == 201, imported.text
    assert imported.json()["message_count"] == 12
    again = http.post("/v1/sessions/import?user_id=alice", json={"jsonl": exported, "id": "copy"}, headers=b)
    assert again.status_code in (409, 422), again.text  # the session id is taken, in B's own namespace
    assert "tenant-" not in again.text
