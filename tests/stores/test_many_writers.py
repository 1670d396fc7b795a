"""Two processes run an agent loop on one session, 200 turns each, with tool calls, through ``Memory``.

On SQLite, PostgreSQL and Redis: every acknowledged message is stored exactly once, nothing else is; the
stored history is a valid conversation that renders valid in the OpenAI, Anthropic and Responses formats
(nothing landed between a tool call and its results, whoever wrote); and both writers' views converge
with a freshly opened memory.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convmem import Memory
from convmem.formats.anthropic._render import to_anthropic
from convmem.formats.openai import to_openai
from convmem.formats.responses import to_responses

from ..validators import validate_anthropic, validate_openai, validate_responses
from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for
from ._turn_writer import OPTIONS, open_store

WRITER = str(Path(__file__).with_name("_turn_writer.py"))
TURNS = int(__import__("os").environ.get("CONVMEM_WRITER_TURNS", "200"))


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    backend = request.param
    if backend == "sqlite":
        yield backend, str(tmp_path / "shared.db"), ""
    elif backend == "postgres":
        yield backend, PG_URL, schema_for(tmp_path)
        drop_schemas({schema_for(tmp_path)})
    else:
        yield backend, REDIS_URL, prefix_for(tmp_path)
        drop_prefixes({prefix_for(tmp_path)})


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sqlite", "postgres", "redis"], indirect=True)
def test_two_processes_of_200_turns_on_one_session_store_a_valid_conversation(target: tuple[str, str, str]) -> None:
    backend, location, namespace = target
    open_store(backend, location, namespace).close()  # migrate before the race
    procs = [
        subprocess.Popen(
            [sys.executable, WRITER, backend, location, namespace, tag, str(TURNS)], stdout=subprocess.PIPE
        )
        for tag in ("A", "B")
    ]
    acknowledged: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        for line in out.decode().splitlines():
            status, ids = line.split(" ", 1)
            assert status == "ok"
            acknowledged += ids.split(",")
    store = open_store(backend, location, namespace)
    try:
        rows = list(store.messages("shared", user_id="u"))
        stored = [r.message for r in rows]
        assert [r.seq for r in rows] == list(range(len(rows)))  # nothing deleted, nothing skipped
        assert sorted(m.id or "" for m in stored) == sorted(acknowledged)  # every acknowledged message, once
        assert len(acknowledged) == len(set(acknowledged))
        _valid_everywhere(stored)
        for tag in ("A", "B"):  # each writer's turns are stored in the order it added them
            ids = [m.id or "" for m in stored]
            assert [int(i.rsplit("-", 1)[1]) for i in ids if i.startswith(f"u-{tag}-")] == list(range(TURNS))
        fresh = Memory.open("shared", store=store, user_id="u", **OPTIONS)
        writer = Memory(store=store, user_id="u", session_id="shared", **OPTIONS)
        writer.refresh()  # a writer that catches up sees what a fresh open sees
        assert writer.context().messages == fresh.context().messages
        validate_openai(fresh.context().messages)
    finally:
        store.close()


def _valid_everywhere(messages: list[Any]) -> None:
    validate_openai([to_openai(m) for m in messages])
    request = to_anthropic(messages)
    validate_anthropic(request.system, request.messages)
    validate_responses(to_responses(messages))
