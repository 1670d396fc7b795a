"""Faults at the seam between a memory's append and its state save, on real disks and real servers.

An add writes its messages and the state they imply in one store call; folding the archived messages into
the summary comes after, as a separate state save. These tests break things there, per backend, and check
the promise of issue 11 each time: the reopened context equals the live one, a retry stores nothing twice,
and every acknowledged message is stored once, in order.

* SQLite and files on a 2 MB tmpfs that fills up (mounted by the test; skipped where mounting is refused);
* PostgreSQL with this store's backends terminated (``pg_terminate_backend``) between the append and the
  state save;
* Redis killed (SIGKILL) between the append and the state save, then restarted from its AOF;
* Redis restarted without persistence: the session is gone, and the memory says the store lost it.

(The wrapper whose ``save_state`` raises runs on every backend in the conformance suite.)
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from convmem import Memory
from convmem.errors import SessionLostError, SessionNotFoundError, StoreError
from convmem.messages import Message, ToolCall
from convmem.stores import FileStore, SQLiteStore
from convmem.stores.postgres import PostgresStore
from convmem.stores.redis import RedisStore
from convmem.testing import EchoSummarizer

from ..validators import validate_openai
from ._servers import PG_URL, RedisServer, drop_schemas, schema_for

OPTIONS: dict[str, Any] = {
    "max_tokens": 700,
    "strategy": "summary_buffer",
    "strategy_options": {"max_tokens": 400, "keep_recent_tokens": 150},
}


def batch(n: int, size: int = 40) -> list[Message]:
    """Turn ``n``: a user message, or (every third) an assistant tool call with its result."""
    if n % 3 != 2:
        return [Message(role="user", content=f"turn {n} " + "x" * size, id=f"m{n}")]
    call = ToolCall(f"c{n}", "lookup", '{"q": 1}')
    result = Message(role="tool", tool_call_id=call.id, content=f"result {n} " + "y" * size, id=f"m{n}.r")
    return [Message(role="assistant", tool_calls=(call,), id=f"m{n}"), result]


def same_context(live: Memory, reopened: Memory) -> None:
    now, again = live.context(), reopened.context()
    assert (again.messages, again.window, again.left_out) == (now.messages, now.window, now.left_out)
    validate_openai(now.messages)


# -- a full disk (SQLite, files) --------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    # Room for a migrated database and its write-ahead log (about 1.5 MB) and a little more.
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a 4 MB tmpfs is not permitted here: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(path: Path) -> None:
    """Write zeros to ``path`` until the disk is full (it may be full already)."""
    with contextlib.suppress(OSError), open(path, "ab") as handle:
        while True:
            handle.write(b"\0" * 16_384)
            handle.flush()


def free(path: Path, size: int) -> None:
    os.truncate(path, max(0, path.stat().st_size - size))


@pytest.mark.parametrize("backend", ["sqlite", "files"])
def test_a_disk_that_fills_up_fails_whole_adds_and_loses_nothing(backend: str, small_disk: Path) -> None:
    location = small_disk / ("convmem.db" if backend == "sqlite" else "files")

    def open_store() -> Any:
        return SQLiteStore(location) if backend == "sqlite" else FileStore(location)

    store = open_store()
    memory = Memory(store=store, user_id="u", session_id="s", summarizer=EchoSummarizer(), **OPTIONS)
    filler = small_disk / "filler"
    fill(filler)
    free(filler, 96_000)
    rng = random.Random(11)
    acknowledged: list[str] = []
    failures = 0
    for n in range(400):
        turn = batch(n, rng.choice([40, 2_000, 9_000]))
        try:
            added = memory.add_many(turn)
        except StoreError as exc:
            why = str(exc)
            failures += 1
            free(filler, 48_000)  # make room, then look at what the failed add left behind
            other = open_store()
            try:
                same_context(memory, Memory.open("s", store=other, user_id="u", summarizer=EchoSummarizer()))
                assert [r.message.id for r in other.messages("s", user_id="u")] == acknowledged  # nothing half-written
            finally:
                other.close()
            assert "full" in why or "space" in why, why  # the error says why
            added = memory.add_many(turn)  # the retry stores it, once
        acknowledged += [m.id or "" for m in added]
        if failures == 6:
            break
        if n % 25 == 24:
            fill(filler)  # fill again what the folds and the retries freed
    assert failures >= 3, f"the disk never filled up (only {failures} failures)"
    store.close()
    reopened_store = open_store()
    try:
        reopened = Memory.open("s", store=reopened_store, user_id="u", summarizer=EchoSummarizer())
        assert [m.id for m in reopened.messages()] == acknowledged
        same_context(memory, reopened)
    finally:
        reopened_store.close()


# -- PostgreSQL: the backend terminated between the two writes ----------------------------------------------
class TerminatingSummarizer(EchoSummarizer):
    """Summarizes, but first terminates every backend of ``application``: the state save meets a dead connection."""

    def __init__(self, application: str) -> None:
        super().__init__()
        self.application = application
        self.kills = 0

    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (self.application,),
            ).fetchall()
        self.kills += sum(1 for (done,) in rows if done)
        return super().summarize(previous, messages, max_tokens)


def test_a_postgres_backend_terminated_between_the_append_and_the_state_save(tmp_path: Path) -> None:
    app = f"convmem_seam_{tmp_path.name[-12:]}"
    schema = schema_for(tmp_path)
    store = PostgresStore(f"{PG_URL}?application_name={app}", schema=schema, max_size=2)
    summarizer = TerminatingSummarizer(app)
    try:
        memory = Memory(store=store, user_id="u", session_id="s", summarizer=summarizer, **OPTIONS)
        acknowledged = [m.id for n in range(30) for m in memory.add_many(batch(n))]
        assert summarizer.kills > 0
        assert memory.stats().summaries > 0
        assert [m.id for m in memory.add_many(batch(29))] == [m.id for m in batch(29)]  # a retry: stored already
        other = PostgresStore(PG_URL, schema=schema)
        try:
            reopened = Memory.open("s", store=other, user_id="u", summarizer=EchoSummarizer())
            same_context(memory, reopened)
            assert [m.id for m in reopened.messages()] == acknowledged
        finally:
            other.close()
    finally:
        store.close()
        drop_schemas({schema})


# -- Redis: killed between the two writes, and restarted without persistence --------------------------------
class KillingSummarizer(EchoSummarizer):
    """Summarizes, but first kills the Redis server: the state save that follows cannot reach it."""

    def __init__(self, server: RedisServer) -> None:
        super().__init__()
        self.server = server
        self.kills = 0

    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        if self.kills == 0:
            self.server.kill()
            self.kills += 1
        return super().summarize(previous, messages, max_tokens)


@pytest.mark.parametrize("redis_server", ["durable"], indirect=True)
def test_redis_killed_between_the_append_and_the_state_save(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix="t:", retry_for=0.3)
    summarizer = KillingSummarizer(redis_server)
    memory = Memory(store=store, user_id="u", session_id="s", summarizer=summarizer, **OPTIONS)
    try:
        acknowledged: list[str] = []
        n = 0
        while not summarizer.kills:
            acknowledged += [m.id or "" for m in memory.add_many(batch(n))]
            n += 1
        # The add that archived messages returned: they are stored (AOF, fsync always); the summary's state
        # save failed, so the memory went back to what the append stored, queueing them for the next fold.
        assert any("state after an eviction failed" in w for w in memory.stats().warnings)
        redis_server.start()
        other = RedisStore(redis_server.url, prefix="t:")
        try:
            reopened = Memory.open("s", store=other, user_id="u", summarizer=EchoSummarizer())
            same_context(memory, reopened)
            assert [m.id for m in reopened.messages()] == acknowledged
            for m in range(n, n + 12):  # both go on: the queue is folded at the next eviction
                acknowledged += [x.id or "" for x in memory.add_many(batch(m))]
            assert [x.id for x in memory.add_many(batch(n))] == [x.id for x in batch(n)]  # a retry
            reopened = Memory.open("s", store=other, user_id="u", summarizer=EchoSummarizer())
            same_context(memory, reopened)
            assert [m.id for m in reopened.messages()] == acknowledged
        finally:
            other.close()
    finally:
        store.close()


@pytest.mark.parametrize("redis_server", ["cache"], indirect=True)
def test_a_redis_restarted_without_persistence_is_named_as_a_lost_session(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix="t:", retry_for=0.3)
    try:
        memory = Memory(store=store, user_id="u", session_id="s", max_tokens=500)
        for n in range(4):
            memory.add_many(batch(n))
        redis_server.kill()
        redis_server.start()  # '--save "" --appendonly no': the restarted server is empty
        for call in (lambda: memory.add_many(batch(4)), memory.refresh, memory.messages):
            with pytest.raises(SessionLostError, match="lost session 's'") as info:
                call()
            assert "version" not in str(info.value)  # never a version conflict
        with pytest.raises(SessionNotFoundError):
            store.get_session("s", user_id="u")  # and never re-created silently
        fresh = Memory(store=store, user_id="u", session_id="s", max_tokens=500)  # a new memory may start over
        assert [m.id for m in fresh.add_many(batch(0))] == ["m0"]
    finally:
        store.close()
