"""Erase latency at scale: ``forget`` a user with 100,000 messages and their recall index (issue 31).

Seeds one store with the user to erase (``--messages`` messages in sessions of 1,000, one fork per session,
a recall document per message with a vector of ``--dim`` float32, 50 facts, 3 blocks) and a second user with
a tenth of that, who stays. Then times ``store.forget(user_id=...)`` (the erasure, which returns when the
data is unreadable through every API and a writer of the sessions gets SessionLostError) and, separately,
``store.compact()`` (the step that clears the bytes the storage still holds: FTS5 optimize + VACUUM on
SQLite, VACUUM FULL on PostgreSQL). Target: the erasure under 5 s on SQLite and PostgreSQL.

Run:  .venv/bin/python bench/erase.py --backend sqlite|postgres [--messages 100000] [--dim 64]
(PostgreSQL: ``$CONVMEM_POSTGRES_URL``, default the machine's server; a schema of its own, dropped after.)
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from convmem.longterm.blocks.store import BlockRecord
from convmem.longterm.facts.model import Fact
from convmem.longterm.recall.model import RecallDoc
from convmem.messages import Message
from convmem.stores.base import AppendRequest

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
PER_SESSION = 1_000
WORDS = [
    "the",
    "bike",
    "was",
    "parked",
    "near",
    "the",
    "north",
    "gate",
    "after",
    "lunch",
    "with",
    "my",
    "sister",
    "on",
    "tuesday",
]


def _text(i: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(12)) + f" item{i}"


def seed(store: Any, user: str, messages: int, dim: int) -> None:
    recall, rng = store.recall(), np.random.default_rng(7)
    for s in range(max(1, messages // PER_SESSION)):
        sid = f"{user}-s{s}"
        batch = [
            (Message(role="user" if i % 2 == 0 else "assistant", content=_text(i), id=f"m{i}", created_at=T0), 16)
            for i in range(PER_SESSION)
        ]
        for start in range(0, PER_SESSION, 500):
            store.append(AppendRequest(sid, batch[start : start + 500], user_id=user, expected_seq=start))
        store.fork(sid, PER_SESSION // 2, user_id=user)
        docs = [
            RecallDoc(f"m{i}", sid, user, i, "user", _text(i), T0 + timedelta(seconds=i), _text(i), _text(i - 1))
            for i in range(PER_SESSION)
        ]
        recall.save_docs(docs)
        recall.save_vectors("bench", docs, rng.random((len(docs), dim), dtype=np.float32))
    facts = [Fact(f"{user}-f{i}", user, f"{user} fact {i}", T0, T0, session_id=f"{user}-s0") for i in range(50)]
    store.facts().write_facts(facts, [])
    for name in ("persona", "goals", "notes"):
        store.blocks().save_block(BlockRecord(user, name, f"{user} {name}", 0), expected_version=0)


def open_store(backend: str, where: Path) -> tuple[Any, Any]:
    if backend == "sqlite":
        from convmem.stores import SQLiteStore

        return SQLiteStore(where / "erase.db"), None
    from convmem.stores.postgres import PostgresStore

    url = os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"convmem_bench_erase_{uuid.uuid4().hex[:8]}"
    return PostgresStore(url, schema=schema), (url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store, server = open_store(args.backend, Path(tmp))
        try:
            began = time.perf_counter()
            seed(store, "erased", args.messages, args.dim)
            seed(store, "kept", args.messages // 10, args.dim)
            seeded = time.perf_counter() - began
            kept_before = [store.get_session(i.id, user_id="kept") for i in store.list_sessions(user_id="kept")]
            began, cpu = time.perf_counter(), time.process_time()
            receipt = store.forget(user_id="erased")
            erase, erase_cpu = time.perf_counter() - began, time.process_time() - cpu
            began = time.perf_counter()
            store.compact()
            compact = time.perf_counter() - began
            kept = [store.get_session(i.id, user_id="kept") for i in store.list_sessions(user_id="kept")]
        finally:
            store.close()
            if server is not None:
                import psycopg

                with psycopg.connect(server[0], autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {server[1]} CASCADE".encode())
    print(f"backend {args.backend}, {args.messages:,} messages of the erased user, vectors of dim {args.dim}")
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.machine()}")
    print(f"seeded in {seeded:.1f} s; the kept user's {len(kept)} sessions unchanged: {kept == kept_before}")
    print("| removed | " + " | ".join(receipt.removed) + " |")
    print("|---|" + "---:|" * len(receipt.removed))
    print("| count | " + " | ".join(f"{n:,}" for n in receipt.removed.values()) + " |")
    print(f"forget: {erase:.2f} s wall (target < 5 s), {erase_cpu:.2f} s CPU of this process; compact: {compact:.2f} s")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    sys.exit(0 if erase < 5.0 else 1)


if __name__ == "__main__":
    main()
