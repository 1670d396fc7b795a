"""``convmem mcp`` over stdio, driven by the official mcp client SDK: every tool, the resources, bad arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from convmem import Memory
from convmem.stores import SQLiteFactStore, open_store

TOOLS = {
    "recall_search",
    "facts_list",
    "facts_add",
    "facts_invalidate",
    "block_list",
    "block_read",
    "block_edit",
    "sessions_list",
    "session_context",
}


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, str, str]:
    """A store with one session of alice's and one of bob's; returns (path, alice's session, bob's session)."""
    path = str(tmp_path / "mcp.db")
    store = open_store(f"sqlite:///{path}")
    alice = Memory(model="gpt-4o", store=store, user_id="alice")
    alice.add_many(
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "We moved to Lisbon last spring, near the river."},
            {"role": "assistant", "content": "Lisbon in spring sounds lovely."},
            {"role": "user", "content": "My sister Ana visits in June."},
        ]
    )
    bob = Memory(model="gpt-4o", store=store, user_id="bob")
    bob.add({"role": "user", "content": "I never went to Lisbon, secret plans for Porto."})
    store.close()
    return path, alice.session_id, bob.session_id


def _client(path: str) -> Client:
    command = [sys.executable, "-m", "convmem", "mcp", "--user", "alice", "--db", path]
    return Client(StdioServerParameters(command=command[0], args=command[1:]))


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content or json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    return text


async def test_every_tool_and_resource_over_stdio(db: tuple[str, str, str]) -> None:
    path, alice_session, bob_session = db
    async with _client(path) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS

        hits = _data(await client.call_tool("recall_search", {"query": "where did we move? Lisbon", "k": 3}))["hits"]
        assert hits
        assert hits[0]["session_id"] == alice_session
        assert all("Porto" not in hit["text"] for hit in hits)  # bob's messages are invisible

        fact = _data(await client.call_tool("facts_add", {"text": "Lives in Lisbon", "subject": "alice.home"}))
        assert [f["id"] for f in _data(await client.call_tool("facts_list", {}))["facts"]] == [fact["id"]]
        ended = _data(await client.call_tool("facts_invalidate", {"fact_id": fact["id"], "reason": "moved to Porto"}))
        assert ended["valid_to"] is not None
        assert _data(await client.call_tool("facts_list", {}))["facts"] == []
        assert len(_data(await client.call_tool("facts_list", {"include_ended": True}))["facts"]) == 1

        made = _data(
            await client.call_tool(
                "block_edit", {"name": "notes", "operation": "update", "text": "likes tea", "expected_version": 0}
            )
        )
        assert made["version"] == 1
        assert _data(await client.call_tool("block_read", {"name": "notes"}))["value"] == "likes tea"
        stale = {"name": "notes", "operation": "append", "text": "x", "expected_version": 0}
        assert "version 1" in _error(await client.call_tool("block_edit", stale))
        appended = {"name": "notes", "operation": "append", "text": "sister Ana", "expected_version": 1}
        assert _data(await client.call_tool("block_edit", appended))["value"] == "likes tea\nsister Ana"
        missing = {"name": "notes", "operation": "replace", "old": "coffee", "text": "tea", "expected_version": 2}
        assert "not found" in _error(await client.call_tool("block_edit", missing))
        assert _data(await client.call_tool("block_list", {}))["blocks"] == [
            {"name": "notes", "version": 2, "chars": 20}
        ]
        assert "no working block named 'todo'" in _error(await client.call_tool("block_read", {"name": "todo"}))

        sessions = _data(await client.call_tool("sessions_list", {}))["sessions"]
        assert [s["id"] for s in sessions] == [alice_session]
        context = _data(await client.call_tool("session_context", {"session_id": alice_session[:8]}))
        assert [m["role"] for m in context["messages"]] == ["system", "user", "assistant", "user"]
        assert context["tokens"] <= context["budget"]
        anthropic = _data(
            await client.call_tool("session_context", {"session_id": alice_session, "format": "anthropic"})
        )
        # The system part ends a stable prefix, so it carries Anthropic's cache breakpoint.
        assert anthropic["system"] == [
            {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}
        ]
        assert "not found" in _error(await client.call_tool("session_context", {"session_id": bob_session}))

        listed = await client.read_resource("convmem://sessions")
        assert [s["id"] for s in json.loads(listed.contents[0].text)] == [alice_session]
        exported = await client.read_resource(f"convmem://sessions/{alice_session}")
        assert "Lisbon last spring" in exported.contents[0].text
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["convmem://sessions/{session_id}"]
        with pytest.raises(Exception, match="not found"):
            await client.read_resource(f"convmem://sessions/{bob_session}")

    facts = SQLiteFactStore(path).list_facts(user_id="alice")
    assert [f.text for f in facts] == ["Lives in Lisbon"]  # written through to the store


BAD = [
    ("recall_search", {"query": "x", "k": "many"}),
    ("recall_search", {"query": "", "k": 3}),
    ("recall_search", {"k": 3}),
    ("recall_search", {"query": "x", "k": 10_000}),
    ("facts_add", {"text": "   "}),
    ("facts_add", {}),
    ("facts_invalidate", {"fact_id": "no-such-fact", "reason": "gone"}),
    ("block_edit", {"name": "n", "operation": "delete", "text": "x", "expected_version": 0}),
    ("block_edit", {"name": "n", "operation": "update", "text": "x", "expected_version": -1}),
    ("block_edit", {"name": "n", "operation": "replace", "text": "x", "expected_version": 0}),
    ("session_context", {"session_id": "zzzz"}),
    ("session_context", {"session_id": "", "format": "openai"}),
    ("session_context", {"session_id": "a", "format": "gemini"}),
    ("sessions_list", {"limit": 0}),
]


async def test_bad_arguments_get_mcp_errors_and_the_server_goes_on(db: tuple[str, str, str]) -> None:
    path, alice_session, _ = db
    async with _client(path) as client:
        for name, arguments in BAD:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments, result)
            assert result.content[0].text  # says what is wrong
        unknown = await client.call_tool("drop_database", {})
        assert unknown.is_error
        # Still serving, and nothing was written by the refused calls.
        assert _data(await client.call_tool("facts_list", {"include_ended": True}))["facts"] == []
        assert _data(await client.call_tool("block_list", {}))["blocks"] == []
        assert _data(await client.call_tool("sessions_list", {}))["sessions"][0]["id"] == alice_session


@pytest.mark.slow  # a second server process; the stdio tests cover every tool
async def test_streamable_http_transport(db: tuple[str, str, str]) -> None:
    import asyncio
    import socket
    from asyncio.subprocess import DEVNULL

    path, alice_session, _ = db
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "convmem", "mcp", "--user", "alice", "--db", path]
    server = await asyncio.create_subprocess_exec(
        *command, "--transport", "streamable-http", "--port", str(port), stdout=DEVNULL, stderr=DEVNULL
    )
    try:
        for _ in range(300):  # up to 30 s for the server to listen (the machine is shared)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            sessions = _data(await client.call_tool("sessions_list", {}))["sessions"]
            assert [s["id"] for s in sessions] == [alice_session]
            assert (await client.call_tool("recall_search", {"query": "x", "k": "many"})).is_error
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), timeout=30)
