"""What encryption at rest costs: the same appends and reads through a store and through its EncryptedStore.

For each backend (the in-memory store, which shows the sealing alone, and SQLite), every repeat writes one
session of ``--messages`` messages (one append per message, each with its writer's view, as ``Memory.add``
does) and reads the whole history back with ``messages()``, once plainly and once encrypted, in alternating
order, each on a fresh store. Reported: the median time of each and the ratio encrypted / plain, side by
side in one run (the machine is shared, so the ratio is the figure to compare, not the times).

Usage::

    .venv/bin/python bench/encryption.py [--messages 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from convmem.messages import Message
from convmem.stores import MemoryStore, SQLiteStore
from convmem.stores.base import AppendRequest
from convmem.stores.encrypted import EncryptedStore, KeyRing

TEXT = "The user said they moved to Lyon in March and that their sister Ada lives in Oslo. " * 3


def run(store: Any, count: int) -> tuple[float, float]:
    start = time.perf_counter()
    for i in range(count):
        message = Message(role="user" if i % 2 == 0 else "assistant", content=f"{i} {TEXT}", id=f"m{i}")
        store.append(AppendRequest("chat", [(message, 60)], user_id="alice", expected_seq=i))
    wrote = time.perf_counter() - start
    start = time.perf_counter()
    rows = list(store.messages("chat", user_id="alice"))
    read = time.perf_counter() - start
    assert len(rows) == count
    assert rows[-1].message.content == f"{count - 1} {TEXT}"
    return wrote, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ring = KeyRing.generate()
    print(f"{args.messages} messages of {len(TEXT) + 5} characters, {args.repeats} repeats")
    print(
        "| backend | plain append ms/msg | encrypted append ms/msg | ratio "
        "| plain read ms | encrypted read ms | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in ("memory", "sqlite"):
        times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for repeat in range(args.repeats):
            for encrypted in (False, True) if repeat % 2 == 0 else (True, False):
                with tempfile.TemporaryDirectory() as where:
                    inner: Any = MemoryStore() if kind == "memory" else SQLiteStore(Path(where) / "db.sqlite")
                    store = EncryptedStore(inner, ring) if encrypted else inner
                    times[encrypted].append(run(store, args.messages))
                    inner.close()
        plain_w, enc_w = (statistics.median(t[0] for t in times[e]) for e in (False, True))
        plain_r, enc_r = (statistics.median(t[1] for t in times[e]) for e in (False, True))
        n = args.messages
        print(
            f"| {kind} | {plain_w / n * 1e3:.3f} | {enc_w / n * 1e3:.3f} | {enc_w / plain_w:.2f}x "
            f"| {plain_r * 1e3:.1f} | {enc_r * 1e3:.1f} | {enc_r / plain_r:.2f}x |"
        )


if __name__ == "__main__":
    main()
