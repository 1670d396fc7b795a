"""Server backends: append throughput and context latency of PostgreSQL and Redis against SQLite, in one run.

1. Append throughput (messages/s) through the store, as ``Memory.add`` uses it:
   one message per append from one thread (each append waits for its commit:
   round-trip and fsync bound), 100 messages per append, and 8 threads each
   appending one message at a time to its own session (what several app
   workers do; SQLite serializes writers, the servers do not). The median
   single-append latency is shown beside it.
2. Context latency on a 10,000-message session built through ``Memory``
   (token_budget strategy, 8k-token budget, so nearly everything is archived):
   ``Memory.open(id).context()`` on a long-lived store object (what a
   stateless app process does per request), and one turn on an open memory
   (``add`` a user message, then ``context()``: one append round trip plus
   the in-process assembly).
3. Lexical recall in the store: top-10 ``lexical_search`` over 100,000 archived
   documents of one user (Zipf-distributed words from a 5,000-word vocabulary,
   20 words each; queries of 6 words), PostgreSQL ``tsvector`` + GIN against
   SQLite FTS5, p50 and p99 over 200 queries. Redis keeps no lexical index
   (the recall index ranks in process), so it has no row here.

Durability differs and is part of the price: SQLite runs ``synchronous=FULL``
(fsync per commit), PostgreSQL ``synchronous_commit=on`` (WAL flushed per
commit), and this machine's Redis keeps nothing on disk (``--save ''
--appendonly no``), so its figures are in-memory ones.

Needs the local servers (``.ci/run`` starts them) or ``CONVMEM_POSTGRES_URL`` /
``CONVMEM_REDIS_URL``. Everything is written to a schema / key prefix of its
own, removed at the end.

Run:  .venv/bin/python bench/servers.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
import redis

from convmem import Memory, Message
from convmem.longterm.recall.index import RecallDoc
from convmem.stores import PostgresStore, RedisStore, SQLiteStore
from convmem.stores.base import AppendRequest
from convmem.stores.postgres.longterm import PostgresRecallStore
from convmem.stores.sqlite.longterm import SQLiteRecallStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stores import text  # the same message texts as the persistence bench

PG_URL = os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CONVMEM_REDIS_URL", "redis://127.0.0.1:6379/0")
SCHEMA = f"convmem_bench_{os.getpid()}"
PREFIX = f"convmem-bench-{os.getpid()}:"
KINDS = ("sqlite", "postgres", "redis")


def messages(tag: str, start: int, count: int) -> list[tuple[Message, int]]:
    return [
        (Message(role="user" if n % 2 == 0 else "assistant", content=text(n), id=f"{tag}-{n}"), 35)
        for n in range(start, start + count)
    ]


def make(kind: str, root: Path) -> Any:
    if kind == "sqlite":
        return SQLiteStore(root / "bench.db")
    if kind == "postgres":
        return PostgresStore(PG_URL, schema=SCHEMA, max_size=10)
    return RedisStore(REDIS_URL, prefix=PREFIX)


def single_appends(store: Any, tag: str, count: int) -> tuple[float, float]:
    """(messages/s, median ms per append) for one message per append."""
    data = messages(tag, 0, count)
    times = []
    for item in data:
        started = time.perf_counter()
        store.append(AppendRequest(tag, [item], user_id="u"))
        times.append(time.perf_counter() - started)
    return count / sum(times), statistics.median(times) * 1000


def batched_appends(store: Any, tag: str, count: int) -> float:
    data = messages(tag, 0, count)
    started = time.perf_counter()
    for start in range(0, count, 100):
        store.append(AppendRequest(tag, data[start : start + 100], user_id="u"))
    return count / (time.perf_counter() - started)


def threaded_appends(store: Any, tag: str, threads: int, each: int) -> float:
    def work(n: int) -> None:
        for item in messages(f"{tag}.{n}", 0, each):
            store.append(AppendRequest(f"{tag}.{n}", [item], user_id="u"))

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return threads * each / (time.perf_counter() - started)


def build(store: Any, session: str, count: int) -> None:
    memory = Memory(store=store, session_id=session, user_id="u", max_tokens=8000, strategy="token_budget")
    memory.add({"role": "system", "content": "You are a helpful assistant."})
    for start in range(0, count - 1, 500):
        memory.add_many(
            [
                {"role": "user" if n % 2 == 0 else "assistant", "content": text(n)}
                for n in range(start, min(start + 500, count - 1))
            ]
        )


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def context_latency(store: Any, session: str, repeats: int) -> tuple[float, float, int]:
    """(open + context ms, add + context ms, context messages) on a warm store."""

    def open_and_context() -> int:
        return len(Memory.open(session, store=store, user_id="u", max_tokens=8000).context().messages)

    opened = median_ms(open_and_context, repeats)
    memory = Memory.open(session, store=store, user_id="u", max_tokens=8000, strategy="token_budget")
    turns = iter(range(10**9))

    def turn() -> None:
        memory.add({"role": "user", "content": f"one more question, number {next(turns)}"})
        memory.context()

    return opened, median_ms(turn, repeats * 5), open_and_context()


def recall_latency(store: Any, docs: int, queries: int) -> tuple[float, float, float]:
    """(seconds to index, p50 ms, p99 ms) of top-10 lexical searches over ``docs`` documents."""
    rng = random.Random(7)
    vocabulary = [f"w{n}" for n in range(5_000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    started = time.perf_counter()
    for start in range(0, docs, 2_000):
        batch = []
        for n in range(start, min(start + 2_000, docs)):
            words = " ".join(rng.choices(vocabulary, weights, k=20))
            batch.append(RecallDoc(f"d{n}", f"s{n // 500}", "u", n % 500, "user", words, t0, words))
        store.save_docs(batch)
    indexed = time.perf_counter() - started
    times = []
    for _ in range(queries):
        query = " ".join(rng.choices(vocabulary, weights, k=6))
        begin = time.perf_counter()
        store.lexical_search(query, user_id="u", limit=10)
        times.append((time.perf_counter() - begin) * 1000)
    times.sort()
    return indexed, statistics.median(times), times[int(len(times) * 0.99) - 1]


def cleanup() -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE".encode())
    with redis.Redis.from_url(REDIS_URL) as client:
        keys = list(client.scan_iter(match=f"{PREFIX}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])


def versions() -> str:
    with psycopg.connect(PG_URL) as conn:
        pg = str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]  # type: ignore[index]
    with redis.Redis.from_url(REDIS_URL) as client:
        rd = client.info("server")["redis_version"]
    sqlite = __import__("sqlite3").sqlite_version
    return f"PostgreSQL {pg}, Redis {rd}, SQLite {sqlite}, psycopg {psycopg.__version__}, redis-py {redis.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and repeats")
    args = parser.parse_args()
    single, batched, each, big = (300, 5_000, 100, 2_000) if args.quick else (2_000, 50_000, 500, 10_000)
    recall_docs = 10_000 if args.quick else 100_000
    repeats = 3 if args.quick else 9
    print(f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs")
    print(versions(), "\n")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores = {kind: make(kind, Path(tmp)) for kind in KINDS}
            print("### Append throughput (messages/s)\n")
            print("| backend | 1 per append | median append ms | 100 per append | 8 threads, 1 per append |")
            print("|---|---:|---:|---:|---:|")
            for kind, store in stores.items():
                rate, latency = single_appends(store, "single", single)
                many = batched_appends(store, "batched", batched)
                threaded = threaded_appends(store, "threaded", 8, each)
                print(f"| {kind} | {rate:,.0f} | {latency:.2f} | {many:,.0f} | {threaded:,.0f} |")

            print(f"\n### Context latency, {big:,}-message session (median of {repeats} runs; turns: {repeats * 5})\n")
            print("| backend | open + context ms | add + context ms (one turn) | context messages |")
            print("|---|---:|---:|---:|")
            for kind, store in stores.items():
                build(store, "big", big)
                opened, turn, window = context_latency(store, "big", repeats)
                print(f"| {kind} | {opened:.2f} | {turn:.2f} | {window} |")

            print(f"\n### Lexical recall in the store, {recall_docs:,} documents of one user (top-10, 200 queries)\n")
            print("| backend | index build s | p50 ms | p99 ms |")
            print("|---|---:|---:|---:|")
            for kind, recall in (
                ("sqlite (FTS5, BM25)", SQLiteRecallStore(stores["sqlite"])),
                ("postgres (tsvector + GIN, ts_rank)", PostgresRecallStore(stores["postgres"])),
            ):
                indexed, p50, p99 = recall_latency(recall, recall_docs, 200)
                print(f"| {kind} | {indexed:.1f} | {p50:.1f} | {p99:.1f} |")
                recall.close()
            for store in stores.values():
                store.close()
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
