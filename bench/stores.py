"""Store benchmarks: append throughput, and open + first context of a 100-message vs a 100k-message session.

1. Append throughput: messages/s for ``MemoryStore``, ``SQLiteStore`` and ``FileStore`` when every
   message is its own ``append`` (what ``Memory.add`` does), and for batches of 100 (``add_many``).
   The persistent stores fsync every append (SQLite ``synchronous=FULL`` in WAL mode; the file store
   fsyncs the JSONL line), so these are durable appends.
2. Open + first context: a session is built through ``Memory`` (token_budget, 8k-token budget, so
   the window keeps only the newest messages and everything else is archived). Then, with a new
   store object over the same file, we time ``Memory.open(...)`` followed by ``context()``, and count
   the rows ``load`` read. "open + first add" adds the first durable append after opening (it checks
   the new id against the session's, through an index in both backends). For contrast,
   "read everything" times listing every stored message, which is what opening would cost if it
   read the archive. The OS page cache is warm in every case.

Run:  .venv/bin/python bench/stores.py [--quick]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from convmem import Memory, Message
from convmem.stores import FileStore, MemoryStore, SQLiteStore
from convmem.stores.base import AppendRequest

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "we",
    "talk",
    "about",
    "tokens",
    "budgets",
    "and",
    "memory",
]


def text(n: int) -> str:
    return " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(30))


def messages(start: int, count: int) -> list[tuple[Message, int]]:
    return [
        (Message(role="user" if n % 2 == 0 else "assistant", content=text(n), id=f"m{n}"), 35)
        for n in range(start, start + count)
    ]


def make(kind: str, root: Path) -> Any:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(root / "bench.db")
    return FileStore(root / "files")


def append_rate(kind: str, count: int, batch: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = make(kind, Path(tmp))
        data = messages(0, count)
        started = time.perf_counter()
        for start in range(0, count, batch):
            store.append(AppendRequest("s", data[start : start + batch], user_id="u"))
        elapsed = time.perf_counter() - started
        store.close()
    return count / elapsed


def build(kind: str, root: Path, session: str, count: int) -> None:
    store = make(kind, root)
    memory = Memory(store=store, session_id=session, max_tokens=8000, strategy="token_budget")
    memory.add({"role": "system", "content": "You are a helpful assistant."})
    for start in range(0, count - 1, 500):
        memory.add_many(
            [
                {"role": "user" if n % 2 == 0 else "assistant", "content": text(n)}
                for n in range(start, min(start + 500, count - 1))
            ]
        )
    store.close()


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def open_and_context(kind: str, root: Path, session: str) -> tuple[int, int, int]:
    store = make(kind, root)
    before = store.rows_read
    memory = Memory.open(session, store=store, max_tokens=8000)
    ctx = memory.context()
    rows = store.rows_read - before
    window = len(ctx.messages)
    total = store.get_session(session).message_count
    store.close()
    return rows, window, total


def first_add_ms(kind: str, root: Path, session: str, repeats: int) -> float:
    """Open with a new store object, then append one message: the first write after opening."""
    times = []
    for n in range(repeats):
        store = make(kind, root)
        started = time.perf_counter()
        memory = Memory.open(session, store=store, max_tokens=8000)
        [seq] = store.append(AppendRequest(session, [(Message(role="user", content="one more", id=f"extra{n}"), 3)]))
        times.append((time.perf_counter() - started) * 1000)
        assert memory.session_id == session
        store.delete_messages(session, [seq])  # untimed: every repeat starts from the same session
        store.close()
    return statistics.median(times)


def read_everything(kind: str, root: Path, session: str) -> int:
    store = make(kind, root)
    count = sum(1 for _ in store.messages(session))
    store.close()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k instead of 100k messages, fewer repeats")
    args = parser.parse_args()
    big = 10_000 if args.quick else 100_000
    repeats = 3 if args.quick else 7
    print(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{sys.platform}; SQLite {__import__('sqlite3').sqlite_version}\n"
    )

    print("### Append throughput (messages/s)\n")
    print("| backend | 1 message per append | 100 messages per append |")
    print("|---|---:|---:|")
    for kind in ("memory", "sqlite", "files"):
        single = statistics.median(append_rate(kind, 1000, 1) for _ in range(3))
        batched = statistics.median(append_rate(kind, 20_000, 100) for _ in range(3))
        print(f"| {kind} | {single:,.0f} | {batched:,.0f} |")

    print("\n### Open + first context (median of", repeats, "runs)\n")
    print(
        "| backend | messages | rows read by load | context messages | open + context ms | open + first add ms "
        "| read everything ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in ("sqlite", "files"):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for count in (100, big):
                session = f"s{count}"
                build(kind, root, session, count)
                rows, window, total = open_and_context(kind, root, session)
                opened = median_ms(partial(open_and_context, kind, root, session), repeats)
                added = first_add_ms(kind, root, session, 3)
                everything = median_ms(partial(read_everything, kind, root, session), max(1, repeats // 2))
                print(
                    f"| {kind} | {total:,} | {rows:,} | {window:,} | {opened:.1f} | {added:,.1f} | {everything:,.0f} |"
                )


if __name__ == "__main__":
    main()
