"""The OpenAPI document is as strict as the service: a schema-valid request is not refused for its shape.

schemathesis generates positive data only (every parameter and body valid under the document) for every
operation, and the service must not answer it with a 4xx other than the state errors the document lists
(404: no such session, fact, block or key; 409: a version, a taken id, an ambiguous prefix). What JSON Schema
cannot state is left to exactly one place, the library: a body the document allows but a library rule refuses
(a message's format, whether the model registry knows a name, max_output_tokens under the budget, a strategy's
options, an export's lines) is allowed to be a 422 only when the library, run in process on the same input,
refuses it with the same problem type. Anything else refused (a pattern, a bound, an enum, a member the
document does not state) fails the test with the request and the answer.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

from convmem import Memory  # noqa: E402
from convmem.errors import ConvmemError  # noqa: E402
from convmem.server import Settings, create_app  # noqa: E402
from convmem.server.problems import problem_of  # noqa: E402
from convmem.server.schemas import SessionCreate  # noqa: E402
from convmem.stores.memory import MemoryStore  # noqa: E402

from .conftest import ADMIN_KEY  # noqa: E402

os.environ.setdefault("CONVMEM_ADMIN_KEY", ADMIN_KEY)
_TMP = tempfile.mkdtemp(prefix="convmem-strictness-")
APP = create_app(Settings(store="memory", keys=os.path.join(_TMP, "keys.db"), max_body_bytes=1024 * 1024))
KEY = APP.state.service.registry.create_key("strict").secret
schema = schemathesis.openapi.from_asgi("/openapi.json", APP.state.asgi)
schema.config.generation.update(modes=[GenerationMode.POSITIVE])
schema.config.phases.coverage.enabled = False
EXAMPLES = int(os.environ.get("CONVMEM_STRICT_EXAMPLES", "25"))
STATE_ERRORS = {404, 409}
PROBLEMS = "https://convmem.dev/problems/"
# 422s that depend on what is stored, which no schema can know: a seq past the session's end (fork, turn),
# a session longer than a replay may be, a replace whose old text is not in the block at that version, an edit
# that takes the block past its token cap (block-edit: both depend on the block's stored text).
STATE_PROBLEMS = {f"{PROBLEMS}{kind}" for kind in ("invalid-seq", "replay-limit", "invalid-edit", "block-edit")}


def _problem_type(exc: ConvmemError) -> str:
    return str(problem_of(exc)["type"])


def _library(call: Callable[[], object]) -> str | None:
    """The problem type the library refuses ``call`` with in process (None: it accepts it)."""
    try:
        call()
    except ConvmemError as exc:
        return _problem_type(exc)
    return None


def _memory() -> Memory:
    return Memory(store=MemoryStore(), session_id="s", max_tokens=100_000)


def _create(body: dict[str, Any]) -> object:
    validated = SessionCreate.model_validate(body).model_dump(exclude_unset=True)  # as the route reads it
    options = {k: v for k, v in validated.items() if k not in ("id", "title", "metadata")}
    return Memory(store=MemoryStore(), session_id="s", **options)


def _add(body: dict[str, Any]) -> object:
    if body.get("format") == "convmem":
        from convmem.stores.codec import decode_message

        return _memory().add_many([decode_message(m) for m in body["messages"]])
    return _memory().add_many(body["messages"])


def _import(body: dict[str, Any]) -> object:
    return MemoryStore().import_jsonl(body["jsonl"], user_id="u")


# The operations whose bodies carry something only the library can judge, and the in-process call that does.
LIBRARY_RULES: dict[str, Callable[[dict[str, Any]], object]] = {
    "POST /v1/sessions": _create,
    "POST /v1/sessions/{session_id}/messages": _add,
    "POST /v1/sessions/{session_id}/responses": lambda body: _memory().add_response(body["response"]),
    "POST /v1/sessions/{session_id}/usage": lambda body: _memory().record_usage(body["usage"]),
    "POST /v1/sessions/{session_id}/context": lambda body: _memory().context(
        body.get("input"), format=body.get("format")
    ),
    "POST /v1/sessions/import": _import,
}


def refused_by_the_library(label: str, body: Any, answer: dict[str, Any]) -> bool:
    rule = LIBRARY_RULES.get(label)
    if rule is None or not isinstance(body, dict):
        return False
    refusal = _library(lambda: rule(body))
    if label == "POST /v1/sessions/import":  # the store's refusal of an export is the service's invalid-export
        return refusal is not None and answer.get("type") == f"{PROBLEMS}invalid-export"
    return refusal == answer.get("type")


def headers_for(case: Any) -> dict[str, str]:
    admin = case.operation.path.startswith("/v1/admin")
    return {"Authorization": f"Bearer {ADMIN_KEY if admin else KEY}"}


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_a_schema_valid_request_is_not_refused_for_its_shape(case: Any) -> None:
    response = case.call(headers=headers_for(case), timeout=120)
    status = response.status_code
    if status < 400 or status >= 500 or status in STATE_ERRORS:
        return
    body = case.body if isinstance(case.body, dict) else None
    kind = response.headers.get("content-type", [""])
    answer = response.json() if (kind[0] if isinstance(kind, list) else kind).endswith("json") else {}
    if refused_by_the_library(case.operation.label, body, answer):
        return
    if status == 422 and answer.get("type") in STATE_PROBLEMS and "needs" not in str(answer.get("detail")):
        return
    pytest.fail(
        f"{case.operation.label} refused a schema-valid request with {status}: {response.text[:500]}\n"
        f"query={case.query!r} path={case.path_parameters!r} body={case.body!r:.500}"
    )


def test_the_check_fails_on_a_refusal_the_schema_does_not_state() -> None:
    """The rule above is not vacuous: a 422 for a shape the library accepts is not excused."""
    answer = {"type": "https://convmem.dev/problems/invalid-message"}
    assert not refused_by_the_library(
        "POST /v1/sessions/{session_id}/messages", {"messages": [{"role": "user", "content": "hi"}]}, answer
    )
    assert refused_by_the_library("POST /v1/sessions/{session_id}/messages", {"messages": [{"role": 7}]}, answer)
    assert not refused_by_the_library("POST /v1/recall", {"query": "q", "mode": "hybrid"}, answer)


def test_the_document_offers_only_the_recall_modes_this_service_serves() -> None:
    modes = APP.openapi()["components"]["schemas"]["RecallIn"]["properties"]["mode"]["anyOf"]
    assert modes[0]["enum"] == APP.state.service.memories.modes()[0] == ["lexical"]
