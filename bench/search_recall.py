"""Recall on LoCoMo when the servers search: the same archive and questions as bench/locomo_recall.py.

Every turn of the LoCoMo dev set (read in place from ../shared/data/locomo, never copied here) is archived
through a real ``Memory`` into a ``RecallIndex`` on each path, then every question is asked of its
conversation's archive (``bench/locomo_recall.py`` does the archiving and the scoring: LoCoMo's recall@k).
The embedder is ``HashingEmbedder(384)`` (MiniLM needs torch); nothing here is tuned, so each figure is also
its own held-out figure; the spread over the five conversations is shown as min-max of R@10.

Paths: in process (the reference: BM25 and exact numpy); PostgreSQL 15 without pgvector (today's store path:
``tsvector`` lexical in the server, dense in process); PostgreSQL 18 + pgvector (both in the server); Redis
8.2 + RediSearch (both in the server). The two search servers are started here, as in bench/search.py.

Paths also take ``fts5`` (the SQLite store: FTS5 lexical in SQLite, dense in process).

Run:  .venv/bin/python bench/search_recall.py [memory,pg-fallback,pgvector,redisearch,fts5] [lexical,dense,hybrid]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _cv import KS  # noqa: E402
from _locomo import archive, evidence_ids  # noqa: E402
from convmem.longterm.recall.embedders import HashingEmbedder  # noqa: E402
from convmem.longterm.recall.index import RecallIndex  # noqa: E402
from search import LOCOMO, PG_URL, drop, open_store  # noqa: E402


def per_conversation(data: list[dict[str, Any]], recall: RecallIndex, dia: dict[str, str], mode: str) -> Any:
    rows: dict[str, list[list[float]]] = defaultdict(list)
    for sample in data:
        for qa in sample["qa"]:
            gold = evidence_ids(qa.get("evidence", []))
            if not gold:
                continue
            hits = recall.search(qa["question"], user_id=sample["sample_id"], k=max(KS), mode=mode)  # type: ignore[arg-type]
            ranked = [dia[h.doc.message_id] for h in hits]
            rows[sample["sample_id"]].append([len(gold & set(ranked[:k])) / len(gold) for k in KS])
    every = [r for conv in rows.values() for r in conv]
    overall = [100 * statistics.fmean(col) for col in zip(*every, strict=True)]
    r10 = [100 * statistics.fmean(r[KS.index(10)] for r in conv) for conv in rows.values()]
    return overall, (min(r10), max(r10))


def main() -> None:
    from tests.stores._search_servers import PgVectorServer, SearchRedis

    paths = sys.argv[1].split(",") if len(sys.argv) > 1 else ["memory", "pg-fallback", "pgvector", "redisearch"]
    modes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["lexical", "dense", "hybrid"]
    data = json.loads(LOCOMO.read_text())
    temp = Path(tempfile.mkdtemp(prefix="convmem-search-recall-"))
    pg, rd = PgVectorServer(temp / "pg"), SearchRedis(temp / "redis")
    urls = {"pgvector": pg.url, "redisearch": rd.url, "pg-fallback": PG_URL}
    print("| path | mode | R@1 | R@5 | R@10 | R@25 | R@10 per conversation (min-max) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    try:
        for path in paths:
            store = None
            if path != "memory":
                drop(path, urls, temp)
                store = open_store(path, urls, temp)
            recall = RecallIndex(store=store, embedder=HashingEmbedder(384))
            dia = archive(data, recall)
            for mode in modes:
                overall, spread = per_conversation(data, recall, dia, mode)
                cells = " | ".join(f"{v:.1f}" for v in overall)
                print(f"| {path} | {mode} | {cells} | {spread[0]:.1f}-{spread[1]:.1f} |", flush=True)
            if path != "memory":
                drop(path, urls, temp)
    finally:
        pg.stop()
        rd.stop()


if __name__ == "__main__":
    main()
