"""Recall is keyed by owner on every backend: ids that collide across users or sessions never overwrite.

Message ids are unique only per user (Redis) or per session (files), so two users' ``m1`` and two sessions'
``m1`` are different documents with different vectors. Each check runs on the in-process index (no store)
and on the SQLite, file, PostgreSQL and Redis recall stores, and again after a reopen; the upgrade tests
write the first (message-id keyed) layout of each persistent store and open it with this version.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from convmem.errors import ConflictError
from convmem.longterm.blocks.base import WorkingBlock
from convmem.longterm.blocks.store import MemoryBlockStore
from convmem.longterm.facts.book import Facts
from convmem.longterm.facts.store import MemoryFactStore
from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.index import RecallDoc, RecallIndex
from convmem.stores.files.longterm import FileBlockStore, FileFactStore, FileRecallStore
from convmem.stores.postgres import PostgresStore
from convmem.stores.postgres.longterm import PostgresBlockStore, PostgresFactStore, PostgresRecallStore
from convmem.stores.redis import RedisStore
from convmem.stores.redis.longterm import RedisBlockStore, RedisFactStore, RedisRecallStore
from convmem.stores.sqlite.longterm import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore

from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
BACKENDS = ["memory", "sqlite", "files", "postgres", "redis"]

# Same message id three times: two users in a session of the same name, and a second session of alice's.
DOCS = [
    RecallDoc("m1", "s1", "alice", 0, "user", "alice parks on level three", T0, "alice parks on level three"),
    RecallDoc("m1", "s1", "bob", 0, "user", "bob keeps honey bees", T0, "bob keeps honey bees"),
    RecallDoc("m1", "s2", "alice", 0, "user", "violin lessons on tuesday", T0 + timedelta(days=1), "violin lessons"),
    RecallDoc("m2", "s1", None, 1, "user", "nobody's bees and violin", T0, "nobody's bees and violin"),
]


class Backend:
    """Opens the recall, fact and block stores of one backend, any number of times, over the same data."""

    def __init__(self, kind: str, where: Path) -> None:
        self.kind, self.where = kind, where
        self.opened: list[Any] = []
        self._memory = (None, MemoryFactStore(), MemoryBlockStore())

    def open(self) -> tuple[Any, Any, Any]:
        if self.kind == "memory":
            return self._memory
        if self.kind == "sqlite":
            path = self.where / "db.sqlite"
            parts: tuple[Any, Any, Any] = (SQLiteRecallStore(path), SQLiteFactStore(path), SQLiteBlockStore(path))
        elif self.kind == "files":
            root = self.where / "files"
            parts = (FileRecallStore(root), FileFactStore(root), FileBlockStore(root))
        elif self.kind == "postgres":
            pg = PostgresStore(PG_URL, schema=schema_for(self.where))
            self.opened.append(pg)
            parts = (PostgresRecallStore(pg), PostgresFactStore(pg), PostgresBlockStore(pg))
        else:
            rd = RedisStore(REDIS_URL, prefix=prefix_for(self.where))
            self.opened.append(rd)
            parts = (RedisRecallStore(rd), RedisFactStore(rd), RedisBlockStore(rd))
        self.opened += parts
        return parts

    def close(self) -> None:
        for part in self.opened:
            getattr(part, "close", lambda: None)()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opened = Backend(request.param, tmp_path)
    yield opened
    opened.close()
    if request.param == "postgres":
        drop_schemas({schema_for(tmp_path)})
    if request.param == "redis":
        drop_prefixes({prefix_for(tmp_path)})


def _index(store: Any, shared: RecallIndex | None = None) -> RecallIndex:
    if store is None and shared is not None:
        return shared  # the in-process index has nothing to reopen
    return RecallIndex(store=store, embedder=HashingEmbedder(64))


def _check_each_owner_sees_only_their_own(recall: RecallIndex) -> None:
    embedder = recall.embedder
    assert embedder is not None
    for doc in DOCS:
        own = [d for d in DOCS if d.user_id == doc.user_id]
        for mode in ("lexical", "dense", "hybrid"):
            hits = recall.search(doc.text, user_id=doc.user_id, k=10, mode=mode)  # type: ignore[arg-type]
            assert {(h.doc.user_id, h.doc.session_id, h.doc.message_id) for h in hits} <= {
                (d.user_id, d.session_id, d.message_id) for d in own
            }
            assert hits[0].doc == doc, (mode, doc)
        # Its own vector: the dense score of its own key is the cosine of the key with itself.
        best = recall.search(doc.key, user_id=doc.user_id, k=1, mode="dense")[0]
        assert best.doc == doc
        assert best.score == pytest.approx(1.0, abs=1e-5)
    assert recall.count(user_id="alice") == 2
    assert recall.count(user_id="bob") == 1
    assert [h.doc.text for h in recall.search("bees", user_id="alice", mode="lexical")] == []
    assert [h.doc.text for h in recall.search("bees", user_id="bob", mode="lexical")] == ["bob keeps honey bees"]
    assert recall.search("violin", user_id="alice", session_id="s1", mode="lexical") == []


def test_colliding_message_ids_are_separate_documents_with_their_own_vectors(backend: Backend) -> None:
    store, _, _ = backend.open()
    recall = _index(store)
    assert recall.add(DOCS) == len(DOCS)
    assert recall.add(DOCS) == 0  # each one is already indexed: nothing replaced, nothing added twice
    _check_each_owner_sees_only_their_own(recall)
    if store is None:
        return
    # The store holds each owner's document and vector, and a reopened index finds them there.
    embedder = HashingEmbedder(64)
    for user in ("alice", "bob", None):
        own = {d.ref: d for d in DOCS if d.user_id == user}
        assert {d.ref: d for d in store.load_docs(user)} == own
        refs, matrix = store.load_vectors(user, embedder.name)
        assert sorted(refs) == sorted(own)
        expected = embedder.embed([own[r].key for r in refs])
        np.testing.assert_allclose(matrix, expected, rtol=1e-6)
    reopened, _, _ = backend.open()
    again = _index(reopened)
    _check_each_owner_sees_only_their_own(again)
    assert again.pending() == 0  # every vector came back from the store


def test_a_colliding_document_saved_later_replaces_nothing(backend: Backend) -> None:
    """The second owner arrives in a later process: the first owner's text and vector stay theirs."""
    store, _, _ = backend.open()
    first = _index(store)
    first.add(DOCS[:1])
    later_store, _, _ = backend.open()
    later = _index(later_store, first)
    later.add(DOCS[1:])
    _check_each_owner_sees_only_their_own(_index(backend.open()[0], first))


def test_facts_and_blocks_with_colliding_names_never_overwrite(backend: Backend) -> None:
    _, fact_store, block_store = backend.open()
    facts = Facts(fact_store)
    alices = facts.add("Alice lives in Lisbon", user_id="alice", valid_from=T0)
    intruder = dataclasses.replace(alices, user_id="bob", text="Bob lives in Oslo")
    with pytest.raises(ConflictError):  # bob cannot end alice's fact by naming its id
        fact_store.write_facts([], [dataclasses.replace(intruder, valid_to=T0 + timedelta(days=1))])
    try:
        fact_store.write_facts([intruder], [])  # fact ids are store-unique: a repeat is refused or kept apart
    except ConflictError:
        assert [f.text for f in facts.facts(user_id="bob")] == []
    else:
        assert [f.text for f in facts.facts(user_id="bob")] == ["Bob lives in Oslo"]
    assert [(f.text, f.valid_to) for f in facts.facts(user_id="alice")] == [("Alice lives in Lisbon", None)]
    WorkingBlock("notes", "alice's", store=block_store, scope="alice")
    WorkingBlock("notes", "bob's", store=block_store, scope="bob").append("more")
    assert WorkingBlock("notes", "x", store=block_store, scope="alice").value == "alice's"
    assert WorkingBlock("notes", "x", store=block_store, scope="bob").value == "bob's\nmore"


# -- upgrades from the message-id keyed layouts ------------------------------------------------------
OLD = [
    RecallDoc("m1", "s1", "alice", 0, "user", "alice parks on level three", T0, "alice parks on level three"),
    RecallDoc("m2", "s1", "bob", 0, "user", "bob keeps honey bees", T0, "bob keeps honey bees"),
]


def _check_upgraded(store: Any) -> None:
    """The old documents and vectors are there, keyed by owner, and a colliding id can now join."""
    embedder = HashingEmbedder(64)
    recall = RecallIndex(store=store, embedder=embedder)
    assert recall.pending() == 0
    for doc in OLD:
        hits = recall.search(doc.text, user_id=doc.user_id, k=5)
        assert [h.doc for h in hits] == [doc]
        assert recall.search(doc.key, user_id=doc.user_id, mode="dense")[0].score == pytest.approx(1.0, abs=1e-5)
    twin = dataclasses.replace(OLD[0], user_id="carol", text="carol's m1", key="carol's m1")
    assert recall.add([twin]) == 1
    assert [h.doc for h in recall.search("carol", user_id="carol")] == [twin]
    assert [h.doc for h in recall.search("parks", user_id="alice")] == [OLD[0]]


def _texts(doc: RecallDoc) -> tuple[str, str, str]:
    return doc.text, doc.key, doc.context


def _old_vector(doc: RecallDoc) -> bytes:
    return np.asarray(HashingEmbedder(64).embed([doc.key])[0], dtype=np.float32).tobytes()


def test_sqlite_upgrades_a_database_keyed_by_message_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from convmem.stores.sqlite import _db
    from convmem.stores.sqlite._sql import MIGRATIONS

    path = tmp_path / "old.db"
    monkeypatch.setattr(
        _db, "MIGRATIONS", MIGRATIONS[:3]
    )  # the schema before 0004 (sessions scoped) and 0005 (recall keyed)
    _db.Database(path).close()
    monkeypatch.undo()
    with sqlite3.connect(path) as conn:
        for number, d in enumerate(OLD, start=1):
            user = f'"{d.user_id}"'
            conn.execute(
                "INSERT INTO recall_docs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (number, d.message_id, user, d.session_id, d.seq, d.role, d.created_at.isoformat(), 0.0, *_texts(d)),
            )
            conn.execute(
                "INSERT INTO recall_fts (rowid, body, context, owner) VALUES (?, ?, ?, ?)",
                (number, d.key, d.context, "u" + user.encode().hex().upper()),
            )
            conn.execute("INSERT INTO embeddings VALUES (?, 'hashing-64', 64, ?)", (d.message_id, _old_vector(d)))
    store = SQLiteRecallStore(path)
    try:
        _check_upgraded(store)
    finally:
        store.close()


def test_postgres_upgrades_a_schema_keyed_by_message_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from convmem.stores.postgres import _sql

    schema = schema_for(tmp_path)
    monkeypatch.setattr(
        _sql, "MIGRATIONS", _sql.MIGRATIONS[:2]
    )  # the schema before 0003 (sessions scoped) and 0004 (recall keyed)
    PostgresStore(PG_URL, schema=schema).close()
    monkeypatch.undo()
    try:
        with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={schema}") as conn:
            for d in OLD:
                conn.execute(
                    "INSERT INTO recall_docs (message_id, user_key, session_id, seq, role, created_at, text, key, "
                    "context) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        d.message_id,
                        "u" + (d.user_id or ""),
                        d.session_id,
                        d.seq,
                        d.role,
                        d.created_at.isoformat(),
                        *_texts(d),
                    ),
                )
                conn.execute("INSERT INTO embeddings VALUES (%s, 'hashing-64', 64, %s)", (d.message_id, _old_vector(d)))
        pg = PostgresStore(PG_URL, schema=schema)
        try:
            _check_upgraded(PostgresRecallStore(pg))
        finally:
            pg.close()
    finally:
        drop_schemas({schema})


def test_redis_upgrades_keys_of_the_first_layout(tmp_path: Path) -> None:
    import redis

    from convmem.stores._longterm_codec import doc_to_json

    prefix = prefix_for(tmp_path)
    try:
        with redis.Redis.from_url(REDIS_URL) as client:
            for d in OLD:
                ukey = "=" + (d.user_id or "")
                client.hset(f"{prefix}d:{ukey}", d.message_id, doc_to_json(d))
                client.rpush(f"{prefix}dl:{ukey}", d.message_id)
                client.hset(f"{prefix}dk", d.message_id, ukey)
                client.hset(f"{prefix}v:{len(ukey)}:{ukey}:hashing-64", d.message_id, _old_vector(d))
        rd = RedisStore(REDIS_URL, prefix=prefix)
        try:
            _check_upgraded(RedisRecallStore(rd))
            with redis.Redis.from_url(REDIS_URL) as client:
                left = sorted(k.decode()[len(prefix) :] for k in client.scan_iter(match=f"{prefix}*"))
            assert not [k for k in left if k.split(":")[0] in ("d", "dl", "dk", "v")]  # the old keys are gone
            RedisRecallStore(rd)  # opening again finds nothing to upgrade
        finally:
            rd.close()
    finally:
        drop_prefixes({prefix})


def test_file_store_reads_vectors_written_before_owner_keys(tmp_path: Path) -> None:
    import base64
    import json

    from convmem.stores._longterm_codec import doc_to_json

    recall_dir = tmp_path / "longterm" / "recall"
    recall_dir.mkdir(parents=True)
    (recall_dir / "docs.jsonl").write_text("".join(doc_to_json(d) + "\n" for d in OLD))
    lines = [
        json.dumps(
            {"message_id": d.message_id, "model": "hashing-64", "vector": base64.b64encode(_old_vector(d)).decode()}
        )
        for d in OLD
    ]
    (recall_dir / "vectors-hashing-64.jsonl").write_text("".join(line + "\n" for line in lines))
    _check_upgraded(FileRecallStore(tmp_path))
