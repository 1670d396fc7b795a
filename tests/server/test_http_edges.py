"""The edges of HTTP: what the service refuses, and in what words, and that a refusal keeps the connection.

Each test covers a class: every integer field of a usage object, every path's
405, the request head limit on the live server (httptools ignores uvicorn's
h11 limit), date-times that are numbers, bodies the JSON reader refuses for
a reason that is not "invalid JSON", and constructor complaints that would
name Python internals.
"""

from __future__ import annotations

import re

import httpx
import pytest

from .conftest import Api, Live

USAGE_FIELDS = [
    ("prompt_tokens", {"completion_tokens": 1}),
    ("completion_tokens", {"prompt_tokens": 1}),
    ("input_tokens", {"output_tokens": 1}),
    ("cache_read_input_tokens", {"input_tokens": 1, "output_tokens": 1}),
]


@pytest.mark.parametrize(("name", "rest"), USAGE_FIELDS)
@pytest.mark.parametrize("value", [2**53, 10**30, 10**400])
def test_a_huge_integer_in_usage_is_a_422_and_the_connection_stays(
    live: Live, name: str, rest: dict[str, int], value: int
) -> None:
    headers = {"Authorization": f"Bearer {live.key_a}"}
    with httpx.Client(base_url=live.url, headers=headers, timeout=120) as http:
        sid = f"u-{name}-{len(str(value))}"
        assert http.post("/v1/sessions", json={"id": sid, "model": "gpt-4o"}).status_code == 201
        message = {"messages": [{"role": "user", "content": "hi"}]}
        assert http.post(f"/v1/sessions/{sid}/messages", json=message).status_code == 201
        for route, body in (("usage", {"usage": {name: value, **rest}}), ("responses", _reply({name: value, **rest}))):
            answer = http.post(f"/v1/sessions/{sid}/{route}", json=body)
            assert answer.status_code == 422, answer.text
            assert answer.headers.get("connection") != "close"
            assert "9007199254740991" in answer.json()["detail"]
        stats = http.get(f"/v1/sessions/{sid}").json()["stats"]  # the same connection, and nothing recorded
        assert stats["input_tokens"] == 0
        assert http.get(f"/v1/sessions/{sid}/messages").json()["items"][-1]["message"]["content"] == "hi"


def _reply(usage: dict[str, int]) -> dict[str, object]:
    return {"response": {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": usage}}


def test_every_405_allows_every_method_of_its_path(api: Api) -> None:
    schema = api.http.get("/openapi.json").json()
    headers = api.headers(api.key_a)
    patterns = {re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", p) + "$"): ops for p, ops in schema["paths"].items()}
    for path in schema["paths"]:
        concrete = re.sub(r"\{[^}]+\}", "x1", path)
        # /v1/sessions/import is also /v1/sessions/{session_id}: a path answers what every route of it does
        documented = {m.upper() for pattern, ops in patterns.items() if pattern.match(concrete) for m in ops}
        for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - documented:
            answer = api.http.request(method, concrete, headers=headers)
            assert answer.status_code == 405, (method, path)
            allowed = set(answer.headers["allow"].split(", "))
            assert allowed - {"HEAD"} == documented, (method, path, allowed)


def test_the_request_head_limit_is_held(api: Api) -> None:
    http, headers = api.http, api.headers(api.key_a)
    assert http.get("/v1/sessions", headers={**headers, "X-Pad": "a" * 60_000}).status_code == 200
    big = http.get("/v1/sessions", headers={**headers, "X-Pad": "a" * 100_000})
    assert big.status_code == 431
    assert "65536" in big.json()["detail"]
    many = {f"X-Pad-{i}": "b" * 1000 for i in range(70)}  # many headers add up
    assert http.get("/v1/sessions", headers={**headers, **many}).status_code == 431
    line_and_header = http.get("/v1/sessions", params={"q": "c" * 40_000}, headers={**headers, "X-Pad": "d" * 30_000})
    assert line_and_header.status_code == 431  # the request line counts too


def test_a_live_server_never_answers_a_huge_head(live: Live) -> None:
    headers = {"Authorization": f"Bearer {live.key_a}", "X-Pad": "a" * 100_000}
    try:
        answer = httpx.get(f"{live.url}/v1/sessions", headers=headers, timeout=120)
    except httpx.ReadError:  # the server may close on a head it will not read; it never serves it
        return
    assert answer.status_code == 431


@pytest.mark.parametrize("value", ["0.5", "0", "1700000000", "1e9", "-1", "tomorrow"])
def test_a_date_time_is_written_as_one(api: Api, value: str) -> None:
    answer = api.http.get("/v1/facts", params={"valid_at": value}, headers=api.headers(api.key_a))
    assert answer.status_code == 422, value
    assert "date-time" in answer.json()["detail"]


def test_a_written_date_time_is_accepted(api: Api) -> None:
    for value in ("2026-01-31T12:00:00Z", "2026-01-31T12:00:00+02:00", "2026-01-31 12:00:00.5+00:00"):
        answer = api.http.get("/v1/facts", params={"valid_at": value}, headers=api.headers(api.key_a))
        assert answer.status_code == 200, (value, answer.text)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"messages": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nests deeper than the limit of 256 levels"),
        (
            b'{"messages": [' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"]}",
            "nests deeper than the limit of 256 levels",
        ),
        (b'{"messages": [{"role": "user", "content": "x", "n": ' + b"9" * 5000 + b"}]}", "more than 4300 digits"),
        (b'{"messages": [', "JSON decode error"),
    ],
)
def test_a_refused_body_is_described_as_it_is(api: Api, body: bytes, said: str) -> None:
    headers = {**api.headers(api.key_a), "content-type": "application/json"}
    assert api.http.post("/v1/sessions", json={"id": "s", "model": "gpt-4o"}, headers=headers).status_code == 201
    answer = api.http.post("/v1/sessions/s/messages", content=body, headers=headers)
    assert answer.status_code == 422
    assert said in answer.json()["detail"]


@pytest.mark.parametrize("strategy", ["token_budget", "sliding_window", "summary_buffer", "compaction"])
def test_an_unknown_strategy_option_is_named_without_internals(api: Api, strategy: str) -> None:
    body = {"model": "gpt-4o", "strategy": strategy, "strategy_options": {"bogus": 1}}
    answer = api.http.post("/v1/sessions", json=body, headers=api.headers(api.key_a))
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert "no option 'bogus'" in detail
    assert "__init__" not in detail
    assert "keyword argument" not in detail
