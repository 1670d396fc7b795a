"""Turn retrieval on LoCoMo: recall@k of lexical, dense and hybrid recall, with latency.

For each conversation of ../shared/data/locomo/locomo_dev.json (read in place, never copied), every
turn is added to a ``Memory`` whose ``RecallIndex`` sink indexes what the memory archives. A turn's
content is prefixed with its speaker ("Caroline: ...") and, for a shared photo, followed by its caption
("[shares a photo of ...]", as LoCoMo's own retrieval input does); its ``created_at`` is its session's
date. Each conversation is its own user, so nothing is retrieved across conversations.

Every question is then asked of the archive. Recall@k is LoCoMo's own: the fraction of the question's
evidence dia_ids among the top k turns, averaged over questions (questions without a parseable evidence
id are skipped and counted). Categories as the official scorer reads them: 1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial.

The anchor is the LoCoMo paper's turn retrieval with DRAGON: R@5 58.8, R@10 67.5, R@25 79.9.

``--latency`` instead times top-10 search over 100k archived messages (lexical; texts sampled from
LoCoMo turns) and over 100k random 384-d unit vectors (dense).

Run:  .venv/bin/python bench/locomo_recall.py [--embedder minilm|hashing|none] [--keys speaker,date]
      .venv/bin/python bench/locomo_recall.py --latency
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from convmem import Memory, Message
from convmem.longterm._partition import RecallDoc
from convmem.longterm.embedders import Embedder, HashingEmbedder
from convmem.longterm.recall import Keys, Mode, RecallIndex
from convmem.stores.sqlite.longterm import SQLiteRecallStore

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo_dev.json"
KS = (1, 5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANCHOR = {"R@5": 58.8, "R@10": 67.5, "R@25": 79.9}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def evidence_ids(raw: list[Any]) -> set[str]:
    """Lenient parsing: split on ';' and whitespace, read 'D8:6', 'D:11:26', 'D30:05'; skip the rest."""
    ids = set()
    for item in raw:
        for piece in re.split(r"[;\s,]+", str(item)):
            match = _EVIDENCE.fullmatch(piece.strip())
            if match:
                ids.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return ids


def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC; LoCoMo gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def turns(sample: dict[str, Any]) -> list[tuple[str, Message]]:
    """(dia_id, message) for every turn of one conversation, in order."""
    conversation = sample["conversation"]
    speaker_a = conversation["speaker_a"]
    numbers = sorted(int(k.split("_")[1]) for k in conversation if re.fullmatch(r"session_\d+", k) and conversation[k])
    out = []
    for number in numbers:
        start = session_date(conversation[f"session_{number}_date_time"])
        for i, turn in enumerate(conversation[f"session_{number}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == speaker_a else "assistant"
            message = Message(role=role, content=text, created_at=start + timedelta(seconds=i))
            out.append((str(turn["dia_id"]), message))
    return out


def archive(data: list[dict[str, Any]], recall: RecallIndex) -> tuple[dict[str, str], float]:
    """Add every conversation to a Memory that archives into ``recall``; returns message id -> dia_id."""
    dia: dict[str, str] = {}
    began = time.perf_counter()
    for sample in data:
        memory = Memory(
            max_tokens=100_000,
            user_id=sample["sample_id"],
            strategy="sliding_window",
            strategy_options={"max_messages": 1},
            sinks=[recall],
        )
        pairs = turns(sample)
        by_session: dict[str, list[tuple[str, Message]]] = defaultdict(list)
        for dia_id, message in pairs:
            by_session[dia_id.split(":")[0]].append((dia_id, message))
        for batch in by_session.values():  # one add per session: eviction (and embedding) in one chunk
            stored = memory.add_many([m for _, m in batch])
            dia.update({s.id or "": d for s, (d, _) in zip(stored, batch, strict=True)})
        memory.clear()  # archives the newest turn too
        memory.close()
    recall.flush()
    return dia, time.perf_counter() - began


def evaluate(data: list[dict[str, Any]], recall: RecallIndex, dia: dict[str, str], mode: Mode) -> dict[str, Any]:
    scores: dict[str, list[list[float]]] = defaultdict(list)
    latencies = []
    skipped = 0
    for sample in data:
        for qa in sample["qa"]:
            gold = evidence_ids(qa.get("evidence", []))
            if not gold:
                skipped += 1
                continue
            began = time.perf_counter()
            hits = recall.search(qa["question"], user_id=sample["sample_id"], k=max(KS), mode=mode)
            latencies.append(time.perf_counter() - began)
            ranked = [dia[h.doc.message_id] for h in hits]
            row = [len(gold & set(ranked[:k])) / len(gold) for k in KS]
            scores["overall"].append(row)
            scores[CATEGORIES.get(int(qa["category"]), str(qa["category"]))].append(row)
    table = {name: [100 * statistics.fmean(col) for col in zip(*rows, strict=True)] for name, rows in scores.items()}
    counts = {name: len(rows) for name, rows in scores.items()}
    ms = sorted(1000 * t for t in latencies)
    return {
        "table": table,
        "counts": counts,
        "skipped": skipped,
        "p50_ms": ms[len(ms) // 2],
        "p99_ms": ms[int(len(ms) * 0.99)],
    }


def print_tables(results: dict[str, dict[str, Any]], embedder: str, keys: str, archive_s: float) -> None:
    any_result = next(iter(results.values()))
    print(
        f"embedder: {embedder}; keys: {keys or 'text'}; questions scored: {any_result['counts']['overall']}"
        f" (skipped without evidence: {any_result['skipped']}); archive + index: {archive_s:.1f} s\n"
    )
    print("| mode | R@1 | R@5 | R@10 | R@25 | query p50 | query p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, result in results.items():
        row = result["table"]["overall"]
        print(
            f"| {mode} | "
            + " | ".join(f"{v:.1f}" for v in row)
            + f" | {result['p50_ms']:.2f} ms | {result['p99_ms']:.2f} ms |"
        )
    print("| DRAGON (paper, all 10 samples) | | 58.8 | 67.5 | 79.9 | | |")
    print()
    names = [CATEGORIES[c] for c in sorted(CATEGORIES)]
    print("| mode | " + " | ".join(f"{n} (n={any_result['counts'].get(n, 0)}) R@5 / R@10 / R@25" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for mode, result in results.items():
        cells = []
        for name in names:
            row = result["table"].get(name)
            cells.append(" / ".join(f"{v:.1f}" for v in row[1:]) if row else "-")
        print(f"| {mode} | " + " | ".join(cells) + " |")


def make_embedder(name: str) -> Embedder | None:
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder(384)
    from convmem.longterm.embedders import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def latency(n: int = 100_000, queries: int = 200) -> None:
    data = json.loads(LOCOMO.read_text())
    texts = [m.text for sample in data for _, m in turns(sample)]
    questions = [qa["question"] for sample in data for qa in sample["qa"]]
    rng = random.Random(7)
    recall = RecallIndex()
    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    began = time.perf_counter()
    docs = []
    for i in range(n):  # each message joins two random turns, so the vocabulary statistics stay natural
        text = f"{rng.choice(texts)} {rng.choice(texts)}"
        docs.append(RecallDoc(f"m{i}", f"s{i // 500}", "u", i % 500, "user", text, start + timedelta(minutes=i), text))
    recall.add(docs)
    build = time.perf_counter() - began

    def timed(fn: Any) -> tuple[float, float]:
        ms = []
        for q in range(queries):
            t = time.perf_counter()
            fn(q)
            ms.append(1000 * (time.perf_counter() - t))
        ms.sort()
        return ms[len(ms) // 2], ms[int(len(ms) * 0.99)]

    lex = timed(lambda q: recall.search(questions[q % len(questions)], user_id="u", k=10))
    lex_f = timed(
        lambda q: recall.search(
            questions[q % len(questions)], user_id="u", k=10, session_id="s7", roles=("user",), since=start
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteRecallStore(Path(tmp) / "latency.db")
        fts = RecallIndex(store=store)
        began = time.perf_counter()
        fts.add(docs)
        fts_build = time.perf_counter() - began
        fts_lat = timed(lambda q: fts.search(questions[q % len(questions)], user_id="u", k=10))
        store.close()
    partition = recall._partitions["u"]
    vectors = np.random.default_rng(7).standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    partition.set_vectors("random-384", list(range(n)), vectors)
    probes = np.random.default_rng(8).standard_normal((queries, 384)).astype(np.float32)
    dense = timed(lambda q: partition.dense_top(probes[q], 10, None))
    print(f"{n:,} archived messages, one user; lexical index built in {build:.1f} s ({n / build:,.0f} messages/s)\n")
    print("| search (top-10) | p50 | p99 |")
    print("|---|---:|---:|")
    print(f"| lexical BM25, {n:,} messages | {lex[0]:.2f} ms | {lex[1]:.2f} ms |")
    print(
        f"| lexical BM25, {n:,} messages, with session + role + time filters | {lex_f[0]:.2f} ms | {lex_f[1]:.2f} ms |"
    )
    print(
        f"| lexical SQLite FTS5 BM25, {n:,} messages (built in {fts_build:.1f} s) "
        f"| {fts_lat[0]:.2f} ms | {fts_lat[1]:.2f} ms |"
    )
    print(f"| dense exact (numpy), {n:,} x 384 float32 | {dense[0]:.2f} ms | {dense[1]:.2f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", choices=["minilm", "hashing", "none"], default="minilm")
    parser.add_argument("--keys", default="context", help="comma-separated key enrichments: context, speaker, date")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo not found at {LOCOMO}")
    if args.latency:
        latency()
        return
    wanted = {k for k in args.keys.split(",") if k}
    keys = Keys(speaker="speaker" in wanted, date="date" in wanted, context="context" in wanted)
    embedder = make_embedder(args.embedder)
    recall = RecallIndex(embedder=embedder, keys=keys, batch_size=128)
    data = json.loads(LOCOMO.read_text())
    dia, archive_s = archive(data, recall)
    results = {"lexical (in-process BM25)": evaluate(data, recall, dia, "lexical")}
    with tempfile.TemporaryDirectory() as tmp:  # the same archive through the SQLite store's FTS5 index
        fts = RecallIndex(keys=keys, store=SQLiteRecallStore(Path(tmp) / "recall.db"))
        fts_dia, _ = archive(data, fts)
        results["lexical (SQLite FTS5 BM25)"] = evaluate(data, fts, fts_dia, "lexical")
        fts.store.close()  # type: ignore[union-attr]
    if embedder is not None:
        results["dense"] = evaluate(data, recall, dia, "dense")
        for label, fusion, k, weights in (
            ("hybrid: z-score fusion, equal weights (default)", "zscore", 0.0, (1.0, 1.0)),
            ("hybrid: RRF k=10, dense weight 0.5", "rrf", 10.0, (1.0, 0.5)),
            ("hybrid: RRF k=60, equal weights (textbook)", "rrf", 60.0, (1.0, 1.0)),
        ):
            recall.fusion, recall.rrf_k, recall.weights = fusion, k, weights  # type: ignore[assignment]
            results[label] = evaluate(data, recall, dia, "hybrid")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_tables(results, embedder.name if embedder else "none", args.keys, archive_s)


if __name__ == "__main__":
    main()
