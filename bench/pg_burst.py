"""PostgreSQL: per-add cost through a long burst into one session, against fresh sessions in the same run.

Every evicting add updates its session's row. Issue 32 found the row's dead versions piling up between
autovacuum runs (each lookup of the row walked them) and the per-turn cost rising until ``VACUUM``. This
bench adds ``--messages`` messages to one session through ``Memory`` (token_budget, evicting every turn),
autovacuum left at the server's defaults, and interleaves each add with one to a fresh session (a new one
every 500 adds): the fresh sessions are the control, so that a machine whose load changes during the run
does not pass for a slower row. It prints the burst's per-add p50 over its first and last 1,000 adds, the
same for the control, their ratios, and the server's update counters for the sessions table (all updates,
heap-only ones, dead versions).

Run:  PYTHONPATH=src .venv/bin/python bench/pg_burst.py [--messages 20000] [--url postgresql://...] [--schema NAME]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg

from convmem import Memory, Message
from convmem.stores.postgres import PostgresStore

WINDOW = 1000


def message(i: int) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    return Message(role=role, content=f"message {i} about the quarterly plan and the weather in Lisbon")


def table_counters(url: str, schema: str) -> tuple[int, int, int]:
    time.sleep(11)  # the server's statistics arrive from idle connections, up to ~10 s later
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables "
            "WHERE schemaname = %s AND relname = 'sessions'",
            (schema,),
        ).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--url", default=os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test"))
    parser.add_argument("--schema", default="convmem_bench_burst")
    args = parser.parse_args()
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE".encode())
    store = PostgresStore(args.url, schema=args.schema)
    try:
        burst = Memory(store=store, session_id="burst", max_tokens=4000)
        fresh = burst
        burst_times: list[float] = []
        fresh_times: list[float] = []
        for i in range(args.messages):
            if i % 500 == 0:
                fresh = Memory(store=store, session_id=f"fresh{i}", max_tokens=4000)
                for j in range(60):  # past the budget, so that its adds evict as the burst's do
                    fresh.add(message(j))
            started = time.perf_counter()
            burst.add(message(i))
            burst_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            fresh.add(message(i))
            fresh_times.append(time.perf_counter() - started)
        first, last = statistics.median(burst_times[:WINDOW]), statistics.median(burst_times[-WINDOW:])
        control_first = statistics.median(fresh_times[:WINDOW])
        control_last = statistics.median(fresh_times[-WINDOW:])
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        print(f"burst session, per-add p50: first {first * 1e3:.2f} ms, last {last * 1e3:.2f} ms ({last / first:.2f}x)")
        print(
            f"fresh sessions (control):   first {control_first * 1e3:.2f} ms, last {control_last * 1e3:.2f} ms "
            f"({control_last / control_first:.2f}x)"
        )
        print(f"burst / control: at the start {first / control_first:.2f}x, at the end {last / control_last:.2f}x")
        updates, hot, dead = table_counters(args.url, args.schema)
        print(f"sessions table: {updates} updates, {hot} heap-only ({hot / max(updates, 1):.1%}), {dead} dead")
    finally:
        store.close()
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE".encode())


if __name__ == "__main__":
    main()
