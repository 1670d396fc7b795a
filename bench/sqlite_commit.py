"""What one add costs on SQLite, by the store's durability setting: wall and CPU time per ``Memory.add``.

The service's SQLite default opens the database with ``synchronous = FULL`` (an acknowledged append survives a
power cut), so every add's commit waits for an fsync of the WAL, with the write lock held: one database file
takes at most 1 / (commit time) adds a second, whatever the CPU does. This measures that ceiling on this disk,
beside ``synchronous = NORMAL`` (an add survives the process being killed, not a power cut), interleaved
round by round in one run so both see the same load. It changes nothing in the store: the comparison is
evidence for where the service's SQLite throughput goes, not a setting the service uses.

Run: ``PYTHONPATH=src .venv/bin/python bench/sqlite_commit.py`` (``--adds``, ``--rounds``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from convmem import Memory
from convmem.stores.sqlite import SQLiteStore


def one(folder: str, synchronous: str, adds: int) -> tuple[float, float]:
    """Wall and CPU ms per add, ``adds`` adds into a fresh database opened with ``synchronous``."""
    store = SQLiteStore(os.path.join(folder, f"{synchronous}-{time.monotonic_ns()}.db"))
    if synchronous != "FULL":
        store.db._conn.execute(f"PRAGMA synchronous = {synchronous}")  # the bench's own change, on its own file
    memory = Memory(store=store, session_id="s", max_tokens=4000)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(adds):
        memory.add({"role": "user", "content": "hello there " * 20})
    result = ((time.perf_counter() - wall) / adds * 1000, (time.process_time() - cpu) / adds * 1000)
    store.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {"FULL": [], "NORMAL": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for synchronous in runs:
                runs[synchronous].append(one(folder, synchronous, args.adds))
    for synchronous, values in runs.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(
            json.dumps(
                {
                    "synchronous": synchronous,
                    "wall_ms_per_add": round(wall, 2),
                    "cpu_ms_per_add": round(cpu, 2),
                    "adds_per_s_ceiling": round(1000 / wall, 1),
                    "load": os.getloadavg()[0],
                }
            )
        )


if __name__ == "__main__":
    main()
