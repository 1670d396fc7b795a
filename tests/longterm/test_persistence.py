"""Long-term memory persists in every store: facts, working blocks and recall survive a reopen."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from convmem import Memory
from convmem.errors import ConflictError, StoreError
from convmem.longterm import WorkingBlock
from convmem.longterm.blocks.store import BlockStore, MemoryBlockStore
from convmem.longterm.facts.book import Facts
from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.index import RecallDoc, RecallIndex
from convmem.longterm.recall.ranking import Tuning
from convmem.stores.files import FileStore
from convmem.stores.files.longterm import FileBlockStore, FileFactStore, FileRecallStore
from convmem.stores.sqlite import SQLiteStore
from convmem.stores.sqlite.longterm import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore, fts_query

from .embedders import FlakyEmbedder

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)

BLOCK_STORES: dict[str, Callable[[Path], BlockStore]] = {
    "memory": lambda _: MemoryBlockStore(),
    "sqlite": lambda tmp: SQLiteBlockStore(tmp / "db.sqlite"),
    "files": lambda tmp: FileBlockStore(tmp / "files"),
}
REOPENABLE: dict[str, Callable[[Path], Any]] = {
    "sqlite": lambda tmp: SQLiteStore(tmp / "db.sqlite"),
    "files": lambda tmp: FileStore(tmp / "files"),
}


@pytest.mark.parametrize("kind", sorted(BLOCK_STORES))
def test_block_store_contract(kind: str, tmp_path: Path) -> None:
    store = BLOCK_STORES[kind](tmp_path)
    block = WorkingBlock("persona", "terse", store=store, scope="alice", max_tokens=50, priority=0)
    block.append("likes tea")
    twin = WorkingBlock("persona", "ignored", store=store, scope="alice")
    assert twin.value == "terse\nlikes tea"
    assert twin.version == 2
    block.replace("tea", "coffee")
    with pytest.raises(ConflictError):
        twin.update("stale write")
    twin.reload()
    assert twin.value == "terse\nlikes coffee"
    WorkingBlock("persona", "bob's own", store=store, scope="bob")
    WorkingBlock("notes", "n", store=store, scope=None)
    assert [(r.name, r.value) for r in store.list_blocks("bob")] == [("persona", "bob's own")]
    assert [(r.name, r.version) for r in store.list_blocks(None)] == [("notes", 1)]
    record = store.load_block("alice", "persona")
    assert record is not None
    assert (record.priority, record.max_tokens) == (0, 50)


@pytest.mark.parametrize("kind", sorted(REOPENABLE))
def test_everything_survives_a_reopen(kind: str, tmp_path: Path) -> None:
    def open_all() -> tuple[Any, Facts, Any, RecallIndex]:
        store = REOPENABLE[kind](tmp_path)
        if kind == "sqlite":
            facts, blocks, recall_store = SQLiteFactStore(store), SQLiteBlockStore(store), SQLiteRecallStore(store)
        else:
            facts, blocks, recall_store = FileFactStore(store), FileBlockStore(store), FileRecallStore(store)
        recall = RecallIndex(store=recall_store, embedder=HashingEmbedder(64))
        return store, Facts(facts), blocks, recall

    store, facts, blocks, recall = open_all()
    memory = Memory(
        max_tokens=2000,
        store=store,
        user_id="alice",
        session_id="s1",
        strategy="sliding_window",
        strategy_options={"max_messages": 2},
        sinks=[recall],
    )
    for text in ["My locker code is 4812.", "Noted.", "It rains.", "Indeed.", "bye"]:
        memory.add({"role": "user", "content": text})
    fact = facts.add("Alice lives in Lisbon", user_id="alice", valid_from=T0)
    facts.update(fact.id, "Alice lives in Porto", user_id="alice", valid_from=T0 + timedelta(days=5))
    WorkingBlock("persona", "terse", store=blocks, scope="alice").append("likes tea")
    before = [(h.doc.message_id, round(h.score, 4)) for h in recall.search("locker code", user_id="alice", k=3)]
    store.close()

    store, facts, blocks, recall = open_all()
    assert [(h.doc.message_id, round(h.score, 4)) for h in recall.search("locker code", user_id="alice", k=3)] == before
    assert recall.pending() == 0  # vectors came back from the store: nothing re-embedded
    assert recall.search("locker", user_id="bob") == []
    assert [f.text for f in facts.facts(user_id="alice", valid_at=T0 + timedelta(days=1))] == ["Alice lives in Lisbon"]
    assert [f.text for f in facts.facts(user_id="alice")] == ["Alice lives in Porto"]
    assert WorkingBlock("persona", "x", store=blocks, scope="alice").value == "terse\nlikes tea"
    reopened = Memory.open(
        "s1",
        store=store,
        user_id="alice",
        max_tokens=2000,
        sinks=[recall],
        strategy="sliding_window",
        strategy_options={"max_messages": 2},
    )
    reopened.add({"role": "user", "content": "one more"})
    reopened.add({"role": "user", "content": "and another"})
    hits = recall.search("bye", user_id="alice", k=1)
    assert hits[0].doc.text == "bye"
    assert hits[0].doc.context == "Indeed."  # the session's previous turn, restored from the store
    store.close()


def test_sqlite_fts_escapes_any_user_text(tmp_path: Path) -> None:
    store = SQLiteRecallStore(tmp_path / "fts.db")
    docs = [
        RecallDoc(f"m{i}", "s", "u", i, "user", t, T0, t)
        for i, t in enumerate(['he said "NEAR" twice', "star * power", "(unbalanced", "plain words here"])
    ]
    recall = RecallIndex(store=store, tuning=Tuning(neighbour=0.0))  # the FTS hits alone, no session neighbours
    recall.add(docs)
    for query in ['"', 'NEAR("a" "b")', "*", "((", ")", "a AND", "OR OR", "col:val", "^start", "-x", "'", ""]:
        recall.search(query, user_id="u")
        store.lexical_search(query, user_id="u", limit=5)
    assert fts_query("the a of") is None
    assert fts_query('say "hi"') == '"say" OR "hi"'
    assert [h.doc.message_id for h in recall.search('NEAR "near"', user_id="u")] == ["m0"]
    assert [h.doc.message_id for h in recall.search("(unbalanced", user_id="u")] == ["m2"]
    assert recall.search("plain", user_id="other") == []
    store.close()


def test_sqlite_lexical_filters_and_isolation(tmp_path: Path) -> None:
    recall = RecallIndex(store=SQLiteRecallStore(tmp_path / "r.db"))
    docs = [
        RecallDoc(
            f"m{i}",
            "s1" if i % 2 else "s2",
            "alice" if i < 6 else "bob",
            i,
            "user" if i % 3 else "assistant",
            f"puppy note {i}",
            T0 + timedelta(days=i),
            f"puppy note {i}",
        )
        for i in range(10)
    ]
    recall.add(docs)
    ids = {h.doc.message_id for h in recall.search("puppy", user_id="alice", k=20)}
    assert ids == {f"m{i}" for i in range(6)}
    assert {h.doc.message_id for h in recall.search("puppy", user_id="alice", k=20, session_id="s1")} == {
        "m1",
        "m3",
        "m5",
    }
    assert {h.doc.message_id for h in recall.search("puppy", user_id="alice", k=20, roles=["assistant"])} == {
        "m0",
        "m3",
    }
    assert {h.doc.message_id for h in recall.search("puppy", user_id="bob", since=T0 + timedelta(days=8))} == {
        "m8",
        "m9",
    }


def test_vectors_missing_at_archive_are_stored_when_retried(tmp_path: Path) -> None:
    embedder = FlakyEmbedder("raise")
    store = SQLiteRecallStore(tmp_path / "v.db")
    recall = RecallIndex(store=store, embedder=embedder)
    with pytest.raises(Exception, match="unreachable"):
        recall.add([RecallDoc("m1", "s", "u", 0, "user", "hello world", T0, "hello world")])
    assert store.load_docs("u")[0].message_id == "m1"  # the document is stored; only its vector is missing
    assert store.load_vectors("u", "flaky")[0] == []
    embedder.broken = False
    assert recall.flush() == 1
    assert store.load_vectors("u", "flaky")[0] == [("s", "m1")]


def test_file_store_reports_a_corrupt_log(tmp_path: Path) -> None:
    facts = FileFactStore(tmp_path)
    Facts(facts).add("x", user_id="u")
    path = tmp_path / "longterm" / "facts.jsonl"
    path.write_bytes(path.read_bytes() + b"{not json}\n")
    with pytest.raises(StoreError, match="line 2 is corrupt"):
        FileFactStore(tmp_path).list_facts(user_id="u")
    path.write_bytes(path.read_bytes()[: -len(b"{not json}\n")] + b'{"torn')  # a crashed writer's partial line
    reader = FileFactStore(tmp_path)
    assert [f.text for f in reader.list_facts(user_id="u")] == ["x"]
    Facts(reader).add("y", user_id="u")  # the next writer cuts the torn tail
    assert [f.text for f in FileFactStore(tmp_path).list_facts(user_id="u")] == ["x", "y"]
