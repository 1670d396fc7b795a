"""Long-term memory on the server backends: facts, working blocks and recall persist and stay per user.

The same checks as the SQLite and file stores' (``tests/longterm/test_persistence.py``), run against the
real PostgreSQL and Redis, each test in its own schema or key prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from convmem import Memory
from convmem.errors import ConflictError
from convmem.longterm import WorkingBlock
from convmem.longterm.facts.book import Facts
from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.index import RecallDoc, RecallIndex
from convmem.stores.postgres import PostgresStore
from convmem.stores.postgres.longterm import PostgresBlockStore, PostgresFactStore, PostgresRecallStore
from convmem.stores.redis import RedisStore
from convmem.stores.redis.longterm import RedisBlockStore, RedisFactStore, RedisRecallStore

from ..longterm.embedders import FlakyEmbedder
from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
BACKENDS = ["postgres", "redis"]


@dataclass
class Opened:
    store: Any
    facts: Any
    blocks: Any
    recall: Any

    def close(self) -> None:
        for part in (self.facts, self.blocks, self.recall, self.store):
            part.close()


def open_all(backend: str, location: Path) -> Opened:
    if backend == "postgres":
        pg = PostgresStore(PG_URL, schema=schema_for(location))
        return Opened(pg, PostgresFactStore(pg), PostgresBlockStore(pg), PostgresRecallStore(pg))
    rd = RedisStore(REDIS_URL, prefix=prefix_for(location))
    return Opened(rd, RedisFactStore(rd), RedisBlockStore(rd), RedisRecallStore(rd))


@pytest.fixture(params=BACKENDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    parts = open_all(request.param, tmp_path)
    yield parts
    parts.close()
    drop_schemas({schema_for(tmp_path)})
    drop_prefixes({prefix_for(tmp_path)})


def test_block_store_contract(opened: Opened) -> None:
    store = opened.blocks
    block = WorkingBlock("persona", "terse", store=store, scope="alice", max_tokens=50, priority=0)
    block.append("likes tea")
    twin = WorkingBlock("persona", "ignored", store=store, scope="alice")
    assert (twin.value, twin.version) == ("terse\nlikes tea", 2)
    block.replace("tea", "coffee")
    with pytest.raises(ConflictError):
        twin.update("stale write")
    twin.reload()
    assert twin.value == "terse\nlikes coffee"
    WorkingBlock("persona", "bob's own", store=store, scope="bob")
    WorkingBlock("notes", "n", store=store, scope=None)
    WorkingBlock("empty-scope", "e", store=store, scope="")
    assert [(r.name, r.value) for r in store.list_blocks("bob")] == [("persona", "bob's own")]
    assert [(r.name, r.version) for r in store.list_blocks(None)] == [("notes", 1)]
    assert [r.name for r in store.list_blocks("")] == ["empty-scope"]
    record = store.load_block("alice", "persona")
    assert record is not None
    assert (record.priority, record.max_tokens) == (0, 50)
    assert store.load_block("alice", "nope") is None


def test_facts_hold_at_their_time_and_a_stale_change_conflicts(opened: Opened) -> None:
    facts = Facts(opened.facts)
    fact = facts.add("Alice lives in Lisbon", user_id="alice", valid_from=T0)
    moved = facts.update(fact.id, "Alice lives in Porto", user_id="alice", valid_from=T0 + timedelta(days=5))
    facts.add("Bob likes tea", user_id="bob", valid_from=T0)
    assert [f.text for f in facts.facts(user_id="alice", valid_at=T0 + timedelta(days=1))] == ["Alice lives in Lisbon"]
    assert [f.text for f in facts.facts(user_id="alice")] == ["Alice lives in Porto"]
    assert [f.text for f in opened.facts.list_facts(user_id="alice")] == [
        "Alice lives in Lisbon",
        "Alice lives in Porto",
    ]
    assert [f.text for f in facts.facts(user_id="bob")] == ["Bob likes tea"]
    stale = opened.facts.list_facts(user_id="alice")[0]  # already ended by the update
    with pytest.raises(ConflictError):
        opened.facts.write_facts([], [stale])
    with pytest.raises(ConflictError):
        opened.facts.write_facts([moved], [])  # its id exists
    with pytest.raises(ConflictError, match="does not exist for user 'bob'"):  # bob cannot end alice's fact
        opened.facts.write_facts([], [dataclasses.replace(moved, user_id="bob", valid_to=T0 + timedelta(days=9))])
    assert [f.valid_to for f in facts.facts(user_id="alice")] == [None]


def test_everything_survives_a_reopen(opened: Opened, tmp_path: Path) -> None:
    backend = "postgres" if isinstance(opened.store, PostgresStore) else "redis"

    def indexes(parts: Opened) -> tuple[Facts, RecallIndex]:
        return Facts(parts.facts), RecallIndex(store=parts.recall, embedder=HashingEmbedder(64))

    facts, recall = indexes(opened)
    options: dict[str, Any] = {
        "max_tokens": 2000,
        "strategy": "sliding_window",
        "strategy_options": {"max_messages": 2},
    }
    memory = Memory(store=opened.store, user_id="alice", session_id="s1", sinks=[recall], **options)
    for text in ["My locker code is 4812.", "Noted.", "It rains.", "Indeed.", "bye"]:
        memory.add({"role": "user", "content": text})
    fact = facts.add("Alice lives in Lisbon", user_id="alice", valid_from=T0)
    facts.update(fact.id, "Alice lives in Porto", user_id="alice", valid_from=T0 + timedelta(days=5))
    WorkingBlock("persona", "terse", store=opened.blocks, scope="alice").append("likes tea")
    before = [(h.doc.message_id, round(h.score, 4)) for h in recall.search("locker code", user_id="alice", k=3)]
    assert before
    again = open_all(backend, tmp_path)
    try:
        facts, recall = indexes(again)
        assert [
            (h.doc.message_id, round(h.score, 4)) for h in recall.search("locker code", user_id="alice", k=3)
        ] == before
        assert recall.pending() == 0  # vectors came back from the store: nothing re-embedded
        assert recall.search("locker", user_id="bob") == []
        assert [f.text for f in facts.facts(user_id="alice", valid_at=T0 + timedelta(days=1))] == [
            "Alice lives in Lisbon"
        ]
        assert WorkingBlock("persona", "x", store=again.blocks, scope="alice").value == "terse\nlikes tea"
        reopened = Memory.open("s1", store=again.store, user_id="alice", sinks=[recall], **options)
        reopened.add({"role": "user", "content": "one more"})
        reopened.add({"role": "user", "content": "and another"})
        hits = recall.search("bye", user_id="alice", k=1)
        assert (hits[0].doc.text, hits[0].doc.context) == ("bye", "Indeed.")  # context restored from the store
    finally:
        again.close()


def test_recall_filters_and_isolation(opened: Opened) -> None:
    recall = RecallIndex(store=opened.recall)
    recall.add(
        [
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
    )
    assert {h.doc.message_id for h in recall.search("puppy", user_id="alice", k=20)} == {f"m{i}" for i in range(6)}
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
    assert recall.search("puppy", user_id=None) == []


def test_any_user_text_is_a_safe_query(opened: Opened) -> None:
    recall = RecallIndex(store=opened.recall)
    texts = ['he said "NEAR" twice', "star * power", "(unbalanced", "plain words here", "O'Neil's back\\slash"]
    # One session each: neighbouring turns would join the results (a ranking step), and this test checks one thing.
    recall.add([RecallDoc(f"m{i}", f"s{i}", "u", i, "user", t, T0, t) for i, t in enumerate(texts)])
    for query in [
        '"',
        'NEAR("a" "b")',
        "*",
        "((",
        ")",
        "a AND",
        "OR OR",
        "col:val",
        "^start",
        "-x",
        "'",
        "",
        "a:* & !b",
    ]:
        recall.search(query, user_id="u")
        if hasattr(opened.recall, "lexical_search"):
            opened.recall.lexical_search(query, user_id="u", limit=5)
    assert [h.doc.message_id for h in recall.search('NEAR "near"', user_id="u")] == ["m0"]
    assert [h.doc.message_id for h in recall.search("(unbalanced", user_id="u")] == ["m2"]
    assert [h.doc.message_id for h in recall.search("O'Neil", user_id="u")] == ["m4"]
    assert recall.search("plain", user_id="other") == []


def test_vectors_missing_at_archive_are_stored_when_retried(opened: Opened) -> None:
    embedder = FlakyEmbedder("raise")
    recall = RecallIndex(store=opened.recall, embedder=embedder)
    with pytest.raises(Exception, match="unreachable"):
        recall.add([RecallDoc("m1", "s", "u", 0, "user", "hello world", T0, "hello world")])
    assert [d.message_id for d in opened.recall.load_docs("u")] == ["m1"]  # stored; only its vector is missing
    assert opened.recall.load_vectors("u", "flaky")[0] == []
    embedder.broken = False
    assert recall.flush() == 1
    refs, matrix = opened.recall.load_vectors("u", "flaky")
    assert (refs, matrix.shape) == ([("s", "m1")], (1, 64))


def test_server_side_vector_search_is_detected(opened: Opened) -> None:
    """pgvector / RediSearch are detected (absent here: vectors are then scored with numpy in the client)."""
    if isinstance(opened.store, PostgresStore):
        import psycopg

        with psycopg.connect(PG_URL) as conn:
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        assert opened.recall.has_pgvector() is opened.store.has_pgvector() is (available is not None)
    else:
        import redis

        with redis.Redis.from_url(REDIS_URL) as client:
            modules = client.execute_command("MODULE", "LIST")
        assert opened.store.has_search() is any(b"search" in str(m).encode() for m in modules)


def test_users_and_models_whose_names_run_together_stay_apart(opened: Opened) -> None:
    """User "a:b" with model "c" and user "a" with model "b:c" must not share vectors."""
    docs = [RecallDoc("x", "s", "a:b", 0, "user", "hi", T0, "hi"), RecallDoc("y", "s", "a", 0, "user", "hi", T0, "hi")]
    opened.recall.save_docs(docs)
    opened.recall.save_vectors("c", docs[:1], [[1.0, 0.0]])
    opened.recall.save_vectors("b:c", docs[1:], [[0.0, 1.0]])
    assert opened.recall.load_vectors("a:b", "c")[0] == [("s", "x")]
    assert opened.recall.load_vectors("a", "b:c")[0] == [("s", "y")]
    assert opened.recall.load_vectors("a", "c")[0] == []
