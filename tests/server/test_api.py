"""The HTTP API against the library: each route does what the ``Memory`` call it wraps does."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from convmem import Memory
from convmem.errors import StaleSessionError

from .conftest import Api, make_api

A = "?user_id=alice"


def post(api: Api, path: str, body: Any, key: str | None = "a") -> Any:
    return api.http.post(path, json=body, headers=api.headers(api.key_a if key == "a" else key))


def get(api: Api, path: str, key: str | None = "a") -> Any:
    return api.http.get(path, headers=api.headers(api.key_a if key == "a" else key))


def session(api: Api, **options: Any) -> str:
    response = post(api, f"/v1/sessions{A}", options)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def add(api: Api, sid: str, *messages: dict[str, Any]) -> Any:
    return post(api, f"/v1/sessions/{sid}/messages{A}", {"messages": list(messages)})


def test_session_options_are_saved_and_decide_every_context(api: Api) -> None:
    sid = session(api, model="gpt-4o", max_tokens=200, max_output_tokens=20, title="t")
    local = Memory(model="gpt-4o", max_tokens=200, max_output_tokens=20)
    for i in range(12):
        message = {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 12}
        assert add(api, sid, message).status_code == 201
        local.add(message)
    served = post(api, f"/v1/sessions/{sid}/context{A}", {}).json()
    expected = local.context()
    assert served["account"]["budget"] == 200
    assert served["account"]["reserved_output"] == 20
    assert served["account"]["window"] == expected.account.window
    assert served["messages"] == expected.messages
    assert [item["reason"] for item in served["left_out"]] == [item.reason for item in expected.left_out]
    detail = get(api, f"/v1/sessions/{sid}{A}").json()
    assert detail["options"]["max_tokens"] == 200
    assert detail["budget"] == 200
    assert detail["stats"]["archived"] == local.stats().archived


def test_messages_in_each_format_and_the_codec(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    openai = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    assert (
        add(
            api, sid, {"role": "user", "content": "hi"}, openai, {"role": "tool", "tool_call_id": "c1", "content": "1"}
        ).status_code
        == 201
    )
    anthropic = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "from claude"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        ],
    }
    assert add(api, sid, anthropic).status_code == 201
    assert (
        add(
            api, sid, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2"}]}
        ).status_code
        == 201
    )
    responses = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "from responses"}]}
    assert add(api, sid, responses).status_code == 201
    codec = {"role": "user", "content": "mine", "id": "client-id-1", "created_at": "2026-01-02T03:04:05.000000+00:00"}
    added = post(api, f"/v1/sessions/{sid}/messages{A}", {"messages": [codec], "format": "convmem"}).json()
    assert added["messages"][0]["id"] == "client-id-1"
    # The same message again is a retry: it answers with what is stored, and stores nothing twice.
    again = post(api, f"/v1/sessions/{sid}/messages{A}", {"messages": [codec], "format": "convmem"})
    assert again.status_code == 201
    assert again.json()["messages"][0]["id"] == "client-id-1"
    clash = post(
        api, f"/v1/sessions/{sid}/messages{A}", {"messages": [{**codec, "content": "not mine"}], "format": "convmem"}
    )
    assert clash.status_code == 409  # the same id with other content: a conflict naming the id
    assert "client-id-1" in clash.json()["detail"]
    page = get(api, f"/v1/sessions/{sid}/messages{A}&limit=3").json()
    assert [item["seq"] for item in page["items"]] == [0, 1, 2]
    assert page["next_cursor"] == 3
    rest = get(api, f"/v1/sessions/{sid}/messages{A}&cursor=3").json()
    texts = [item["message"].get("content") for item in rest["items"]]
    assert rest["next_cursor"] is None
    assert "mine" in texts
    assert len(rest["items"]) == 4


def test_an_invalid_batch_stores_nothing_and_names_the_field(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    response = add(api, sid, {"role": "user", "content": "ok"}, {"role": "tool", "content": "no call id"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"].endswith("/invalid-message")
    assert problem["index"] == 1
    assert get(api, f"/v1/sessions/{sid}/messages{A}").json()["items"] == []


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"model": "gpt-4q"}, "unknown-model"),
        ({"max_tokens": 10, "max_output_tokens": 10}, "invalid-options"),
        ({"model": "gpt-4o", "strategy": "sliding_window", "strategy_options": {"nope": 1}}, "invalid-options"),
        ({"model": "gpt-4o", "surprise": True}, "invalid-request"),
        # Found by schemathesis: metadata a store cannot keep exactly was a 503, not the client's error.
        ({"model": "gpt-4o", "metadata": {"n": 10**18}}, "invalid-message"),
    ],
)
def test_bad_options_are_problems(api: Api, body: dict[str, Any], kind: str) -> None:
    response = post(api, f"/v1/sessions{A}", body)
    assert response.status_code == 422, response.text
    assert response.json()["type"].endswith("/" + kind)


def test_a_lone_surrogate_in_a_title_is_the_clients_error(api: Api) -> None:
    raw = b'{"model": "gpt-4o", "title": "lone \\ud800 surrogate"}'  # JSON escapes reach the server as such
    response = api.http.post(
        f"/v1/sessions{A}", content=raw, headers=api.headers(api.key_a) | {"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert "title" in response.text


def test_a_taken_session_id_is_a_conflict(api: Api) -> None:
    session(api, model="gpt-4o", id="same")
    response = post(api, f"/v1/sessions{A}", {"model": "gpt-4o", "id": "same"})
    assert response.status_code == 409
    assert "same" in response.json()["detail"]


def test_context_input_and_formats(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    add(api, sid, {"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"})
    anthropic = post(api, f"/v1/sessions/{sid}/context{A}", {"input": "and now?", "format": "anthropic"}).json()
    # The system prompt ends a stable part: it carries an Anthropic cache breakpoint.
    assert anthropic["request"]["system"] == [
        {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}
    ]
    assert "and now?" in json.dumps(anthropic["request"]["messages"][-1])  # consecutive user turns merge
    assert anthropic["account"]["input"] > 0
    responses = post(api, f"/v1/sessions/{sid}/context{A}", {"format": "responses"}).json()
    assert "input" in responses["request"]
    assert len(get(api, f"/v1/sessions/{sid}/messages{A}").json()["items"]) == 2  # the input was not stored


def test_fork_export_import_round_trip(api: Api) -> None:
    sid = session(api, model="gpt-4o", title="orig")
    for i in range(4):
        add(api, sid, {"role": "user", "content": f"m{i}"})
    fork = post(api, f"/v1/sessions/{sid}/fork{A}", {"at_seq": 1})
    assert fork.status_code == 201
    assert fork.json()["parent_id"] == sid
    assert fork.json()["message_count"] == 2
    fork_id = fork.json()["id"]
    assert get(api, f"/v1/sessions/{fork_id}{A}").status_code == 200
    assert post(api, f"/v1/sessions/{sid}/fork{A}", {"at_seq": 99}).status_code == 422
    exported = get(api, f"/v1/sessions/{sid}/export{A}")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert json.loads(exported.text.splitlines()[0])["session"]["id"] == sid  # the client's id, not the store's
    assert "tenant-a" not in exported.text
    taken = post(api, f"/v1/sessions/import{A}", {"jsonl": exported.text})
    assert taken.status_code == 409
    # Message ids are unique per store; another tenant imports the same ids without meeting them.
    imported = post(api, "/v1/sessions/import?user_id=bob", {"jsonl": exported.text, "id": "copy"}, key=api.key_b)
    assert imported.status_code == 201, imported.text
    items = api.http.get("/v1/sessions/copy/messages?user_id=bob", headers=api.headers(api.key_b)).json()["items"]
    assert [i["message"]["content"] for i in items] == ["m0", "m1", "m2", "m3"]
    assert api.http.get(f"/v1/sessions/{sid}/export{A}", headers=api.headers(api.key_b)).status_code == 404
    broken = post(api, f"/v1/sessions/import{A}", {"jsonl": exported.text.rsplit("\n", 2)[0], "id": "broken"})
    assert broken.status_code == 422
    assert get(api, f"/v1/sessions/broken{A}").status_code == 404


def test_list_search_update_delete(api: Api) -> None:
    first = session(api, model="gpt-4o", title="Trip to Lisbon")
    second = session(api, model="gpt-4o", title="Groceries")
    listed = [s["id"] for s in get(api, f"/v1/sessions{A}").json()["items"]]
    assert set(listed) == {first, second}
    assert [s["id"] for s in get(api, f"/v1/sessions{A}&q=lisbon").json()["items"]] == [first]
    patched = api.http.patch(f"/v1/sessions/{second}{A}", json={"title": "Shopping"}, headers=api.headers(api.key_a))
    assert patched.json()["title"] == "Shopping"
    assert api.http.delete(f"/v1/sessions/{first}{A}", headers=api.headers(api.key_a)).status_code == 204
    assert get(api, f"/v1/sessions/{first}{A}").status_code == 404


def test_provider_responses_are_added_with_their_usage(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    add(api, sid, {"role": "user", "content": "hi"})
    completion = {
        "choices": [{"message": {"role": "assistant", "content": "hello", "refusal": None}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    assert post(api, f"/v1/sessions/{sid}/responses{A}", {"response": completion}).status_code == 201
    claude = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "hey"}],
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    assert post(api, f"/v1/sessions/{sid}/responses{A}", {"response": claude}).status_code == 201
    response = {
        "object": "response",
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    assert post(api, f"/v1/sessions/{sid}/responses{A}", {"response": response}).status_code == 201
    stats = get(api, f"/v1/sessions/{sid}{A}").json()["stats"]
    assert stats["input_tokens"] == 18
    assert stats["output_tokens"] == 4
    assert stats["messages"] == 4
    bad = post(api, f"/v1/sessions/{sid}/responses{A}", {"response": {"choices": []}})
    assert bad.status_code == 422
    # A Responses reply with reasoning and two parallel calls is one assistant message; cached input is counted.
    calls = {
        "object": "response",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        ],
        "usage": {"input_tokens": 2000, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 1024}},
    }
    added = post(api, f"/v1/sessions/{sid}/responses{A}", {"response": calls}).json()["messages"]
    assert len(added) == 1
    assert [c["id"] for c in added[0]["tool_calls"]] == ["c1", "c2"]
    outputs = [{"type": "function_call_output", "call_id": c, "output": "1"} for c in ("c1", "c2")]
    assert post(api, f"/v1/sessions/{sid}/messages{A}", {"messages": outputs}).status_code == 201
    stats = get(api, f"/v1/sessions/{sid}{A}").json()["stats"]
    assert stats["messages"] == 7
    assert stats["cached_input_tokens"] == 1024


def test_clear_rollback_repair(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    add(api, sid, {"role": "user", "content": "go"}, call)
    assert get(api, f"/v1/sessions/{sid}{A}").json()["pending_tool_calls"] == ["c1"]
    repaired = post(api, f"/v1/sessions/{sid}/repair{A}", None).json()["messages"]
    assert repaired[0]["role"] == "tool"
    assert repaired[0]["tool_call_id"] == "c1"
    add(api, sid, call | {"tool_calls": [{**call["tool_calls"][0], "id": "c2"}]})
    removed = post(api, f"/v1/sessions/{sid}/rollback{A}", None).json()["messages"]
    assert removed[0]["tool_calls"][0]["id"] == "c2"
    assert post(api, f"/v1/sessions/{sid}/clear{A}", {"keep_system": True}).status_code == 204
    assert post(api, f"/v1/sessions/{sid}/context{A}", {}).json()["account"]["window"] == 0


def test_a_writer_that_lost_the_race_catches_up_and_adds_once(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = session(api, model="gpt-4o", max_tokens=60)
    store = api.service.backend.store
    original = store.append
    calls = {"n": 0}

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:  # another writer got there first: the store refuses and writes nothing
            raise StaleSessionError("another writer appended first")
        return original(*args, **kwargs)

    for i in range(3):
        add(api, sid, {"role": "user", "content": f"filler {i} " * 8})
    monkeypatch.setattr(store, "append", racing)
    response = add(api, sid, {"role": "user", "content": "the racing one " * 8})
    assert response.status_code == 201
    assert calls["n"] == 2  # refused once, then written after catching up
    contents = [i["message"]["content"] for i in get(api, f"/v1/sessions/{sid}/messages{A}").json()["items"]]
    assert contents.count("the racing one " * 8) == 1


def test_body_limit_and_time_limit(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    small = make_api(tmp_path, max_body_bytes=2048, request_timeout=30)
    sid = session(small, model="gpt-4o")
    big = add(small, sid, {"role": "user", "content": "x" * 5000})
    assert big.status_code == 413
    assert big.json()["type"].endswith("/too-large")

    def chunks() -> Any:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"y" * 500
        yield b'"}]}'

    chunked = small.http.post(
        f"/v1/sessions/{sid}/messages{A}",
        content=chunks(),
        headers=small.headers(small.key_a) | {"content-type": "application/json"},
    )
    assert chunked.status_code == 413
    monkeypatch.setattr(small.service.sessions, "context", lambda *a, **k: time.sleep(1.0))
    limits = small.http.app.app  # the Limits middleware, inside Observed (request ids)
    monkeypatch.setattr(limits, "timeout", 0.3)  # only now: a loaded machine may take that long to set up
    slow = post(small, f"/v1/sessions/{sid}/context{A}", {})
    assert slow.status_code == 503
    assert slow.json()["type"].endswith("/timeout")
    monkeypatch.setattr(limits, "timeout", 30)
    assert get(small, f"/v1/sessions/{sid}/messages{A}").json()["items"] == []
    small.service.close()


def test_facts_timeline(api: Api) -> None:
    home = post(api, f"/v1/facts{A}", {"text": "Alice lives in Lisbon", "subject": "alice.home"}).json()
    moved = post(api, f"/v1/facts/{home['id']}/update{A}", {"text": "Alice lives in Porto"})
    assert moved.status_code == 201
    history = get(api, f"/v1/facts{A}&history=true").json()
    old = next(f for f in history if f["id"] == home["id"])
    assert old["valid_to"] is not None
    assert old["replaced_by"] == moved.json()["id"]
    now = [f["text"] for f in get(api, f"/v1/facts{A}").json()]
    assert now == ["Alice lives in Porto"]
    when = {"user_id": "alice", "valid_at": old["valid_from"]}
    before = api.http.get("/v1/facts", params=when, headers=api.headers(api.key_a))
    assert [f["text"] for f in before.json()] == ["Alice lives in Lisbon"]
    ended = post(api, f"/v1/facts/{moved.json()['id']}/invalidate{A}", {"reason": "moved abroad"})
    assert ended.status_code == 200
    assert ended.json()["invalid_reason"] == "moved abroad"
    assert post(api, f"/v1/facts/{home['id']}/invalidate{A}", {"reason": "again"}).status_code == 409
    assert post(api, f"/v1/facts/nope/invalidate{A}", {"reason": "x"}).status_code == 404
    naive = post(api, f"/v1/facts{A}", {"text": "t", "valid_from": "2024-01-01T00:00:00"})
    assert naive.status_code == 201  # a time without an offset is UTC, as everywhere in convmem
    assert datetime.fromisoformat(naive.json()["valid_from"]) == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert post(api, f"/v1/facts{A}", {"text": "t", "valid_from": "yesterday"}).status_code == 422


def test_blocks_with_versions_limits_and_in_context(api: Api) -> None:
    created = api.http.put(
        f"/v1/blocks/persona{A}",
        json={"value": "terse", "expected_version": 0, "max_tokens": 20},
        headers=api.headers(api.key_a),
    )
    assert created.status_code == 200
    assert created.json()["version"] == 1
    again = api.http.put(
        f"/v1/blocks/persona{A}", json={"value": "x", "expected_version": 0}, headers=api.headers(api.key_a)
    )
    assert again.status_code == 409
    edited = post(api, f"/v1/blocks/persona/edit{A}", {"op": "append", "text": "and kind", "expected_version": 1})
    assert edited.json()["value"] == "terse\nand kind"
    assert edited.json()["max_tokens"] == 20
    stale = post(api, f"/v1/blocks/persona/edit{A}", {"op": "append", "text": "x", "expected_version": 1})
    assert stale.status_code == 409
    over = post(api, f"/v1/blocks/persona/edit{A}", {"op": "append", "text": "word " * 50, "expected_version": 2})
    assert over.status_code == 422
    assert over.json()["type"].endswith("/block-edit")
    sid = session(api, model="gpt-4o")
    add(api, sid, {"role": "user", "content": "hi"})
    ctx = post(api, f"/v1/sessions/{sid}/context{A}", {}).json()
    assert ctx["account"]["blocks"]["persona"] > 0
    assert "and kind" in json.dumps(ctx["messages"])
    assert get(api, "/v1/blocks/persona?user_id=bob").status_code == 404


def test_recall_finds_archived_messages_with_signals(api: Api) -> None:
    sid = session(api, model="gpt-4o", max_tokens=120)
    add(api, sid, {"role": "user", "content": "I parked the car on level 3 of the airport garage"})
    for i in range(10):
        add(api, sid, {"role": "assistant", "content": f"filler reply number {i} " * 4})
    found = post(api, f"/v1/recall{A}", {"query": "where did I park the car?", "k": 3}).json()
    assert found["mode"] == "lexical"
    top = found["items"][0]
    assert "level 3" in top["text"]
    assert top["session_id"] == sid
    assert top["signals"]["lexical"]["rank"] == 1
    # Each signal's own score, the raw BM25 and the one-line reason come from the library's explained hit.
    assert top["signals"]["lexical"]["score"] is not None
    assert top["signals"]["lexical"]["bm25"] > 0
    assert top["signals"]["dense"] == {"rank": None, "score": None}
    assert top["rank"] == 1
    assert top["ranked_by"] == "lexical"
    assert top["reason"].startswith("rank 1 of ")
    assert "bm25" in top["reason"]
    other = session(api, model="gpt-4o")
    scoped = post(api, f"/v1/recall{A}", {"query": "car", "session_id": other}).json()
    assert scoped["items"] == []
    assert post(api, f"/v1/recall{A}", {"query": "car", "mode": "hybrid"}).status_code == 422


def test_the_inspector_ships_in_the_package_and_loads_nothing_from_elsewhere(api: Api) -> None:
    from importlib.resources import files

    static = files("convmem.server") / "static"
    for name in ("index.html", "app.js", "app.css"):
        text = (static / name).read_text()
        assert "http://" not in text
        assert "https://" not in text
        assert "//cdn" not in text
    page = api.http.get("/ui/")
    assert page.status_code == 200
    assert "convmem inspector" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert api.http.get("/ui/app.js").headers["content-type"].startswith(("text/javascript", "application/javascript"))
