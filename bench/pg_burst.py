"""PostgreSQL: per-add cost through a long burst into one session, and what a lookup of its row reads.

Every evicting add updates its session's row. Issue 32 found the row's dead versions piling up between
autovacuum runs (each lookup of the row walked them) and the per-turn cost rising until ``VACUUM``. This
bench adds ``--messages`` messages to one session through ``Memory`` (token_budget, evicting every turn),
autovacuum left at the server's defaults. It prints the per-add p50 over the first and the last 1,000 adds
(wall clock: on a loaded machine it moves with the load, printed beside it), and at checkpoints the buffers
that one lookup of the session row by its key touches (``EXPLAIN (ANALYZE, BUFFERS)``): a count that does not
depend on the machine's load and grows with the dead versions the lookup walks. Then the server's update
counters for the sessions table (all updates, heap-only ones, dead versions).

Run:  PYTHONPATH=src .venv/bin/python bench/pg_burst.py [--messages 20000] [--url postgresql://...] [--schema NAME]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg
from psycopg import sql

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


def row_buffers(url: str, schema: str) -> int:
    """Shared buffers one lookup of the burst's session row by its key touches (hit or read)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}".encode())
        row = conn.execute("SELECT id FROM sessions WHERE id LIKE '%burst'").fetchone()
        query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM sessions WHERE id = {}")
        plan = conn.execute(query.format(sql.Literal(row[0] if row else ""))).fetchone()
    top = plan[0][0]["Plan"] if plan else {}
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--url", default=os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test"))
    parser.add_argument("--schema", default="convmem_bench_burst")
    args = parser.parse_args()
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE".encode())
    store = PostgresStore(args.url, schema=args.schema)
    checkpoints = {1_000, args.messages // 4, args.messages // 2, args.messages}
    try:
        burst = Memory(store=store, session_id="burst", max_tokens=4000)
        times: list[float] = []
        loads: list[float] = []
        for i in range(args.messages):
            started = time.perf_counter()
            burst.add(message(i))
            times.append(time.perf_counter() - started)
            if i + 1 in (WINDOW, args.messages):
                loads.append(os.getloadavg()[0])
            if i + 1 in checkpoints:
                touched = row_buffers(args.url, args.schema)
                print(f"after {i + 1:>6} adds: a lookup of the session row by its key touches {touched} buffers")
        first, last = statistics.median(times[:WINDOW]), statistics.median(times[-WINDOW:])
        print(
            f"per-add p50: first {WINDOW} {first * 1e3:.2f} ms (load {loads[0]:.1f}), "
            f"last {WINDOW} {last * 1e3:.2f} ms (load {loads[-1]:.1f}): {last / first:.2f}x"
        )
        updates, hot, dead = table_counters(args.url, args.schema)
        print(f"sessions table: {updates} updates, {hot} heap-only ({hot / max(updates, 1):.1%}), {dead} dead")
    finally:
        store.close()
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE".encode())


if __name__ == "__main__":
    main()
