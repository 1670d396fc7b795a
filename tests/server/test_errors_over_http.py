"""Every ``ConvmemError`` subclass raised inside the service reaches ``convmem.Client`` as itself.

The classes are enumerated from the tree (every module of the package imported
first, so a subclass defined anywhere is found), each is raised inside a live
route, and the client, sync and async, must raise the same class with the same
attributes and text, the tenant's namespace scrubbed from every id.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import convmem
from convmem.client import AsyncClient, Client
from convmem.client._core import error_from
from convmem.errors import (
    PROBLEMS,
    AmbiguousSessionError,
    BlockEditError,
    ConfigurationError,
    ConflictError,
    ContextOverflowError,
    ConvmemError,
    DamagedSessionError,
    DecryptionError,
    InvalidFactError,
    InvalidIdError,
    InvalidMessageError,
    LLMError,
    MissingDatabaseError,
    ServiceError,
    SessionLostError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
    TranscriptError,
    UnknownModelError,
    problem_for,
)
from convmem.server.problems import problem_of
from convmem.usage import ModelUsage, Usage

from .conftest import Live

SERVER = Path(convmem.__file__).parent / "server"
TENANT = "tenant-a."  # the namespace the live service gives tenant-a's ids in the store


def tree() -> list[type[ConvmemError]]:
    """ConvmemError and every subclass of it the package defines, recursively, once every module is imported."""
    for module in pkgutil.walk_packages(convmem.__path__, "convmem."):
        importlib.import_module(module.name)
    found: list[type[ConvmemError]] = []
    pending: list[type[ConvmemError]] = [ConvmemError]
    while pending:
        cls = pending.pop()
        if cls not in found:
            found.append(cls)
            pending.extend(cls.__subclasses__())
    return sorted((cls for cls in found if cls.__module__.startswith("convmem.")), key=lambda cls: cls.__name__)


# One error of each class, naming the session ``sid`` wherever an error can: raised with the store's
# id (``tenant-a.s1``), it must arrive as the same error made with the client's (``s1``).
SAMPLES: dict[type[ConvmemError], Callable[[str], ConvmemError]] = {
    ConvmemError: lambda sid: ConvmemError(f"session {sid!r} hit a bug"),
    InvalidMessageError: lambda sid: InvalidMessageError(f"id {sid}.m1 answers no call", field="tool_call_id", index=2),
    InvalidFactError: lambda sid: InvalidFactError(f"a fact of {sid!r} needs non-empty text"),
    InvalidIdError: lambda sid: InvalidIdError("session_id", f"of {sid!r} holds the separator '/' at character 2"),
    TranscriptError: lambda sid: TranscriptError(f"/tmp/{sid}.jsonl", 3, "invalid JSON: Expecting value (column 1)"),
    ContextOverflowError: lambda sid: ContextOverflowError(f"session {sid!r}: pinned messages", needed=900, budget=500),
    UnknownModelError: lambda sid: UnknownModelError(f"{sid}-model", ["gpt-4o", "gpt-4o-mini"]),
    ConfigurationError: lambda sid: ConfigurationError(f"max_tokens of {sid!r} must be positive"),
    BlockEditError: lambda sid: BlockEditError(f"block of {sid!r} would hold 300 tokens; its limit is 200"),
    StoreError: lambda sid: StoreError(f"sqlite /srv/secret/{sid}.db: disk I/O error"),
    SessionNotFoundError: lambda sid: SessionNotFoundError(sid),
    AmbiguousSessionError: lambda sid: AmbiguousSessionError(sid[:-1], [sid, sid + "x"]),
    SessionLostError: lambda sid: SessionLostError(f"the store lost session {sid!r}; nothing was written"),
    DamagedSessionError: lambda sid: DamagedSessionError(sid, "its stored window starts at a tool result (seq 2)"),
    MissingDatabaseError: lambda sid: MissingDatabaseError(f"no database at /srv/secret/{sid}.db"),
    DecryptionError: lambda sid: DecryptionError(f"session {sid!r}, message 'm1': it does not authenticate"),
    ConflictError: lambda sid: ConflictError(f"message id {sid}.m1 holds other content"),
    StaleSessionError: lambda sid: StaleSessionError(f"session {sid!r} changed; this writer holds version 3"),
    LLMError: lambda sid: LLMError(
        f"POST http://llm.internal/v1/chat/completions: HTTP 500 summarizing {sid!r}",
        endpoint="POST http://llm.internal/v1/chat/completions",
        status=500,
        usage=[ModelUsage("gpt-4o-mini", Usage(120, 7, 3))],
    ),
    ServiceError: lambda sid: ServiceError(422, "invalid-seq", "Invalid seq", f"{sid!r} ends at seq 4", last_seq=4),
}


def attributes(error: ConvmemError) -> dict[str, Any]:
    """What must survive the trip: the class, the text and every attribute the table says travels."""
    if isinstance(error, ServiceError):
        names: tuple[str, ...] = ("status", "kind", "title", "detail", "extra")
    else:
        names = problem_for(error).fields
    return {"class": type(error), "text": str(error), **{name: getattr(error, name) for name in names}}


def expected(cls: type[ConvmemError]) -> dict[str, Any]:
    want = attributes(SAMPLES[cls]("s1"))
    hidden = problem_for(SAMPLES[cls]("s1")).hidden
    return want | {"text": hidden} if hidden else want


@pytest.fixture
def raising(live: Live, monkeypatch: pytest.MonkeyPatch) -> Callable[[ConvmemError], None]:
    """Make ``GET /v1/sessions/{id}`` (what ``Client.open`` calls) raise the given error inside the route."""

    def arm(error: ConvmemError) -> None:
        def detail(*args: Any, **kwargs: Any) -> Any:
            raise error

        monkeypatch.setattr(live.service.sessions, "detail", detail)

    return arm


CLASSES = tree()


def test_the_table_names_every_class_of_the_tree_once() -> None:
    assert set(PROBLEMS) == set(CLASSES) - {ServiceError}, "add the class to convmem.errors.PROBLEMS"
    types = [row.type for row in PROBLEMS.values()]
    assert len(types) == len(set(types))
    for cls, row in PROBLEMS.items():
        assert cls.__module__ == "convmem.errors", f"{cls.__name__}: the tree is drawn in one module"
        assert 400 <= row.status < 600
        assert row.title


def test_the_service_gives_no_error_of_its_own_a_type_of_the_table() -> None:
    """A ServiceError with a table's type would come back as that class; "not-found" is told apart by the
    session_id a SessionNotFoundError always carries."""
    taken = {row.type for row in PROBLEMS.values()} - {"not-found"}
    for path in SERVER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ServiceError":
                kind = node.args[1]
                assert isinstance(kind, ast.Constant), f"{path.name}:{node.lineno}: a literal problem type"
                assert kind.value not in taken, f"{path.name}:{node.lineno}: {kind.value!r} is a class's type"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_an_error_raised_in_a_route_arrives_as_itself(cls: type[ConvmemError], live: Live, raising: Any) -> None:
    assert cls in SAMPLES, f"add a sample of {cls.__name__} to SAMPLES (and its row to PROBLEMS)"
    raising(SAMPLES[cls](TENANT + "s1"))
    with pytest.raises(ConvmemError) as caught:
        Client.open("s1", base_url=live.url, api_key=live.key_a)
    assert attributes(caught.value) == expected(cls)
    answer = httpx.get(f"{live.url}/v1/sessions/s1", headers={"Authorization": f"Bearer {live.key_a}"})
    row = problem_for(caught.value)
    assert answer.status_code == row.status
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["type"] == "https://convmem.dev/problems/" + row.type
    assert TENANT not in answer.text


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
async def test_and_so_at_the_async_client(cls: type[ConvmemError], live: Live, raising: Any) -> None:
    raising(SAMPLES[cls](TENANT + "s1"))
    with pytest.raises(ConvmemError) as caught:
        await AsyncClient.open("s1", base_url=live.url, api_key=live.key_a)
    assert attributes(caught.value) == expected(cls)


def test_what_is_no_class_of_the_table_arrives_as_the_services_own_error(live: Live) -> None:
    with pytest.raises(ServiceError) as caught:  # the key check's 401
        Client.open("s1", base_url=live.url, api_key="cmk_00000000_" + "x" * 43)
    assert (caught.value.status, caught.value.kind) == (401, "unauthorized")
    assert error_from(502, None).kind == "http"  # a proxy's page, not a problem document
    fact_gone = error_from(404, {"type": "https://convmem.dev/problems/not-found", "detail": "fact not found: 'f'"})
    assert type(fact_gone) is ServiceError  # another "not-found" than a session's: it has no session_id


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(reason=texts, field=st.none() | texts, index=st.none() | st.integers(0, 10**6))
def test_any_invalid_message_error_survives_the_document(reason: str, field: str | None, index: int | None) -> None:
    error = InvalidMessageError(reason, field=field, index=index)
    back = error_from(422, json.loads(json.dumps(problem_of(error))))
    assert attributes(back) == attributes(error)


@given(needed=st.integers(0, 10**9), budget=st.integers(0, 10**9), reason=texts)
def test_any_overflow_survives_the_document(needed: int, budget: int, reason: str) -> None:
    error = ContextOverflowError(reason, needed=needed, budget=budget)
    assert attributes(error_from(422, json.loads(json.dumps(problem_of(error))))) == attributes(error)


@given(prefix=texts, matches=st.lists(texts, max_size=4))
def test_any_ambiguous_prefix_survives_the_document(prefix: str, matches: list[str]) -> None:
    error = AmbiguousSessionError(prefix, matches)
    assert attributes(error_from(409, json.loads(json.dumps(problem_of(error))))) == attributes(error)
