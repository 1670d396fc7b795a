"""The client against a live service that does each write and then loses its answer: every add is stored once.

Between the client and the service sits a proxy (tests/client/_faults.py) that forwards each
request, so the service stores the messages, and then drops the connection, stalls past the
client's timeout, or answers 503. The client sends the same ids again, and the store keeps
each message once. Raw HTTP gets the same safety from an ``Idempotency-Key``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from convmem import AsyncClient, Client, StoreError
from convmem.client import Retry
from tests.server.conftest import Live

from ._faults import FaultyProxy, every

FAST = Retry(attempts=4, base=0.01, max_delay=0.05)
FAULTS = ["drop", "stall", "503"]
TIMEOUT, STALL = 1.0, 1.5  # a stalled answer comes after the client has given up on it (with room on a busy machine)


def turns(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: the weather in city {i}"}
        for i in range(start, start + n)
    ]


def stored(live: Live, session_id: str) -> list[str]:
    with Client.open(session_id, base_url=live.url, api_key=live.key_a, user_id="u") as direct:
        return [m.text for m in direct.messages()]


@pytest.mark.parametrize("kind", FAULTS)
def test_every_add_stored_once_when_each_first_answer_is_lost(live: Live, kind: str) -> None:
    with FaultyProxy(live.url, every(kind, method="POST", path_end="/messages"), stall=STALL) as proxy:
        client = Client(proxy.url, api_key=live.key_a, user_id="u", model="gpt-4o", timeout=TIMEOUT, retry=FAST)
        with client:
            for message in turns(4):
                client.add(message)
            client.add_many(turns(3, start=4))
        adds = [r for r in proxy.requests if r[0] == "POST" and r[1].endswith("/messages")]
    assert [r[2] for r in adds] == [kind, "pass"] * 5  # each write lost its answer once, then was sent again
    assert stored(live, client.session_id) == [m["content"] for m in turns(7)]


async def test_the_async_client_retries_the_same_way(live: Live) -> None:
    def fault(method: str, path: str, index: int) -> str:
        return "drop" if method == "POST" and index % 2 == 0 else "pass"  # creation and adds alike

    with FaultyProxy(live.url, fault) as proxy:
        client = await AsyncClient.create(proxy.url, api_key=live.key_a, user_id="u", model="gpt-4o", retry=FAST)
        async with client:
            for message in turns(5):
                await client.add(message)
            context = await client.context()
    assert [m["content"] for m in context.messages] == [m["content"] for m in turns(5)]
    assert stored(live, client.session_id) == [m["content"] for m in turns(5)]
    assert ("POST", "/v1/sessions", "drop") in proxy.requests  # the session's creation was retried too


def test_a_created_session_whose_answer_was_lost_is_found_not_made_twice(live: Live) -> None:
    with FaultyProxy(live.url, every("drop", method="POST", path_end="/v1/sessions")) as proxy:
        client = Client(proxy.url, api_key=live.key_a, user_id="creator", model="gpt-4o", retry=FAST)
        client.close()
    with Client.open(client.session_id, base_url=live.url, api_key=live.key_a, user_id="creator") as direct:
        assert [s.id for s in direct.list_sessions()] == [client.session_id]


def test_the_error_after_the_last_attempt_names_the_ids_to_send_again(live: Live) -> None:
    with FaultyProxy(live.url, lambda m, p, i: "drop" if p.endswith("/messages") else "pass") as proxy:
        client = Client(proxy.url, api_key=live.key_a, user_id="u", model="gpt-4o", retry=FAST)
        with pytest.raises(StoreError, match="unreachable") as caught:
            client.add_many(turns(2))
        client.close()
    assert len(caught.value.message_ids) == 2
    assert len([r for r in proxy.requests if r[1].endswith("/messages")]) == FAST.attempts
    again = [{**m, "id": key} for m, key in zip(turns(2), caught.value.message_ids, strict=True)]
    with Client.open(client.session_id, base_url=live.url, api_key=live.key_a, user_id="u") as direct:
        assert [m.id for m in direct.add_many(again)] == list(caught.value.message_ids)  # the app's own retry
        assert [m.text for m in direct.messages()] == [m["content"] for m in turns(2)]  # stored once


def test_a_call_that_is_not_safe_to_repeat_is_sent_once(live: Live) -> None:
    client = Client(live.url, api_key=live.key_a, user_id="u", model="gpt-4o", retry=FAST)
    client.add({"role": "user", "content": "hello"})
    with FaultyProxy(live.url, lambda m, p, i: "drop" if p.endswith("/usage") else "pass") as proxy:
        remote = Client.open(client.session_id, base_url=proxy.url, api_key=live.key_a, user_id="u", retry=FAST)
        with pytest.raises(StoreError, match="unreachable"):
            remote.record_usage({"prompt_tokens": 10, "completion_tokens": 2})
        remote.close()
    assert [r[2] for r in proxy.requests if r[1].endswith("/usage")] == ["drop"]
    assert client.stats().output_tokens == 2  # the one attempt was recorded, and only once
    client.close()


class RefusesFirst(httpx.BaseTransport):
    """A transport whose first ``n`` connections are refused (nothing reaches the service), then real ones."""

    def __init__(self, n: int) -> None:
        self.left, self.real = n, httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.left:
            self.left -= 1
            raise httpx.ConnectError("connection refused", request=request)
        return self.real.handle_request(request)

    def close(self) -> None:
        self.real.close()


def test_a_refused_connection_is_retried_even_for_a_write_that_is_not_idempotent(live: Live) -> None:
    client = Client(live.url, api_key=live.key_a, user_id="u", model="gpt-4o", retry=FAST)
    client.add({"role": "user", "content": "hello"})
    client._http.close()
    client._http = httpx.Client(base_url=live.url, headers=client._headers, transport=RefusesFirst(2))
    client.record_usage({"prompt_tokens": 10, "completion_tokens": 3})
    assert client.stats().output_tokens == 3
    client._http.close()
    client._http = httpx.Client(base_url=live.url, headers=client._headers, transport=RefusesFirst(FAST.attempts))
    with pytest.raises(StoreError, match="unreachable: ConnectError"):
        client.record_usage({"prompt_tokens": 10, "completion_tokens": 3})
    client.close()


@pytest.mark.parametrize("kind", FAULTS)
def test_raw_http_with_an_idempotency_key_stores_each_message_once(live: Live, kind: str) -> None:
    headers = {"Authorization": f"Bearer {live.key_a}"}
    created = httpx.post(f"{live.url}/v1/sessions", json={"model": "gpt-4o"}, headers=headers).json()
    path = f"/v1/sessions/{created['id']}/messages"
    with FaultyProxy(live.url, every(kind, method="POST", path_end="/messages"), stall=STALL) as proxy:
        for n, message in enumerate(turns(4)):
            keyed = {**headers, "Idempotency-Key": f"turn-{n}"}
            answer = None
            while answer is None or answer.status_code == 503:
                try:
                    body = {"messages": [message]}
                    answer = httpx.post(f"{proxy.url}{path}", json=body, headers=keyed, timeout=TIMEOUT)
                except httpx.HTTPError:
                    continue  # no answer: send it again, with the same key (the proxy lets the second through)
            assert answer.status_code == 201
            assert answer.json()["messages"][0]["id"] == f"turn-{n}.0"
    listed = httpx.get(f"{live.url}{path}", headers=headers).json()["items"]
    assert [item["message"]["content"] for item in listed] == [m["content"] for m in turns(4)]
    # The same key with another body is not a retry: refused, nothing stored.
    other = httpx.post(
        f"{live.url}{path}",
        json={"messages": [{"role": "user", "content": "something else"}]},
        headers={**headers, "Idempotency-Key": "turn-0"},
    )
    assert other.status_code == 409
    assert len(httpx.get(f"{live.url}{path}", headers=headers).json()["items"]) == 4


def test_a_message_id_in_any_format_survives_the_service_and_makes_a_retry_store_nothing(live: Live) -> None:
    headers = {"Authorization": f"Bearer {live.key_a}"}
    created = httpx.post(f"{live.url}/v1/sessions", json={"model": "gpt-4o"}, headers=headers).json()
    path = f"{live.url}/v1/sessions/{created['id']}/messages"
    items = [
        {"role": "user", "content": "openai", "id": "m-openai"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}], "id": "m-anth"},
        {"type": "function_call_output", "call_id": "t1", "output": "ok", "id": "m-resp"},
    ]
    for _ in range(2):
        answer = httpx.post(path, json={"messages": items}, headers=headers)
        assert answer.status_code == 201
        assert [m["id"] for m in answer.json()["messages"]] == ["m-openai", "m-anth", "m-resp"]
    assert len(httpx.get(path, headers=headers).json()["items"]) == 3


def test_a_reply_added_under_a_lost_answer_records_its_usage_once(live: Live) -> None:
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
    }
    with FaultyProxy(live.url, every("drop", method="POST", path_end="/responses")) as proxy:
        client = Client(proxy.url, api_key=live.key_a, user_id="u", model="gpt-4o", retry=FAST)
        client.add({"role": "user", "content": "hello"})
        client.add_response(reply)
        assert [m.text for m in client.messages()] == ["hello", "hi"]
        assert client.stats().output_tokens == 5
        client.close()


def test_retry_policy_waits_grow_and_stop() -> None:
    policy = Retry(attempts=4, base=0.1, max_delay=0.3)
    waits = [policy.delay(n, status=None) for n in (1, 2, 3, 4)]
    assert waits[3] is None  # the last attempt failed: give up
    assert 0.05 <= waits[0] <= 0.1 <= waits[1] <= 0.2
    assert 0.2 <= waits[2] <= 0.3  # type: ignore[operator]  # capped at max_delay
    assert policy.delay(1, status=409) is None  # an answer that is final
    assert policy.delay(1, status=503, retry_after="0.25") == 0.25  # the service's own wait, within the bound
    assert policy.delay(1, status=503, retry_after="60") == 0.3
