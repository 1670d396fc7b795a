"""``convmem mcp``, driven by the official mcp client SDK: a first run, every tool with good and bad arguments,
the tool list an agent reads, block settings, and the HTTP transport behind the service's keys.

The stdio and HTTP tests run the real command in a new process from a fresh directory with no
database; the tool-by-tool tests connect to the server in process (same tools, no process).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import jsonschema
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from convmem import Memory
from convmem.mcp._scope import UserScope
from convmem.mcp.server import build_server
from convmem.server.keys import open_registry
from convmem.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "recall_search",
    "remember",
    "facts_list",
    "facts_add",
    "facts_invalidate",
    "block_list",
    "block_read",
    "block_edit",
    "sessions_list",
    "session_context",
}
READ_ONLY = {"recall_search", "facts_list", "block_list", "block_read", "sessions_list", "session_context"}
CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "We moved to Lisbon last spring, near the river."},
    {"role": "assistant", "content": "Lisbon in spring sounds lovely."},
    {"role": "user", "content": "My sister Ana visits in June."},
]


def env() -> dict[str, str]:
    """The server process imports this worktree's convmem (the SDK passes a bare environment otherwise)."""
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    return text


def seed(
    path: Path, *, alice: str = "alice", bob: str = "bob", prefixes: tuple[str, str] = ("", "")
) -> tuple[str, str]:
    """A store with a session of alice's and one of bob's; returns their ids (as stored)."""
    store = open_store(f"sqlite:///{path}")
    mine = Memory(model="gpt-4o", store=store, user_id=alice, session_id=f"{prefixes[0]}trip-lisbon")
    mine.add_many(CHAT)
    theirs = Memory(model="gpt-4o", store=store, user_id=bob, session_id=f"{prefixes[1]}porto")
    theirs.add({"role": "user", "content": "I never went to Lisbon, secret plans for Porto."})
    store.close()
    return mine.session_id, theirs.session_id


@pytest.fixture
def seeded(tmp_path: Path) -> Any:
    path = tmp_path / "mcp.db"
    seed(path)
    store = open_store(f"sqlite:///{path}")
    yield store
    store.close()


# -- a first run, over stdio, from a fresh directory ----------------------------------------------------
async def test_a_first_run_over_stdio_creates_its_database_and_remembers(tmp_path: Path) -> None:
    db = tmp_path / "not-yet" / "memory.db"  # neither the file nor its folder exists
    command = ["-m", "convmem", "mcp", "--user", "alice", "--db", str(db)]
    params = StdioServerParameters(command=sys.executable, args=command, env=env(), cwd=str(tmp_path))
    async with Client(params) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert data(await client.call_tool("sessions_list", {}))["sessions"] == []
        note = data(await client.call_tool("remember", {"text": "Alice's sister Ana visits every June."}))
        assert note["stored"] is True
        assert note["session_id"] == "notes"
        again = data(await client.call_tool("remember", {"text": "Alice's sister Ana visits every June."}))
        assert again == {**note, "stored": False}  # the same note twice is stored once
        hits = data(await client.call_tool("recall_search", {"query": "when does Ana visit"}))["hits"]
        assert hits[0]["text"] == "Alice's sister Ana visits every June."
        assert [s["id"] for s in data(await client.call_tool("sessions_list", {}))["sessions"]] == ["notes"]
        exported = await client.read_resource("convmem://sessions/notes")
        assert "Ana visits" in exported.contents[0].text
    assert db.exists()
    # Without --db the default database (here $CONVMEM_DB) is created just the same.
    default = tmp_path / "data" / "convmem.db"
    bare = StdioServerParameters(
        command=sys.executable, args=command[:5], env={**env(), "CONVMEM_DB": str(default)}, cwd=str(tmp_path)
    )
    async with Client(bare) as client:
        assert data(await client.call_tool("facts_add", {"text": "Lives in Lisbon"}))["text"] == "Lives in Lisbon"
    assert default.exists()


# -- every tool, in process -----------------------------------------------------------------------------
async def test_every_tool_answers_for_its_user_only(seeded: Any) -> None:
    async with Client(build_server(UserScope(seeded, "alice"))) as client:
        hits = data(await client.call_tool("recall_search", {"query": "where did we move? Lisbon", "k": 3}))["hits"]
        assert hits[0]["session_id"] == "trip-lisbon"
        assert all("Porto" not in hit["text"] for hit in hits)  # bob's messages are invisible
        only = data(await client.call_tool("recall_search", {"query": "Lisbon", "session_id": "trip"}))["hits"]
        assert {hit["session_id"] for hit in only} == {"trip-lisbon"}

        fact = data(await client.call_tool("facts_add", {"text": "Lives in Lisbon", "subject": "alice.home"}))
        assert data(await client.call_tool("facts_add", {"text": "Lives in Lisbon", "subject": "alice.home"})) == fact
        assert [f["id"] for f in data(await client.call_tool("facts_list", {}))["facts"]] == [fact["id"]]
        ended = data(await client.call_tool("facts_invalidate", {"fact_id": fact["id"], "reason": "moved to Porto"}))
        assert ended["valid_to"] is not None
        assert data(await client.call_tool("facts_list", {}))["facts"] == []
        assert len(data(await client.call_tool("facts_list", {"include_ended": True}))["facts"]) == 1

        made = {"name": "notes", "operation": "update", "text": "likes tea", "expected_version": 0}
        assert data(await client.call_tool("block_edit", made))["version"] == 1
        assert data(await client.call_tool("block_read", {"name": "notes"}))["value"] == "likes tea"
        appended = {"name": "notes", "operation": "append", "text": "sister Ana", "expected_version": 1}
        assert data(await client.call_tool("block_edit", appended))["value"] == "likes tea\nsister Ana"
        swapped = {"name": "notes", "operation": "replace", "old": "tea", "text": "coffee", "expected_version": 2}
        assert data(await client.call_tool("block_edit", swapped))["value"] == "likes coffee\nsister Ana"
        listed = data(await client.call_tool("block_list", {}))["blocks"]
        assert [(b["name"], b["version"], b["chars"]) for b in listed] == [("notes", 3, 23)]

        sessions = data(await client.call_tool("sessions_list", {}))["sessions"]
        assert [s["id"] for s in sessions] == ["trip-lisbon"]
        context = data(await client.call_tool("session_context", {"session_id": "trip"}))
        assert [m["role"] for m in context["messages"]] == ["system", "user", "assistant", "user"]
        assert context["tokens"] <= context["budget"]
        anthropic = data(await client.call_tool("session_context", {"session_id": "trip", "format": "anthropic"}))
        assert anthropic["system"][0]["text"] == "You are helpful."

        remembered = data(
            await client.call_tool("remember", {"text": "Ana likes pastel de nata", "session_id": "trip"})
        )
        assert remembered["session_id"] == "trip-lisbon"
        assert [h["text"] for h in data(await client.call_tool("recall_search", {"query": "pastel de nata"}))["hits"]][
            :1
        ] == ["Ana likes pastel de nata"]
        assert "not found" in error(await client.call_tool("session_context", {"session_id": "porto"}))  # bob's
        with pytest.raises(Exception, match="not found"):
            await client.read_resource("convmem://sessions/porto")


BAD = [
    ("recall_search", {"query": "x", "k": "many"}, "k"),
    ("recall_search", {"query": "", "k": 3}, "query"),
    ("recall_search", {"k": 3}, "query"),
    ("recall_search", {"query": "x", "k": 10_000}, "k"),
    ("recall_search", {"query": "x", "session_id": "nope"}, "not found"),
    ("remember", {"text": ""}, "text"),
    ("remember", {"text": "   "}, "empty"),
    ("remember", {"text": "x", "role": "system"}, "role"),
    ("remember", {"text": "x", "session_id": "nope"}, "not found"),
    ("facts_list", {"include_ended": "maybe"}, "include_ended"),
    ("facts_add", {"text": "   "}, "non-empty"),
    ("facts_add", {}, "text"),
    ("facts_invalidate", {"fact_id": "no-such-fact", "reason": "gone"}, "no-such-fact"),
    ("facts_invalidate", {"fact_id": "f", "reason": ""}, "reason"),
    ("block_read", {"name": "todo"}, "no working block named 'todo'"),
    ("block_read", {"name": "bad name!"}, "name"),
    ("block_edit", {"name": "n", "operation": "delete", "text": "x", "expected_version": 0}, "operation"),
    ("block_edit", {"name": "n", "operation": "update", "text": "x", "expected_version": -1}, "expected_version"),
    ("block_edit", {"name": "n", "operation": "replace", "text": "x", "expected_version": 0}, "old"),
    ("block_edit", {"name": "n", "operation": "append", "text": "x", "expected_version": 3}, "expected_version 0"),
    (
        "block_edit",
        {"name": "n", "operation": "update", "text": "x", "expected_version": 0, "priority": -1},
        "priority",
    ),
    ("sessions_list", {"limit": 0}, "limit"),
    ("session_context", {"session_id": "zzzz"}, "not found"),
    ("session_context", {"session_id": "", "format": "openai"}, "session_id"),
    ("session_context", {"session_id": "trip", "format": "gemini"}, "format"),
    ("session_context", {"session_id": "trip", "max_tokens": 0}, "max_tokens"),
]


async def test_bad_arguments_get_mcp_errors_that_say_what_is_wrong_and_the_server_goes_on(seeded: Any) -> None:
    async with Client(build_server(UserScope(seeded, "alice"))) as client:
        for name, arguments, says in BAD:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments, result)
            assert says in result.content[0].text, (name, arguments, result.content[0].text)
        assert (await client.call_tool("drop_database", {})).is_error
        # Still serving, and nothing was written by the refused calls.
        assert data(await client.call_tool("facts_list", {"include_ended": True}))["facts"] == []
        assert data(await client.call_tool("block_list", {}))["blocks"] == []
        assert [s["id"] for s in data(await client.call_tool("sessions_list", {}))["sessions"]] == ["trip-lisbon"]


# -- what an agent reads --------------------------------------------------------------------------------
GOOD: dict[str, dict[str, Any]] = {
    "recall_search": {"query": "Lisbon"},
    "remember": {"text": "Ana visits in June", "role": "assistant"},
    "facts_list": {"include_ended": True},
    "facts_add": {"text": "Lives in Lisbon"},
    "block_list": {},
    "block_edit": {"name": "persona", "operation": "update", "text": "Warm.", "expected_version": 0},
    "block_read": {"name": "persona"},
    "sessions_list": {},
    "session_context": {"session_id": "trip-lisbon"},
}


async def test_every_tool_and_argument_is_described_and_every_result_fits_its_declared_schema(seeded: Any) -> None:
    async with Client(build_server(UserScope(seeded, "alice"))) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, tool in tools.items():
            assert len(tool.description or "") > 30, name
            properties = tool.input_schema.get("properties", {})
            for argument, schema in properties.items():
                assert schema.get("description"), f"{name}({argument}) has no description"
            hints = tool.annotations
            assert hints is not None, name
            flags = (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint)
            assert None not in flags, name
            assert hints.read_only_hint == (name in READ_ONLY), name
            assert tool.output_schema is not None, f"{name} declares no output schema"
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        fact = data(await client.call_tool("facts_add", {"text": "Moved to Porto"}))
        calls = {**GOOD, "facts_invalidate": {"fact_id": fact["id"], "reason": "moved"}}
        assert set(calls) == TOOLS
        for name in [*GOOD, "facts_invalidate"]:  # block_edit before block_read
            answer = await client.call_tool(name, calls[name])
            jsonschema.validate(data(answer), tools[name].output_schema)
            assert json.loads(answer.content[0].text) == answer.structured_content  # the text says the same


# -- working blocks: settings kept, a never-cut block that could never fit refused ----------------------
async def test_an_edit_keeps_every_setting_it_does_not_name(seeded: Any) -> None:
    async with Client(build_server(UserScope(seeded, "alice"))) as client:
        created = {
            "name": "persona",
            "operation": "update",
            "text": "Warm and brief.",
            "expected_version": 0,
            "priority": 0,
            "max_tokens": 50,
            "description": "who the assistant is",
        }
        made = data(await client.call_tool("block_edit", created))
        settings = {k: made[k] for k in ("priority", "max_tokens", "position", "description")}
        assert settings == {
            "priority": 0,
            "max_tokens": 50,
            "position": "system",
            "description": "who the assistant is",
        }
        for operation, text, old in [
            ("append", "Likes maps.", None),
            ("replace", "Cold", "Warm"),
            ("update", "Kind.", None),
        ]:
            version = data(await client.call_tool("block_read", {"name": "persona"}))["version"]
            edit = {"name": "persona", "operation": operation, "text": text, "expected_version": version}
            edited = data(await client.call_tool("block_edit", {**edit, **({"old": old} if old else {})}))
            assert {k: edited[k] for k in settings} == settings, operation
        too_long = {"name": "persona", "operation": "update", "text": "word " * 80, "expected_version": 4}
        assert "50" in error(await client.call_tool("block_edit", too_long))  # the cap still holds
        raised = data(await client.call_tool("block_edit", {**too_long, "text": "Kind.", "max_tokens": 80}))
        assert (raised["max_tokens"], raised["priority"], raised["description"]) == (80, 0, "who the assistant is")


async def test_a_never_cut_block_that_could_not_fit_a_session_is_refused_with_the_budget_it_breaks(
    tmp_path: Path,
) -> None:
    store = open_store(f"sqlite:///{tmp_path}/small.db")
    small = Memory(max_tokens=300, max_output_tokens=100, store=store, user_id="alice", session_id="small-chat")
    small.add_many(CHAT)
    async with Client(build_server(UserScope(store, "alice"))) as client:
        huge = {"name": "persona", "operation": "update", "text": "word " * 400, "expected_version": 0, "priority": 0}
        refused = error(await client.call_tool("block_edit", huge))
        assert "'small-chat'" in refused
        assert "200 tokens for a request (300 budget, 100 kept for the reply)" in refused
        assert data(await client.call_tool("block_list", {}))["blocks"] == []  # nothing was saved
        capped = {**huge, "text": "Warm.", "max_tokens": 250}
        assert "cap of 250 tokens" in error(await client.call_tool("block_edit", capped))
        # The same text at a priority that can be cut is fine: the context cuts it when it must.
        assert data(await client.call_tool("block_edit", {**huge, "priority": 2}))["version"] == 1
        small_ok = {**huge, "text": "Warm.", "expected_version": 1}  # and a small never-cut one is fine too
        assert data(await client.call_tool("block_edit", small_ok))["priority"] == 0
    Memory.open("small-chat", store=store, user_id="alice").context()  # every context still builds
    store.close()


# -- streamable HTTP, behind the service's keys ---------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def listening(port: int) -> None:
    for _ in range(600):  # up to 60 s for the server to listen (the machine is shared)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError("the MCP server did not listen")


@asynccontextmanager
async def http(port: int, key: str | None) -> AsyncIterator[Client]:
    """An MCP client over streamable HTTP sending ``key`` (the HTTP client it is given is ours to close)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    url = f"http://127.0.0.1:{port}/mcp"
    async with create_mcp_http_client(headers) as sender, Client(streamable_http_client(url, http_client=sender)) as c:
        yield c


async def test_streamable_http_needs_a_key_and_shows_no_internal_names(tmp_path: Path) -> None:
    import httpx

    registry = open_registry(str(tmp_path / "keys.db"))
    acme, other = registry.create_key("acme").secret, registry.create_key("other").secret
    registry.close()
    db = tmp_path / "store.db"
    seed(
        db, alice="acme:dana", bob="other:dana", prefixes=("acme.", "other.")
    )  # as the service stores tenant acme's user dana
    port = free_port()
    command = ["-m", "convmem", "mcp", "--user", "dana", "--db", str(db), "--keys", str(tmp_path / "keys.db")]
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        *command,
        "--transport",
        "streamable-http",
        "--port",
        str(port),
        env=env(),
        cwd=str(tmp_path),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await listening(port)
        async with httpx.AsyncClient() as raw:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            for headers in ({}, {"Authorization": "Bearer cmk_00000000_wrong"}, {"Authorization": "Basic x"}):
                answer = await raw.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
                assert answer.status_code == 401, headers
                assert "tools" not in answer.text
        with pytest.raises(Exception):  # noqa: B017, PT011  # the SDK's client fails the handshake on a 401
            async with http(port, "cmk_00000000_wrong") as client:
                await client.list_tools()

        seen: list[Any] = []
        async with http(port, acme) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            sessions = data(await client.call_tool("sessions_list", {}))["sessions"]
            assert [s["id"] for s in sessions] == ["trip-lisbon"]
            hits = data(await client.call_tool("recall_search", {"query": "Lisbon spring"}))["hits"]
            assert {h["session_id"] for h in hits} == {"trip-lisbon"}
            context = data(await client.call_tool("session_context", {"session_id": "trip"}))
            note = data(await client.call_tool("remember", {"text": "Dana keeps a travel diary."}))
            missing = error(await client.call_tool("session_context", {"session_id": "porto"}))
            exported = (await client.read_resource("convmem://sessions/trip-lisbon")).contents[0].text
            seen += [sessions, hits, context, note, missing, exported]
        async with http(port, other) as client:  # the same user name in another tenant: another memory
            theirs = data(await client.call_tool("sessions_list", {}))["sessions"]
            assert [s["id"] for s in theirs] == ["porto"]
            seen.append(theirs)
        assert note["session_id"] == "notes"
        assert "'porto'" in missing
        for shown in seen:
            text = json.dumps(shown)
            assert not [name for name in ("acme.", "acme:", "other.") if name in text], text
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), timeout=30)
    store = open_store(f"sqlite:///{db}")
    assert [s.id for s in store.list_sessions(user_id="acme:dana")] == ["acme.notes", "acme.trip-lisbon"]
    store.close()
