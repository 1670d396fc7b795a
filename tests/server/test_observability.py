"""What an operator watches: ``/metrics`` scraped after requests, request ids, JSON log lines.

Every message carries a canary; neither the scraped text nor any log line holds it, a key or a tenant.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convmem.server.observe import JsonFormatter, use_json_logs

from .conftest import Api, make_api

A = "?user_id=alice"
CANARY = "zq-canary-4410"
# The text exposition format 0.0.4: comments, and samples `name{label="value",...} number`.
HELP = re.compile(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples of an exposition, every line checked against the format."""
    samples = {}
    types: dict[str, str] = {}
    for line in text.rstrip("\n").split("\n"):  # the format separates lines by \n only
        comment = HELP.match(line)
        if comment:
            if comment.group(1) == "TYPE":
                assert comment.group(3) in ("counter", "histogram"), line
                types[comment.group(2)] = comment.group(3)
            continue
        sample = SAMPLE.match(line)
        assert sample, f"not a sample line: {line!r}"
        name, labels, value = sample.group(1), sample.group(2) or "", sample.group(3)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family in types, f"{name} has no TYPE line"
        samples[(name, frozenset(LABEL.findall(labels)))] = float(value)
    return samples


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)


@pytest.fixture
def observed(tmp_path: Path) -> Iterator[Api]:
    api = make_api(tmp_path)
    yield api
    api.http.close()
    api.service.close()


def conversation(api: Api) -> str:
    headers = api.headers(api.key_a)
    created = api.http.post(f"/v1/sessions{A}", json={"model": "gpt-4o", "max_tokens": 300}, headers=headers)
    assert created.status_code == 201, created.text
    sid = str(created.json()["id"])
    for i in range(16):
        message = {"role": "user" if i % 2 == 0 else "assistant", "content": f"{CANARY} turn {i} " + "word " * 20}
        response = api.http.post(f"/v1/sessions/{sid}/messages{A}", json={"messages": [message]}, headers=headers)
        assert response.status_code == 201, response.text
    context = api.http.post(f"/v1/sessions/{sid}/context{A}", json={"input": f"{CANARY} and now?"}, headers=headers)
    assert context.status_code == 200, context.text
    return sid


def test_metrics_are_scraped_after_requests(observed: Api) -> None:
    sid = conversation(observed)
    response = observed.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response.text
    samples = scrape(text)
    route = "/v1/sessions/{session_id}/messages"
    assert value(samples, "convmem_http_requests_total", method="POST", route=route, status="201") == 16
    assert value(samples, "convmem_http_requests_total", route="/v1/sessions", status="201") == 1
    assert value(samples, "convmem_http_duration_seconds_count", method="POST", route=route) == 16
    appends = {"convmem_store_kind": "memory", "convmem_store_operation": "append"}
    assert value(samples, "convmem_store_duration_seconds_count", **appends) == 16
    assert value(samples, "convmem_store_duration_seconds_bucket", le="+Inf", **appends) == 16
    assert value(samples, "convmem_context_tokens_count", gen_ai_request_model="gpt-4o") == 1
    assert value(samples, "convmem_evictions_total") > 0  # 16 turns of ~25 tokens in a 300-token budget
    assert value(samples, "gen_ai_client_operation_duration_seconds_count", gen_ai_operation_name="upsert_memory") == 16
    for secret in (CANARY, sid, observed.key_a, "tenant-a", "alice"):
        assert secret not in text
    # a second scrape sees the first one counted, on the route's own template
    again = scrape(observed.http.get("/metrics").text)
    assert value(again, "convmem_http_requests_total", route="/metrics", status="200") == 1


def test_metrics_can_be_turned_off(tmp_path: Path) -> None:
    api = make_api(tmp_path, metrics=False)
    try:
        assert api.service.telemetry is None
        assert api.http.get("/metrics").status_code == 404
    finally:
        api.http.close()
        api.service.close()


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def lines() -> Iterator[Lines]:
    logger = logging.getLogger("convmem")
    handler, level = Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_every_request_has_an_id_and_one_json_line_without_content_or_keys(observed: Api, lines: Lines) -> None:
    sid = conversation(observed)
    headers = observed.headers(observed.key_a)
    given = observed.http.get(f"/v1/sessions/{sid}{A}", headers={**headers, "X-Request-Id": "trace-42.a_b"})
    assert given.headers["x-request-id"] == "trace-42.a_b"
    refused = observed.http.get(f"/v1/sessions/{sid}{A}", headers={**headers, "X-Request-Id": f"{CANARY} x" * 9})
    made = refused.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)  # a client's id that is not a short token is replaced
    missing = observed.http.get(f"/v1/sessions/nope{A}", headers=headers)
    assert missing.status_code == 404
    records: list[dict[str, Any]] = [json.loads(line) for line in lines.lines]
    access = [r for r in records if r["logger"] == "convmem.server.access"]
    assert len(access) == 1 + 16 + 1 + 3
    assert {r["request_id"] for r in access} >= {"trace-42.a_b", made, missing.headers["x-request-id"]}
    assert len({r["request_id"] for r in access}) == len(access)
    last = access[-1]
    assert last["route"] == "/v1/sessions/{session_id}"
    assert last["status"] == 404
    assert last["method"] == "GET"
    assert last["level"] == "info"
    assert isinstance(last["duration_ms"], float)
    for line in lines.lines:
        for secret in (CANARY, observed.key_a, "word word"):
            assert secret not in line


def test_json_logs_are_installed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger("convmem")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logger.level)
    first = use_json_logs()
    assert use_json_logs() is first
    assert logger.handlers == [first]
    record = logging.LogRecord(
        "convmem.server", logging.WARNING, __file__, 1, "dsn %s", ("postgresql://u:pw@h/db",), None
    )
    line = json.loads(first.format(record))
    assert line["message"] == "dsn postgresql://[redacted]@h/db"
    assert "request_id" not in line  # outside a request
