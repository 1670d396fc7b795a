"""schemathesis over the OpenAPI 3.1 document: every operation, then stateful runs along its links.

Checks: no 5xx (``not_a_server_error``), every status documented (``status_code_conformance``),
bodies and content types as documented (problem+json for errors), and headers.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from convmem.server import Settings, create_app  # noqa: E402
from convmem.server.backends import open_backend  # noqa: E402
from convmem.server.memories import MemoryService  # noqa: E402
from convmem.server.sessions import SessionService  # noqa: E402

from .conftest import ADMIN_KEY  # noqa: E402

os.environ.setdefault("CONVMEM_ADMIN_KEY", ADMIN_KEY)
_TMP = tempfile.mkdtemp(prefix="convmem-schemathesis-")
APP = create_app(Settings(store="memory", keys=os.path.join(_TMP, "keys.db"), max_body_bytes=256 * 1024))
KEY = APP.state.service.registry.create_key("fuzz").secret
schema = schemathesis.openapi.from_asgi("/openapi.json", APP.state.asgi)
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance,
]
# The default run: explicit examples and a few fuzzed cases per operation. CONVMEM_FUZZ_EXAMPLES=100 adds
# schemathesis's coverage phase (every boundary of every parameter) and many more cases: minutes, not seconds.
EXAMPLES = int(os.environ.get("CONVMEM_FUZZ_EXAMPLES", "5"))
schema.config.phases.coverage.enabled = EXAMPLES >= 50


TIMEOUT = 120  # seconds: schemathesis's 10 s default fails on a machine other jobs are loading, not on a bug


def headers_for(case: Any) -> dict[str, str]:
    admin = case.operation.path.startswith("/v1/admin")
    return {"Authorization": f"Bearer {ADMIN_KEY if admin else KEY}"}


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation(case: Any) -> None:
    case.call_and_validate(headers=headers_for(case), checks=CHECKS, timeout=TIMEOUT)


# Admin routes change the tenant list every run, which makes Hypothesis see "inconsistent data generation";
# they are fuzzed above, statelessly. The session, fact and block workflows are the ones with state.
TENANT_SCHEMA = schema.exclude(path_regex="^/v1/admin")


class Workflow(TENANT_SCHEMA.as_state_machine()):  # type: ignore[misc]
    def setup(self) -> None:
        reset_data()

    def get_call_kwargs(self, case: Any) -> dict[str, Any]:
        return {"headers": headers_for(case), "timeout": TIMEOUT}

    def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
        case.validate_response(response, checks=CHECKS)


def reset_data() -> None:
    """A fresh in-memory backend, so every stateful run starts from the same state (the key stays valid)."""
    service = APP.state.service
    fresh = open_backend("memory")
    service.backend, service.sessions = fresh, SessionService(fresh)
    service.memories = MemoryService(fresh, service.sessions)


TestStateful = pytest.mark.slow(Workflow.TestCase)
TestStateful.settings = settings(
    max_examples=EXAMPLES * 4, stateful_step_count=8, deadline=None, suppress_health_check=list(HealthCheck)
)


def test_the_document_is_openapi_3_1_with_links_and_examples() -> None:
    document = APP.openapi()
    assert document["openapi"].startswith("3.1")
    links = [
        link
        for path in document["paths"].values()
        for op in path.values()
        for response in op["responses"].values()
        for link in response.get("links", {}).values()
    ]
    assert len(links) >= 20
    examples = [s for s in document["components"]["schemas"].values() if "examples" in s]
    assert len(examples) >= 4
    for path in document["paths"].values():
        for op in path.values():
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")):
                    assert "application/problem+json" in response["content"], (op["operationId"], status)
