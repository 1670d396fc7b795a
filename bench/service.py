"""Load on the HTTP service: concurrent clients adding messages and asking for contexts, then an exactness check.

Starts ``convmem serve --workers N`` on a store of its own (SQLite: a fresh file; PostgreSQL: a schema,
dropped and recreated first), makes a key, and runs C clients over loopback for D seconds. Clients share
sessions in groups (several writers per session), each loop step is an ``add`` (one message, ids chosen by the
client) or a ``context`` at random. Afterwards it reads every session back through the store and checks that
every acknowledged message (a 201) is stored exactly once, and that nothing else is stored.

``--bare`` runs the same load generator against a bare FastAPI app answering the same paths and doing no work
(``bench/_bare_app.py``, same uvicorn, same worker count): the ceiling of HTTP on this machine, and a yardstick
that is robust to the load other jobs put on the machine (report the service's ratio to it).
``--matrix`` runs, side by side in one run, the bare route and the service on SQLite with one worker and on
PostgreSQL with 2 and 4 workers. ``--pythonpath DIR`` runs the service from another source tree (e.g.
``/work/main/src``, to measure main on the same machine in the same hour).

``--adapter`` measures in process instead, no HTTP: one context request through the service's adapter
(``SessionService.context``: the exact-id lookup, the user's blocks, the kept memory) against
``Memory.context`` on the same session, the in-memory store, best of several rounds (wall time: noisy on a
shared machine); ``--adapter-run memory|service N`` is the same setup then N calls, for callgrind, whose
instruction counts do not depend on the load: (service N - memory 0) / (memory N - memory 0).

Run: ``.venv/bin/python bench/service.py --matrix`` (defaults: 64 clients, 60 s, 16 sessions,
``postgresql://127.0.0.1:5432/test``, schema ``bench_service``). It prints JSON lines and a Markdown table.
Only loopback is used; every loop is bounded by the duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reset_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def client(
    number: int, url: str, key: str, session: str, deadline: float, stats: dict[str, Any], rng: random.Random
) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0) as http:
        turn = 0
        while time.monotonic() < deadline:
            op = "add" if rng.random() < 0.5 else "context"
            started = time.perf_counter()
            if op == "add":
                message_id = f"c{number}-{turn}-{uuid.uuid4().hex[:8]}"
                role = "user" if turn % 2 == 0 else "assistant"
                text = f"client {number} turn {turn}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
                body = {
                    "messages": [
                        {
                            "role": role,
                            "content": text,
                            "id": message_id,
                            "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                        }
                    ],
                    "format": "convmem",
                }
                stats["sent"][session].append(message_id)
                response = await http.post(f"/v1/sessions/{session}/messages", json=body)
                if response.status_code == 201:
                    stats["acked"][session].append(message_id)
                turn += 1
            else:
                response = await http.post(f"/v1/sessions/{session}/context", json={})
            elapsed = time.perf_counter() - started
            stats["latency"][op].append(elapsed)
            stats["status"][(op, response.status_code)] += 1


WORDS = [
    "train",
    "hotel",
    "lisbon",
    "porto",
    "museum",
    "dinner",
    "ticket",
    "bridge",
    "river",
    "coffee",
    "market",
    "station",
    "tram",
    "beach",
    "castle",
    "garden",
    "book",
    "flight",
    "rain",
    "sunny",
    "walk",
    "map",
    "guide",
    "night",
    "music",
]


def verify(store: Any, sessions: list[str], stats: dict[str, Any]) -> dict[str, int]:
    duplicates = missing = extra = stored_total = 0
    try:
        for session in sessions:
            stored = [s.message.id for s in store.messages(f"bench.{session}", user_id="bench:")]
            stored_total += len(stored)
            counts = Counter(stored)
            duplicates += sum(c - 1 for c in counts.values() if c > 1)
            acked = {f"bench.{m}" for m in stats["acked"][session]}
            sent = {f"bench.{m}" for m in stats["sent"][session]}
            missing += len(acked - set(counts))
            extra += len(set(counts) - sent)  # stored but never sent (an unacknowledged send may land: that is fine)
    finally:
        store.close()
    acked_total = sum(len(v) for v in stats["acked"].values())
    return {
        "acked": acked_total,
        "stored": stored_total,
        "duplicates": duplicates,
        "missing": missing,
        "foreign": extra,
    }


def serve_command(kind: str, args: argparse.Namespace, keys: str, port: int, workers: int, data: Path) -> list[str]:
    if kind == "bare":
        return [sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT / "bench"), "_bare_app:app", "--port",
                str(port), "--workers", str(workers), "--no-access-log", "--log-level", "warning"]  # fmt: skip
    store = (
        ["--store", str(data / "bench.db")] if kind == "sqlite" else ["--store", args.url, "--pg-schema", args.schema]
    )
    return [sys.executable, "-m", "convmem", "serve", *store, "--keys", keys, "--port", str(port), "--workers",
            str(workers), "--no-access-log", "--log-level", "warning"]  # fmt: skip


def run_one(kind: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """One load run against ``kind`` (bare, sqlite, postgres) with ``workers`` processes; its figures."""
    if kind == "postgres":
        reset_schema(args.url, args.schema)
    tmp = Path(tempfile.mkdtemp(prefix="convmem-bench-service-"))
    keys = str(tmp / "keys.db")
    from convmem.server.keys import open_registry

    registry = open_registry(keys)
    key = registry.create_key("bench").secret
    registry.close()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp / "serve.log").open("wb")
    env = dict(os.environ)
    if args.pythonpath and kind != "bare":
        env["PYTHONPATH"] = args.pythonpath
    server = subprocess.Popen(
        serve_command(kind, args, keys, port, workers, tmp), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env
    )
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        headers = {"Authorization": f"Bearer {key}"}
        sessions = [f"s{i}" for i in range(args.sessions)]
        for session in sessions:
            body = {"id": session, "model": "gpt-4o", "max_tokens": args.max_tokens, "max_output_tokens": 500}
            response = httpx.post(url + "/v1/sessions", json=body, headers=headers, timeout=60)
            assert response.status_code == 201, response.text
        stats: dict[str, Any] = {
            "latency": defaultdict(list),
            "status": Counter(),
            "acked": defaultdict(list),
            "sent": defaultdict(list),
        }
        load_before = os.getloadavg()
        rng = random.Random(args.seed)

        async def run() -> float:
            started = time.monotonic()
            deadline = started + args.duration
            await asyncio.gather(
                *(
                    client(i, url, key, sessions[i % len(sessions)], deadline, stats, random.Random(rng.random()))
                    for i in range(args.clients)
                )
            )
            return time.monotonic() - started

        elapsed = asyncio.run(run())
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    check: dict[str, int] | None = None
    if kind != "bare":
        from convmem.stores import open_store
        from convmem.stores.postgres import PostgresStore

        store: Any = (
            PostgresStore(args.url, schema=args.schema) if kind == "postgres" else open_store(str(tmp / "bench.db"))
        )
        try:
            check = verify(store, sessions, stats)
        finally:
            store.close()
    everything = [x for v in stats["latency"].values() for x in v]
    return {
        "target": kind,
        "code": args.pythonpath or "this tree",
        "clients": args.clients,
        "sessions": args.sessions,
        "workers": workers,
        "seconds": round(elapsed, 1),
        "requests": len(everything),
        "req_per_s": round(len(everything) / elapsed, 1),
        "p50_ms": round(1000 * percentile(everything, 0.5), 1),
        "p99_ms": round(1000 * percentile(everything, 0.99), 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "ops": {
            op: {
                "n": len(v),
                "req_per_s": round(len(v) / elapsed, 1),
                "p50_ms": round(1000 * percentile(v, 0.5), 1),
                "p99_ms": round(1000 * percentile(v, 0.99), 1),
                "mean_ms": round(1000 * statistics.fmean(v), 1),
            }
            for op, v in sorted(stats["latency"].items())
        },
        "status": {f"{op} {code}": n for (op, code), n in sorted(stats["status"].items())},
        "exactly_once": check,
    }


def exact(check: dict[str, int] | None) -> bool:
    return check is None or (check["duplicates"] == 0 and check["missing"] == 0 and check["foreign"] == 0)


def adapter_setup() -> tuple[Any, Any, Any, Any]:
    """The service's adapter over the in-memory store, one session of 90 messages, and a Memory opened on it."""
    from convmem import Memory
    from convmem.server.backends import open_backend
    from convmem.server.sessions import SessionService
    from convmem.server.tenancy import Scope

    backend = open_backend("memory")
    service = SessionService(backend)
    scope = Scope("bench", None)
    service.create(scope, {"id": "s", "model": "gpt-4o", "max_tokens": 4000, "max_output_tokens": 500}, title=None,
                   metadata={})  # fmt: skip
    rng = random.Random(7)
    for turn in range(90):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
        service.add(scope, "s", [{"role": "user" if turn % 2 == 0 else "assistant", "content": text}], codec=False)
    memory = Memory.open(scope.store_session("s"), store=backend.store, user_id=scope.store_user)
    memory.context()
    service.context(scope, "s", None, None)
    return service, scope, memory, backend


def adapter_run(mode: str, calls: int) -> None:
    """For callgrind: the setup, then ``calls`` contexts through ``mode`` (memory or service); 0 calls: the setup."""
    service, scope, memory, _ = adapter_setup()
    for _ in range(calls):
        if mode == "memory":
            memory.context()
        else:
            service.context(scope, "s", None, None)


def adapter(rounds: int = 7, calls: int = 200) -> dict[str, Any]:
    """In process: one context through ``SessionService.context`` vs ``Memory.context``, same session, best round."""
    service, scope, memory, _ = adapter_setup()

    def best(call: Any) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(calls):
                call()
            times.append((time.perf_counter() - started) / calls)
        return min(times)

    library = best(lambda: memory.context())
    through = best(lambda: service.context(scope, "s", None, None))
    return {
        "memory_context_us": round(1e6 * library, 1),
        "service_context_us": round(1e6 * through, 1),
        "ratio": round(through / library, 2),
        "window_messages": memory.stats().window_messages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://127.0.0.1:5432/test"))
    parser.add_argument("--schema", default="bench_service")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--max-tokens", type=int, default=4000, help="each session's budget (evictions start early)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bare", action="store_true", help="the bare FastAPI route instead of the service")
    parser.add_argument("--matrix", action="store_true", help="bare and service: SQLite x1, PostgreSQL x2 and x4")
    parser.add_argument("--pythonpath", default=None, help="run the service from this source tree")
    parser.add_argument("--adapter", action="store_true", help="in process: the adapter's context vs Memory.context")
    parser.add_argument("--adapter-run", nargs=2, metavar=("MODE", "N"), help="for callgrind: memory|service, N calls")
    args = parser.parse_args()

    if args.adapter_run:
        adapter_run(args.adapter_run[0], int(args.adapter_run[1]))
        return

    if args.adapter:
        print(json.dumps(adapter()))
        return
    if args.matrix:
        plan = [(t, k, w) for k, w in (("sqlite", 1), ("postgres", 2), ("postgres", 4)) for t in ("bare", k)]
    else:
        target = "bare" if args.bare else args.store
        plan = [(target, args.store, args.workers)]
    results = []
    bare: dict[tuple[str, int], float] = {}
    for target, store, workers in plan:
        result = run_one(target, workers, args)
        result["store"] = store
        if target == "bare":
            bare[(store, workers)] = result["req_per_s"]
        elif (store, workers) in bare:
            result["ratio_to_bare"] = round(result["req_per_s"] / bare[(store, workers)], 3)
        results.append(result)
        print(json.dumps(result), flush=True)
    print("\n| target | workers | req/s | p50 ms | p99 ms | ratio to bare | exactly once | load before -> after |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for r in results:
        name = "bare route" if r["target"] == "bare" else f"service, {r['store']}"
        once = (
            "n/a" if r["exactly_once"] is None else ("yes" if exact(r["exactly_once"]) else f"NO {r['exactly_once']}")
        )
        print(
            f"| {name} | {r['workers']} | {r['req_per_s']} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r.get('ratio_to_bare', '')} | {once} | {r['load_before'][0]} -> {r['load_after'][0]} |"
        )
    if not all(exact(r["exactly_once"]) for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
