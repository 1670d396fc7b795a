"""ConvmemSaver keeps LangGraph's checkpointer contract, run by LangGraph's own conformance suite on every backend.

``langgraph-checkpoint-conformance`` (LangGraph's suite for third-party savers) checks put, put_writes,
get_tuple, list (filters, before, limit, namespaces) and delete_thread through the async methods; it runs
here on SQLite, and on PostgreSQL and Redis through both the sync stores (each call in a worker thread)
and the async ones (their own async drivers). Then what the suite does not reach: the sync methods
themselves, the reopened store, the refusals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from convmem import ConfigurationError
from convmem.integrations.langgraph_checkpoint import ConvmemSaver
from convmem.stores import MemoryStore, SQLiteStore
from tests.stores._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

KINDS = ["sqlite", "postgres", "postgres-async", "redis", "redis-async"]


def _open(kind: str, where: Path) -> tuple[Any, Any]:
    """A store of ``kind`` in a place of its own, and what removes that place."""
    if kind == "sqlite":
        return SQLiteStore(where / "db.sqlite"), lambda: None
    if kind.startswith("postgres"):
        from convmem.stores.postgres import AsyncPostgresStore, PostgresStore

        schema = schema_for(where)
        cls = AsyncPostgresStore if kind.endswith("async") else PostgresStore
        return cls(PG_URL, schema=schema, max_size=2), lambda: drop_schemas({schema})
    from convmem.stores.redis import AsyncRedisStore, RedisStore

    prefix = prefix_for(where)
    cls = AsyncRedisStore if kind.endswith("async") else RedisStore
    return cls(REDIS_URL, prefix=prefix), lambda: drop_prefixes({prefix})


async def _close(store: Any) -> None:
    if hasattr(store, "aclose"):
        await store.aclose()
    else:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_langgraphs_conformance_suite(kind: str, tmp_path: Path) -> None:
    made: list[Any] = []

    @checkpointer_test(name=f"ConvmemSaver[{kind}]")
    async def saver() -> AsyncIterator[ConvmemSaver]:
        store, drop = _open(kind, tmp_path / f"s{len(made)}")  # a fresh store per capability, as the suite asks
        made.append(drop)
        try:
            yield ConvmemSaver(store)
        finally:
            await _close(store)

    try:
        report = await validate(saver, progress=ProgressCallbacks.verbose())
    finally:
        for drop in made:  # each store's schema or key prefix, whatever the suite did
            drop()
    failures = {name: r.failures for name, r in report.results.items() if r.passed is False}
    assert report.passed_all_base(), failures
    ran = {name for name, r in report.results.items() if r.passed}
    assert ran == {"put", "put_writes", "get_tuple", "list", "delete_thread"}


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def sync_kind(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    return str(request.param), tmp_path


def _config(thread: str, checkpoint_id: str | None = None, ns: str = "") -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def test_the_sync_methods_and_a_reopened_store(sync_kind: tuple[str, Path]) -> None:
    kind, where = sync_kind
    store, drop = _open(kind, where)
    try:
        saver = ConvmemSaver(store)
        ids, parent = [], None
        for step in range(5):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"count": step, "fixed": "same"}
            checkpoint["channel_versions"] = {"count": saver.get_next_version(None if step == 0 else str(step), None)}
            # 'fixed' is written once, at the first step: later checkpoints name its first version
            checkpoint["channel_versions"]["fixed"] = "1"
            changed = {"count": checkpoint["channel_versions"]["count"], **({"fixed": "1"} if step == 0 else {})}
            stored = saver.put(_config("t", parent), checkpoint, {"source": "loop", "step": step}, changed)
            parent = stored["configurable"]["checkpoint_id"]
            ids.append(parent)
        saver.put_writes(_config("t", ids[-1]), [("count", 99), ("other", "x")], "task-1")
        saver.put_writes(_config("t", ids[-1]), [("count", 100)], "task-1")  # a retried task: kept as first written
        assert ids == sorted(ids)  # uuid6: time-ordered, so text order is the order of the steps

        if kind != "sqlite":
            store.close()
            store, _ = _open(kind, where)  # same place, a new connection: nothing was held in the saver
        else:
            store.close()
            store = SQLiteStore(where / "db.sqlite")
        again = ConvmemSaver(store)
        latest = again.get_tuple(_config("t"))
        assert latest is not None
        assert latest.config["configurable"]["checkpoint_id"] == ids[-1]
        assert latest.checkpoint["channel_values"] == {"count": 4, "fixed": "same"}
        assert latest.parent_config is not None
        assert latest.parent_config["configurable"]["checkpoint_id"] == ids[-2]
        assert latest.pending_writes == [("task-1", "count", 99), ("task-1", "other", "x")]
        listed = [t.config["configurable"]["checkpoint_id"] for t in again.list(_config("t"))]
        assert listed == ids[::-1]
        before = again.list(_config("t"), before=_config("t", ids[3]), limit=2)
        assert [t.metadata["step"] for t in before] == [2, 1]
        assert [t.metadata["step"] for t in again.list(None, filter={"step": 3})] == [3]
        assert again.get_tuple(_config("t", ids[0])) is not None
        assert again.get_tuple(_config("t", ids[0], ns="child")) is None
        again.delete_thread("t")
        assert again.get_tuple(_config("t")) is None
        assert list(again.list(None)) == []
    finally:
        store.close()
        drop()


async def test_an_async_store_refuses_the_sync_calls(tmp_path: Path) -> None:
    store, drop = _open("redis-async", tmp_path)
    try:
        saver = ConvmemSaver(store)
        with pytest.raises(ConfigurationError, match="async Redis store: use its async methods"):
            saver.get_tuple(_config("t"))
        assert await saver.aget_tuple(_config("t")) is None
    finally:
        await store.aclose()
        drop()


def test_a_store_without_tables_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="SQLite, PostgreSQL or Redis store, got MemoryStore"):
        ConvmemSaver(MemoryStore())


# -- a real agent loop across a restart ----------------------------------------------------------------
LOOP_TURNS = 6  # per process: 6 turns of 5 messages (user, two calls, two results... see _langgraph_loop)


def _url(kind: str, where: Path) -> tuple[str, Any]:
    if kind == "sqlite":
        return f"sqlite:///{where}/loop.db", lambda: None
    if kind == "postgres":
        schema = schema_for(where)
        return f"{PG_URL}?schema={schema}", lambda: drop_schemas({schema})
    prefix = prefix_for(where)
    return f"{REDIS_URL}?prefix={prefix}", lambda: drop_prefixes({prefix})


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_stategraph_agent_resumes_its_thread_in_a_new_process(
    kind: str, tmp_path: Path, offline_tiktoken: Path
) -> None:
    """Turns 0-5 in a child process, 6-11 here on new objects: the state comes back from the checkpointer,
    the memory holds every message once, and every request of both processes is within the budget."""
    import json
    import subprocess
    import sys

    from tests.integrations._langgraph_loop import SYSTEM, run_turns

    url, drop = _url(kind, tmp_path)
    try:
        out = tmp_path / "first.json"
        cmd = [sys.executable, "-m", "tests.integrations._langgraph_loop", url, "0", str(LOOP_TURNS), str(out)]
        subprocess.run(cmd, check=True, cwd=Path(__file__).parents[2], timeout=300)
        first = json.loads(out.read_text())
        assert first["messages"] == 5 * LOOP_TURNS

        sizes, messages = run_turns(url, LOOP_TURNS, LOOP_TURNS)
        # The checkpointer gave the new process the whole thread: every message of both processes, once.
        assert len(messages) == 5 * 2 * LOOP_TURNS
        assert len({m.id for m in messages}) == len(messages)
        texts = [m.text for m in messages if m.type == "human"]
        assert texts == [f"Turn {t}: how is the weather?" for t in range(2 * LOOP_TURNS)]

        store = _open_url(url)
        try:
            stored = [m.message for m in store.messages("t1")]
            assert [m.role for m in stored].count("system") == 1
            assert stored[0].text == SYSTEM
            # The hook added each state message once, in order, across processes; the last answer reaches the
            # memory with the next model call (the hook runs before each call), as in one process.
            assert [m.id for m in stored[1:]] == [m.id for m in messages[:-1]]
            checkpoints = list(ConvmemSaver(store).list({"configurable": {"thread_id": "t1"}}))
            assert len(checkpoints) > 2 * LOOP_TURNS
        finally:
            store.close()
        every = first["sizes"] + sizes  # each already checked within the limit by the model (check_request)
        assert len(every) == 2 * 2 * LOOP_TURNS
        limit = 2_000 - 300
        assert max(every) > limit // 2  # the budget was reached, so keeping within it is the hook's doing
        print(f"\nlanggraph+ConvmemSaver[{kind}]: limit {limit}; largest request {max(every)}")
    finally:
        drop()


def _open_url(url: str) -> Any:
    from convmem.stores import open_store

    return open_store(url)
