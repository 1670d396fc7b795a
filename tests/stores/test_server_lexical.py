"""Lexical search inside SQLite (FTS5) and PostgreSQL (tsvector): scoped to the user, and words pruned.

A search matches only the rarest query words whose documents fit ``MATCH_BUDGET``, and ranks with the
store's own scoring; these tests check it finds what the unpruned search finds first, never another user's
rows, and that a common word no longer decides which documents are scored.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from convmem.longterm.recall import lexical
from convmem.longterm.recall.index import RecallDoc
from convmem.longterm.recall.lexical import pick_terms
from convmem.stores.postgres import PostgresStore
from convmem.stores.postgres.longterm import PostgresRecallStore
from convmem.stores.sqlite.longterm import SQLiteRecallStore

from ._servers import PG_URL, drop_schemas, schema_for

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_pick_terms_keeps_the_rarest_that_fit() -> None:
    assert pick_terms([("a", 500), ("b", 3), ("c", 40)], budget=100) == ["b", "c"]
    assert pick_terms([("a", 500), ("b", 300)], budget=100) == ["b"]  # the rarest always stays
    assert pick_terms([("a", 5), ("b", 3)], budget=100) == ["b", "a"]  # all fit: nothing pruned
    assert pick_terms([], budget=100) == []
    assert pick_terms([("x", 60), ("y", 60)], budget=100) == ["x"]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        opened: Any = SQLiteRecallStore(tmp_path / "r.db")
        yield opened
        opened.close()
    else:
        pg = PostgresStore(PG_URL, schema=schema_for(tmp_path))
        yield PostgresRecallStore(pg)
        pg.close()
        drop_schemas({schema_for(tmp_path)})


def archive(user: str | None, n: int, tag: str) -> list[RecallDoc]:
    """``n`` documents holding "caroline" and "said"; every tenth also "violin"; one "violin telescope"."""
    docs = []
    for i in range(n):
        extra = " violin" if i % 10 == 0 else ""
        extra += " violin telescope" if i == 7 else ""
        text = f"caroline said {tag}{i} item{i % 7}{extra}"
        docs.append(RecallDoc(f"{tag}{i}", "s", user, i, "user", text, T0, text))
    return docs


def test_common_words_are_pruned_and_the_best_documents_still_come_first(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save_docs(archive("u", 200, "u") + archive("v", 200, "v"))
    query = "What did Caroline say about the violin and the telescope?"
    full = store.lexical_search(query, user_id="u", limit=5)
    monkeypatch.setattr(lexical, "MATCH_BUDGET", 25)  # "caroline" and "say" (200 each) no longer fit
    pruned = store.lexical_search(query, user_id="u", limit=50)
    assert full[0][0] == pruned[0][0] == ("s", "u7")  # the only document with both rare words
    assert {ref for ref, _ in pruned} == {("s", f"u{i}") for i in range(0, 200, 10)} | {("s", "u7")}
    assert [ref for ref, _ in full] == [ref for ref, _ in pruned[:5]]  # same scores, same order
    # Unpruned, the common words match every document of the user (and never the other user's).
    monkeypatch.setattr(lexical, "MATCH_BUDGET", 10**9)
    everything = store.lexical_search(query, user_id="u", limit=1000)
    assert {ref for ref, _ in everything} == {("s", f"u{i}") for i in range(200)}


def test_lexical_search_never_returns_another_users_rows(store: Any) -> None:
    users: list[str | None] = ["u", "v", "u ", None, "U", "w"]
    for user in users:
        store.save_docs(archive(user, 30, f"{user}-"))
    for user in [*users, "nobody"]:
        own = {("s", f"{user}-{i}") for i in range(30)} if user != "nobody" else set()
        for query in ["caroline", "violin telescope", "item3 said", "None-7 u-7 v-7 w-7", "zzz", ""]:
            for limit in (1, 10, 100):
                hits = store.lexical_search(query, user_id=user, limit=limit)
                assert {ref for ref, _ in hits} <= own, (user, query)
        if user != "nobody":
            assert {ref for ref, _ in store.lexical_search("caroline", user_id=user, limit=100)} == own


def test_postgres_keeps_each_users_document_count_exact_through_repeats_and_concurrent_writers(
    tmp_path: Path,
) -> None:
    """The count lexical search scales its word sample by (``recall_user_counts``, kept by a trigger) equals
    count(*) of the user's rows: repeated documents are not counted twice, and writers racing on one user
    lose no increment."""
    import threading

    import psycopg

    schema = schema_for(tmp_path)
    stores = [PostgresRecallStore(PostgresStore(PG_URL, schema=schema)) for _ in range(4)]
    try:
        docs = archive("alice", 120, "a") + archive("bob", 30, "b") + archive(None, 7, "n")
        stores[0].save_docs(docs[:50])
        stores[0].save_docs(docs[:80])  # 50 repeats, 30 new

        def write(store: Any, part: list[RecallDoc]) -> None:
            for start in range(0, len(part), 5):
                store.save_docs(part[start : start + 5])

        threads = [threading.Thread(target=write, args=(s, docs[i::4])) for i, s in enumerate(stores)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with psycopg.connect(PG_URL, options=f"-c search_path={schema}") as conn:
            kept = dict(conn.execute("SELECT user_key, docs FROM recall_user_counts").fetchall())
            counted = dict(conn.execute("SELECT user_key, count(*) FROM recall_docs GROUP BY 1").fetchall())
        assert kept == counted
        assert sorted(counted.values()) == [7, 30, 120]
        assert stores[1].count_docs("alice") == 120
    finally:
        for store in stores:
            store.close()
        drop_schemas({schema})
