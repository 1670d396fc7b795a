"""A turn with the default recall block against a plain turn, at 1k / 10k / 100k archived messages.

Workload: the turns of ``bench/turns.py`` (LoCoMo texts, alternating user/assistant, every 10th
assistant turn a tool call), budget 8,000 tokens, gpt-4o counting. The user's archive is N earlier
messages (LoCoMo turn texts said by its two speakers, 50 per session), indexed before the run in a
``RecallIndex``: in process (BM25, the lexical default) or in SQLite FTS5 (``SQLiteRecallStore``,
``lexical="store"``). Two memories of that user run the same turns, interleaved turn by turn so
machine noise hits both alike: a plain ``Memory`` and one with ``blocks=[RecallBlock(index)]`` and
the index as its eviction sink (so the archive grows as the window evicts, as in use). A turn is
``add_many(step)`` + ``context()``; the query is the newest user message. Also timed: a second
``context()`` for the same input (prompt-caching callers build the request twice; the search must not
run again).

Run:  .venv/bin/python bench/recall_turns.py [--sizes 1000,10000,100000] [--turns 400] [--backends memory,fts5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from convmem import Memory
from convmem.longterm.recall import RecallBlock, RecallIndex
from convmem.longterm.recall.model import RecallDoc
from turns import BUDGET, LOCOMO, locomo_texts, workload

USER = "bench-user"


def archive(size: int, texts: list[str]) -> list[RecallDoc]:
    """``size`` earlier messages of the user, 50 per session, one minute apart, in LoCoMo's words."""
    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    docs, previous = [], ""
    for i in range(size):
        text = texts[(i * 7919) % len(texts)]  # a stride through the corpus, so sessions mix topics
        session = f"old-{i // 50}"
        context = previous if i % 50 else ""
        role = "user" if i % 2 == 0 else "assistant"
        docs.append(RecallDoc(f"m{i}", session, USER, i % 50, role, text, start + timedelta(minutes=i), text, context))
        previous = text
    return docs


def index_for(backend: str, where: Path) -> RecallIndex:
    if backend == "memory":
        return RecallIndex()
    from convmem.stores.sqlite.longterm import SQLiteRecallStore

    return RecallIndex(store=SQLiteRecallStore(where / "recall.db"), lexical="store")


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1e6


def run(size: int, backend: str, turns: int, texts: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="convmem-recall-turns-") as tmp:
        index = index_for(backend, Path(tmp))
        docs = archive(size, texts)
        started = time.perf_counter()
        for begin in range(0, size, 5000):
            index.add(docs[begin : begin + 5000])
        built = time.perf_counter() - started
        plain = Memory(max_tokens=BUDGET, user_id=USER)
        recall = Memory(max_tokens=BUDGET, user_id=USER, blocks=[RecallBlock(index)], sinks=[index])
        memories = (plain, recall)
        streams = (workload(texts), workload(texts))
        for memory, steps in zip(memories, streams, strict=True):
            filled = 0
            while filled < 1000:  # a full window: the recall memory has begun to archive into the index
                step = next(steps)
                memory.add_many(step)
                filled += len(step)
        samples: tuple[list[float], list[float], list[float]] = ([], [], [])
        gc.collect()
        for _ in range(turns):
            for memory, steps, out in zip(memories, streams, samples, strict=False):
                step = next(steps)
                start = time.perf_counter()
                memory.add_many(step)
                memory.context()
                out.append(time.perf_counter() - start)
            start = time.perf_counter()
            recall.context()  # the same input again: the block is kept, not searched again
            samples[2].append(time.perf_counter() - start)
        hits = len(recall.context().account.blocks)
        index_size = index.count(user_id=USER)
        plain.close()
        recall.close()
        if index.store is not None:
            index.store.close()  # type: ignore[attr-defined]
    return {
        "plain": p50(samples[0]),
        "recall": p50(samples[1]),
        "recall_p99": p99(samples[1]),
        "again": p50(samples[2]),
        "built_s": built,
        "docs": index_size,
        "blocks": hits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--backends", default="memory,fts5")
    args = parser.parse_args()
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo data not found at {LOCOMO}")
    texts = locomo_texts()
    print(f"workload: {len(texts)} LoCoMo turns, budget {BUDGET} tokens, {args.turns} timed turns, interleaved\n")
    print(
        f"{'archived':>8} | {'backend':<7} | {'plain p50 us':>12} | {'recall p50 us':>13} | {'recall p99 us':>13} | "
        f"{'recall/plain':>12} | {'2nd context() us':>16} | {'index build s':>13}"
    )
    for size in [int(s) for s in args.sizes.split(",")]:
        for backend in args.backends.split(","):
            r = run(size, backend, args.turns, texts)
            print(
                f"{size:>8} | {backend:<7} | {r['plain']:>12.1f} | {r['recall']:>13.1f} | {r['recall_p99']:>13.1f} | "
                f"{r['recall'] / r['plain']:>11.2f}x | {r['again']:>16.1f} | {r['built_s']:>13.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
