"""A store URL is accepted wherever a store is taken, and whatever convmem opens, it closes."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from convmem import AsyncMemory, Memory
from convmem.errors import SessionNotFoundError
from convmem.stores import AsyncSQLiteStore, SQLiteStore, aopen_store, open_store
from convmem.stores.base import AppendRequest

from .stores._servers import PG_URL, REDIS_URL, drop_schemas


def _sqlite_url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'chat.db'}"


def test_memory_open_takes_a_url_and_owns_what_it_opened(tmp_path: Path) -> None:
    url = _sqlite_url(tmp_path)
    with Memory(max_tokens=500, store=url) as memory:
        memory.add({"role": "user", "content": "hello"})
        session_id = memory.session_id
        expected = memory.context().messages
    again = Memory.open(session_id[:8], store=url, max_tokens=500)
    assert again.context().messages == expected
    assert isinstance(again.store, SQLiteStore)
    again.close()
    with pytest.raises(Exception, match="closed"):  # closed by the memory that opened it
        again.store.get_session(session_id)


def test_memory_open_with_a_url_closes_the_store_when_the_session_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[SQLiteStore] = []
    original = SQLiteStore.close
    monkeypatch.setattr(SQLiteStore, "close", lambda self: (closed.append(self), original(self))[1])
    with pytest.raises(SessionNotFoundError):
        Memory.open("nope", store=_sqlite_url(tmp_path))
    assert len(closed) == 1


def test_a_store_passed_in_stays_open(tmp_path: Path) -> None:
    store = open_store(_sqlite_url(tmp_path))
    memory = Memory(max_tokens=500, store=store)
    memory.add({"role": "user", "content": "hello"})
    memory.close()
    Memory.open(memory.session_id, store=store, max_tokens=500).close()
    assert store.get_session(memory.session_id).message_count == 1  # still usable: the caller owns it
    store.close()


async def test_async_memory_takes_a_url_in_both_constructors(tmp_path: Path) -> None:
    url = _sqlite_url(tmp_path)
    memory = AsyncMemory(max_tokens=500, store=url)
    assert isinstance(memory.store, AsyncSQLiteStore)
    await memory.add({"role": "user", "content": "hello"})
    expected = (await memory.context()).messages
    await memory.aclose()
    again = await AsyncMemory.open(memory.session_id, store=url, max_tokens=500)
    assert (await again.context()).messages == expected
    await again.aclose()
    with pytest.raises(Exception, match="closed"):
        again.store.sync.get_session(memory.session_id)  # type: ignore[attr-defined]
    with pytest.raises(SessionNotFoundError):
        await AsyncMemory.open("nope", store=url)


async def test_aopen_store_opens_every_embedded_backend(tmp_path: Path) -> None:
    for spec in ("memory", _sqlite_url(tmp_path), f"files://{tmp_path / 'files'}"):
        store = await aopen_store(spec)
        await store.append(AppendRequest("s", [], user_id=None))
        await store.aclose()


def _pg_connections(app: str) -> int:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchone()
    assert row is not None
    return int(row[0])


def _redis_clients(name: str) -> int:
    import redis

    with redis.Redis.from_url(REDIS_URL) as client:
        return sum(1 for c in client.client_list() if c.get("name") == name)


def test_memory_closes_the_postgres_pool_it_opened() -> None:
    import psycopg

    with psycopg.connect(PG_URL) as conn:  # a URL opens the default schema: remove it after, if we made it
        existed = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'convmem'").fetchone() is not None
    app = f"convmem-close-{uuid.uuid4().hex[:8]}"
    try:
        memory = Memory(max_tokens=500, store=f"{PG_URL}?application_name={app}", user_id=app)
        memory.add({"role": "user", "content": "hello"})
        assert _pg_connections(app) >= 1
        memory.store.delete_session(memory.session_id, user_id=app)  # type: ignore[attr-defined]
        memory.close()
        # The server lists a backend until its process has exited, a moment after the client hung up.
        deadline = time.monotonic() + 10
        while _pg_connections(app) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pg_connections(app) == 0
    finally:
        if not existed:
            drop_schemas({"convmem"})


def test_memory_closes_the_redis_pool_it_opened() -> None:
    name = f"convmem-close-{uuid.uuid4().hex[:8]}"
    memory = Memory(max_tokens=500, store=f"{REDIS_URL}?client_name={name}", user_id=name)
    memory.add({"role": "user", "content": f"hello {name}"})
    assert _redis_clients(name) >= 1
    memory.store.delete_session(memory.session_id, user_id=name)  # type: ignore[attr-defined]  # leave nothing
    memory.close()
    assert _redis_clients(name) == 0
