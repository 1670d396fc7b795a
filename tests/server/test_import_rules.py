"""The service's import endpoint obeys the rules of add and believes no count an export carries."""

from __future__ import annotations

import json
from typing import Any

from convmem.formats import parse_messages
from convmem.server.tenancy import Scope
from convmem.session import SessionState
from convmem.tokens import counter_for

from .conftest import Api
from .test_api import A, add, get, post, session


def _export(api: Api, sid: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in get(api, f"/v1/sessions/{sid}/export{A}").text.splitlines()]


def _jsonl(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_an_orphan_tool_result_is_refused_whole_with_its_line(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    add(api, sid, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"})
    lines = _export(api, sid)
    lines[2]["message"] = {"role": "tool", "tool_call_id": "call_1", "content": "42", "id": lines[2]["message"]["id"]}
    refused = post(api, f"/v1/sessions/import{A}", {"jsonl": _jsonl(lines), "id": "orphan"})
    assert refused.status_code == 422, refused.text
    assert "line 3" in refused.json()["detail"]
    assert "does not follow an assistant message that called it" in refused.json()["detail"]
    assert get(api, f"/v1/sessions/orphan{A}").status_code == 404  # nothing was imported


def test_forged_counts_in_an_import_never_exceed_the_budget(api: Api) -> None:
    sid = session(api, model="gpt-4o", max_tokens=8000, max_output_tokens=100)
    for i in range(4):
        add(api, sid, {"role": "user", "content": f"question {i} " + "words to count " * 60})
    lines = _export(api, sid)
    lines[0]["state"]["stats"]["config"]["max_tokens"] = 600  # the imported session's budget holds 500 tokens
    for line in lines[1:]:
        line["tokens"] = 1  # each message (about 180 tokens) claims one
    made = post(api, f"/v1/sessions/import{A}", {"jsonl": _jsonl(lines), "id": "forged"})
    assert made.status_code == 201, made.text
    context = post(api, f"/v1/sessions/forged/context{A}", {"format": "openai"}).json()
    counter = counter_for("gpt-4o")
    messages = parse_messages(context["request"]["messages"])
    sent = sum(counter.count_message(m) for m in messages) + counter.reply_priming
    assert sent <= 600 - 100
    assert context["account"]["window"] + context["account"]["pinned"] <= sent


def test_a_damaged_session_is_a_named_conflict_not_a_retry(api: Api) -> None:
    sid = session(api, model="gpt-4o")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    add(api, sid, {"role": "user", "content": "look"}, {"role": "assistant", "content": None, "tool_calls": [call]})
    add(api, sid, {"role": "tool", "tool_call_id": "c1", "content": "found"})
    scope = Scope("tenant-a", "alice")
    store, key = api.service.sessions.store, scope.store_session(sid)
    loaded = store.load(key, user_id=scope.store_user)
    broken = SessionState(2, -1, 0, None, dict(loaded.state.stats), loaded.state.version)  # starts at the result
    store.save_state(key, broken, expected_version=loaded.state.version, user_id=scope.store_user)
    answer = post(api, f"/v1/sessions/{sid}/context{A}", {"format": "openai"})
    assert answer.status_code == 409, answer.text
    assert answer.json()["type"].endswith("damaged-session")
    assert answer.json()["session_id"] == sid  # the client's id: the tenant's namespace is scrubbed
    assert "tenant-a" not in answer.text
