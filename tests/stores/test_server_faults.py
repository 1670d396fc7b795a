"""Many writers and faults against the real PostgreSQL and Redis servers.

* Many writers: 8 processes x 4 threads append 10,000 messages (whole units,
  in single batches) to 16 sessions on each backend. Every acknowledged
  message is stored exactly once, at the seq it was acknowledged with; each
  session's seqs run 0..N-1 without a gap; every batch is contiguous; and
  each session reopens through ``Memory.open`` into a context valid for the
  provider.
* Faults: a test-owned Redis is killed (SIGKILL) and restarted twice while
  writers append, and PostgreSQL backends are terminated with
  ``pg_terminate_backend`` every 100 ms while writers append. Writes are
  retried safely or fail with a StoreError naming the server; no acknowledged
  message is lost or stored twice. A Redis without persistence (the cache
  configuration) is emptied by a restart: the test shows the clear error
  while it is down and that the store works again afterwards.
* A retry after a lost reply: an append or state save that committed, run
  again as a retry, returns what the first attempt did and writes nothing.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from convmem import Memory
from convmem.errors import ConflictError, StoreError
from convmem.session import SessionState
from convmem.stores.base import AppendRequest
from convmem.stores.postgres import PostgresStore
from convmem.stores.postgres import _ops as pg_ops
from convmem.stores.redis import RedisStore
from convmem.stores.redis import _ops as redis_ops
from convmem.testing import numbered

from ..validators import validate_openai
from ._servers import PG_URL, REDIS_URL, RedisServer, drop_prefixes, drop_schemas, prefix_for, schema_for

pytestmark = pytest.mark.slow  # real processes, SIGKILL and server restarts: the full suite only

WRITER = str(Path(__file__).with_name("_server_writer.py"))


@dataclass
class Writers:
    """Writer processes and what they acknowledged, read as they go."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    acked: dict[str, tuple[str, int]] = field(default_factory=dict)  # message id -> (session, seq)
    batches: list[list[str]] = field(default_factory=list)
    unknown: list[list[str]] = field(default_factory=list)  # batches whose append raised StoreError
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _readers: list[threading.Thread] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)  # pids of writers that printed a line

    def start(self, backend: str, url: str, namespace: str, tag: str, threads: int, each: int, sessions: int) -> None:
        args = [sys.executable, WRITER, backend, url, namespace, tag, str(threads), str(each), str(sessions)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        reader.start()
        self._readers.append(reader)

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            status, session, ids, rest = line.rstrip("\n").split(" ", 3)
            with self._lock:
                self._seen.add(proc.pid)
                if status == "ok":
                    self.batches.append(ids.split(","))
                    for message_id, seq in zip(ids.split(","), rest.split(","), strict=True):
                        self.acked[message_id] = (session, int(seq))
                else:
                    self.unknown.append(ids.split(","))
                    self.errors.append(rest)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def started(self) -> bool:
        """Every writer has acknowledged something (so each has opened its store)."""
        with self._lock:
            return len(self._seen) == len(self.procs)

    def wait(self, timeout: float = 120) -> None:
        try:
            codes = [proc.wait(timeout=timeout) for proc in self.procs]
            for reader in self._readers:
                reader.join()
        finally:
            for proc in self.procs:
                assert proc.stdout is not None
                proc.stdout.close()
        assert codes == [0] * len(self.procs)


def check(store: Any, writers: Writers, sessions: int) -> int:
    """Everything acknowledged is stored once at its seq, seqs have no gaps, contexts are valid; returns rows."""
    stored: dict[str, tuple[str, int]] = {}
    for n in range(sessions):
        rows = list(store.messages(f"s{n}", user_id="u"))
        assert [r.seq for r in rows] == list(range(len(rows))), f"s{n}: seqs have a gap or a repeat"
        for r in rows:
            assert r.message.id not in stored, f"{r.message.id} stored twice"
            stored[r.message.id or ""] = (f"s{n}", r.seq)
        memory = Memory.open(f"s{n}", store=store, user_id="u", max_tokens=2_000)
        validate_openai(memory.context().messages)
    lost = {i for i, where in writers.acked.items() if stored.get(i) != where}
    assert not lost, f"acknowledged messages lost or moved: {sorted(lost)[:5]}"
    for ids in writers.batches:  # a batch is stored as one contiguous run
        seqs = [stored[i][1] for i in ids]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for ids in writers.unknown:  # an append that failed is stored whole or not at all
        assert len({i in stored for i in ids}) == 1
    assert set(stored) <= set(writers.acked) | {i for ids in writers.unknown for i in ids}
    return len(stored)


@pytest.fixture
def namespace(tmp_path: Path) -> Iterator[str]:
    yield tmp_path.name
    drop_schemas({schema_for(tmp_path)})
    drop_prefixes({prefix_for(tmp_path)})


def _open(backend: str, url: str, tmp_path: Path) -> Any:
    if backend == "postgres":
        return PostgresStore(url, schema=schema_for(tmp_path))
    return RedisStore(url, prefix=prefix_for(tmp_path))


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_eight_processes_of_four_threads_append_ten_thousand_messages(
    backend: str, tmp_path: Path, namespace: str
) -> None:
    url = PG_URL if backend == "postgres" else REDIS_URL
    name = schema_for(tmp_path) if backend == "postgres" else prefix_for(tmp_path)
    _open(backend, url, tmp_path).close()  # migrate before the race (the race of migrations is tested elsewhere)
    writers = Writers()
    started = time.perf_counter()
    for n in range(8):
        writers.start(backend, url, name, f"p{n}", threads=4, each=313 if n < 4 else 312, sessions=16)
    writers.wait()
    elapsed = time.perf_counter() - started
    assert writers.errors == []
    assert len(writers.acked) == 10_000
    store = _open(backend, url, tmp_path)
    try:
        assert check(store, writers, 16) == 10_000
    finally:
        store.close()
    print(f"{backend}: 10,000 messages in {len(writers.batches)} appends by 32 writers in {elapsed:.1f}s")


# -- Redis restarts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("redis_server", ["durable"], indirect=True)
def test_redis_killed_and_restarted_mid_stream_loses_no_acknowledged_message(redis_server: RedisServer) -> None:
    writers = Writers()
    for n in range(3):
        writers.start("redis", redis_server.url, "t:", f"p{n}", threads=2, each=600, sessions=6)
    killed_at = []
    for share in (0.25, 0.6):  # kill twice, each time well inside the stream
        # and never before every writer has opened its store: on a loaded machine the others can reach the
        # share while one is still starting, and a store that cannot connect at open exits (an open is no write)
        while (writers.count() < share * 3_600 or not writers.started()) and writers.running():
            time.sleep(0.005)
        killed_at.append(writers.count())
        redis_server.kill()
        time.sleep(0.3)  # writers meet a refused connection, then retry
        redis_server.start()
    writers.wait()
    assert all(0 < n < 3_600 for n in killed_at), f"a kill came after the stream ended: {killed_at}"
    assert 0 < writers.count() <= 3_600
    for error in writers.errors:
        assert f"127.0.0.1:{redis_server.port}" in error
    store = RedisStore(redis_server.url, prefix="t:")
    try:
        total = check(store, writers, 6)
    finally:
        store.close()
    outcome = f"{writers.count()} acknowledged, {total} stored, {len(writers.errors)} errors"
    print(f"redis killed at {killed_at} acknowledged messages and restarted: {outcome}")


@pytest.mark.parametrize("redis_server", ["cache"], indirect=True)
def test_a_redis_without_persistence_fails_clearly_while_down_and_works_after_a_restart(
    redis_server: RedisServer,
) -> None:
    store = RedisStore(redis_server.url, prefix="t:", retry_for=0.3)
    try:
        assert store.append(AppendRequest("s", numbered(2), user_id="u")) == [0, 1]
        redis_server.kill()
        with pytest.raises(StoreError, match=rf"Redis 127\.0\.0\.1:{redis_server.port}/0: append to session 's'"):
            store.append(AppendRequest("s", numbered(1, start=2), user_id="u"))
        redis_server.start()
        # '--save "" --appendonly no' keeps nothing: the restarted server is empty, and the scripts are
        # loaded again on first use (NOSCRIPT), so the session starts over.
        assert store.append(AppendRequest("s", numbered(1, start=2), user_id="u")) == [0]
    finally:
        store.close()


# -- PostgreSQL backends terminated --------------------------------------------------------------------
def test_postgres_backends_terminated_mid_stream_lose_no_acknowledged_message(tmp_path: Path, namespace: str) -> None:
    app = f"convmem_faults_{namespace[-12:]}"
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}application_name={app}"
    schema = schema_for(tmp_path)
    PostgresStore(url, schema=schema).close()
    writers = Writers()
    for n in range(4):
        writers.start("postgres", url, schema, f"p{n}", threads=2, each=300, sessions=8)
    kills = 0
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        while not writers.started() and writers.running():  # kill mid-stream, not while a writer starts up
            time.sleep(0.01)
        while writers.running():
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,)
            ).fetchall()
            kills += sum(1 for (done,) in rows if done)
            time.sleep(0.1)
    writers.wait()
    assert kills > 0
    for error in writers.errors:
        assert "127.0.0.1:5432" in error
    store = PostgresStore(PG_URL, schema=schema)
    try:
        total = check(store, writers, 8)
    finally:
        store.close()
    outcome = f"{writers.count()} acknowledged, {total} stored, {len(writers.errors)} errors"
    print(f"postgres: {kills} backends terminated; {outcome}")


# -- a retry after a lost reply ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_retried_write_recognises_its_own_committed_attempt(backend: str, tmp_path: Path, namespace: str) -> None:
    """The reply of a committed append or state save is lost; the retry must not fail, nor write twice."""
    store = _open(backend, PG_URL if backend == "postgres" else REDIS_URL, tmp_path)
    flows: Any = pg_ops if backend == "postgres" else redis_ops
    args: tuple[Any, ...] = () if backend == "postgres" else (store.keys,)

    def twice(op: Any) -> Any:
        first = store.db.run(op)
        again = store.db.run(dataclasses.replace(op, start=lambda retried: op.start(True)))
        assert again == first
        return first

    try:
        store.append(AppendRequest("s", numbered(2), user_id="u"))
        assert twice(flows.append(*args, AppendRequest("s", numbered(3, start=2), user_id="u"), None)) == [2, 3, 4]
        assert [r.seq for r in store.messages("s", user_id="u")] == [0, 1, 2, 3, 4]
        assert store.append(AppendRequest("s", numbered(1, start=4), user_id="u")) == [
            4
        ]  # any caller's retry stores nothing
        other = [(dataclasses.replace(numbered(1, start=4)[0][0], content="other"), 5)]
        with pytest.raises(ConflictError, match="m4"):  # other content under a stored id is refused
            store.append(AppendRequest("s", other, user_id="u"))
        saved = twice(flows.save_state(*args, "s", SessionState(window_start=3), 0, "u"))
        assert store.load("s", user_id="u").state == saved
        with pytest.raises(ConflictError):  # and a real conflict is still one
            store.save_state("s", SessionState(window_start=4), expected_version=0, user_id="u")
    finally:
        store.close()
