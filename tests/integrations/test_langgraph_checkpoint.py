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

    report = await validate(saver, progress=ProgressCallbacks.verbose())
    for drop in made:
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
