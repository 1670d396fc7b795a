"""How much QA evidence the extractive summarizer keeps, against a lead-N baseline of the same size.

Each LoCoMo session is treated as one eviction: its turns (speaker A as the
user, speaker B as the assistant, each with their name) are folded by
``ExtractiveSummarizer`` into a summary capped at a fraction of the session's
tokens. The baseline, lead-N, keeps the session's first turns (``Name: text``)
up to the same token count as the extractive summary. For every turn of the
session that a QA item cites as evidence, we take its *key content words*
(the up to 5 non-stopword words of the turn that are rarest in the
conversation) and call the turn kept when at least half of them appear in
the summary. The data is read in place and never copied.

Usage::

    .venv/bin/python bench/extractive.py [path/to/locomo_dev.json]
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from convmem import Message
from convmem.llm import ExtractiveSummarizer
from convmem.llm._render import split_to_fit
from convmem.llm.extractive import _STOP
from convmem.tokens import counter_for

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"
RATIOS = (0.1, 0.2, 0.3)
KEY_WORDS = 5
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and (len(w) > 2 or w.isdigit())]


def sessions(sample: dict[str, Any]) -> list[tuple[int, list[dict[str, str]]]]:
    conversation = sample["conversation"]
    out = []
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(turns, list) and turns:
            out.append((int(match.group(1)), turns))
    return sorted(out)


def lead(lines: list[str], budget: int, count: Any) -> str:
    """The session's first lines, the last one cut by tokens, to exactly ``budget`` tokens (or just under)."""
    text = "\n".join(lines)
    if count(text) <= budget:
        return text
    head, _ = split_to_fit(count, text, budget)
    return head


def measure(
    data: list[dict[str, Any]], ratios: tuple[float, ...] = RATIOS
) -> tuple[dict[float, Counter[str]], list[float]]:
    """Tallies per cap ratio (sessions, tokens, evidence turns kept by each method) and summarize() timings."""
    counter = counter_for("gpt-4o")
    summarizer = ExtractiveSummarizer(counter.count_text)
    results = {ratio: Counter[str]() for ratio in ratios}
    timings: list[float] = []
    for sample in data:
        turns_by_id = {t["dia_id"]: t for _, turns in sessions(sample) for t in turns}
        df = Counter(w for t in turns_by_id.values() for w in set(words(t["text"])))
        speaker_a = sample["conversation"]["speaker_a"]
        evidence = {e for qa in sample["qa"] for e in qa.get("evidence", []) if e in turns_by_id}
        for _, turns in sessions(sample):
            messages = [
                Message(
                    role="user" if t["speaker"] == speaker_a else "assistant",
                    content=t["text"],
                    name=re.sub(r"[^A-Za-z0-9_-]", "_", t["speaker"]),
                    id=t["dia_id"],
                )
                for t in turns
            ]
            lines = [f"{m.name}: {m.text}" for m in messages]
            session_tokens = counter.count_text("\n".join(lines))
            cited = [t for t in turns if t["dia_id"] in evidence]
            for ratio in ratios:
                cap = max(64, int(session_tokens * ratio))
                started = time.perf_counter()
                summary = summarizer.summarize(None, messages, cap)
                timings.append(time.perf_counter() - started)
                size = counter.count_text(summary)
                baseline = lead(lines, size, counter.count_text)
                got = {"extractive": set(words(summary)), "lead": set(words(baseline))}
                tally = results[ratio]
                tally["sessions"] += 1
                tally["session_tokens"] += session_tokens
                tally["summary_tokens"] += size
                tally["lead_tokens"] += counter.count_text(baseline)
                for turn in cited:
                    vocabulary = sorted(set(words(turn["text"])), key=lambda w: (df[w], w))[:KEY_WORDS]
                    if not vocabulary:
                        continue
                    tally["evidence"] += 1
                    for name, present in got.items():
                        hits = sum(w in present for w in vocabulary)
                        tally[f"{name}_kept"] += hits >= math.ceil(len(vocabulary) / 2)
                        tally[f"{name}_recall_x1000"] += round(1000 * hits / len(vocabulary))
    return results, timings


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    if not path.exists():
        sys.exit(f"LoCoMo data not found at {path}; pass its path")
    data = json.loads(path.read_text())
    results, timings = measure(data)
    print(
        f"LoCoMo: {len(data)} conversations, {results[RATIOS[0]]['sessions']} sessions, key words per turn: {KEY_WORDS}"
    )
    print()
    print(
        "| cap (of session tokens) | evidence turns | extractive kept | lead-N kept | extractive key-word recall "
        "| lead-N key-word recall | mean summary tokens | mean lead tokens |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for ratio in RATIOS:
        t = results[ratio]
        n, s = t["evidence"], t["sessions"]
        print(
            f"| {ratio:.0%} | {n} | {t['extractive_kept'] / n:.1%} | {t['lead_kept'] / n:.1%} "
            f"| {t['extractive_recall_x1000'] / n / 1000:.1%} | {t['lead_recall_x1000'] / n / 1000:.1%} "
            f"| {t['summary_tokens'] / s:.0f} | {t['lead_tokens'] / s:.0f} |"
        )
    timings.sort()
    print()
    print(
        f"summarize() per session: median {timings[len(timings) // 2] * 1000:.1f} ms, max {timings[-1] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
