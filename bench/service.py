"""Load on the HTTP service: concurrent clients adding messages and asking for contexts, then an exactness check.

Starts ``convmem serve --workers N`` on a PostgreSQL schema of its own (dropped and recreated first), makes a
key, and runs C clients over loopback for D seconds. Clients share sessions in groups (several writers per
session), each loop step is an ``add`` (one message, ids chosen by the client) or a ``context`` at random.
Afterwards it reads every session back through the store and checks that every acknowledged message (a 201)
is stored exactly once, and that nothing else is stored.

Run: ``.venv/bin/python bench/service.py`` (defaults: 64 clients, 60 s, 4 workers, 16 sessions,
``postgresql://127.0.0.1:5432/test``, schema ``bench_service``). It prints a JSON line and a Markdown table.
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


def verify(url: str, schema: str, sessions: list[str], stats: dict[str, Any]) -> dict[str, int]:
    from convmem.stores.postgres import PostgresStore

    store = PostgresStore(url, schema=schema)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://127.0.0.1:5432/test"))
    parser.add_argument("--schema", default="bench_service")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--max-tokens", type=int, default=4000, help="each session's budget (evictions start early)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

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
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "convmem",
            "serve",
            "--store",
            args.url,
            "--pg-schema",
            args.schema,
            "--keys",
            keys,
            "--port",
            str(port),
            "--workers",
            str(args.workers),
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
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
    check = verify(args.url, args.schema, sessions, stats)
    total = sum(len(v) for v in stats["latency"].values())
    result = {
        "clients": args.clients,
        "sessions": args.sessions,
        "workers": args.workers,
        "seconds": round(elapsed, 1),
        "requests": total,
        "req_per_s": round(total / elapsed, 1),
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
    print(json.dumps(result))
    print("\n| operation | requests | req/s | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|")
    for op, figures in result["ops"].items():
        print(f"| {op} | {figures['n']} | {figures['req_per_s']} | {figures['p50_ms']} | {figures['p99_ms']} |")
    print(f"| all | {total} | {result['req_per_s']} | | |")
    ok = check["duplicates"] == 0 and check["missing"] == 0 and check["foreign"] == 0
    print(f"\nexactly once: {'yes' if ok else 'NO'} {check}; load {result['load_before']} -> {result['load_after']}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
