"""``forget`` on every backend: the erased user's canaries are in no byte of the store, the other user is untouched.

One seeding for every backend: two users, each with a session, a fork of it, a second session, facts learnt
in the sessions, working blocks saved twice (two versions), and recall documents with vectors, every text
carrying a canary of its user. ``forget`` one of them, run the documented compaction, then:

* every read API of the other user returns exactly what it returned before;
* a scan of the store's bytes (the files of SQLite and the file store; the relation files of the PostgreSQL
  schema read by the server after a checkpoint, and a full dump of its rows; every Redis key's DUMP) finds
  none of the erased user's canaries, and still finds the other user's (so the scan can see them at all);
* a second ``forget`` removes nothing (idempotent).

The scan looks for each canary's random tail: FTS5 and GIN store terms with their prefix shared with the
previous term, so the whole word need not appear contiguously.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from convmem.errors import SessionLostError
from convmem.longterm.blocks.store import BlockRecord
from convmem.longterm.facts.model import Fact
from convmem.longterm.recall.model import RecallDoc, Where
from convmem.longterm.recall.store import LexicalRecallStore, SearchingRecallStore, StoreQuery, StoreResult
from convmem.messages import Message
from convmem.stores._forget import KINDS, ForgetReceipt
from convmem.stores.base import AppendRequest

from ._backends import backend
from ._servers import prefix_for, schema_for
from .test_search_servers import drop_redis

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
BACKENDS = ["memory", "sqlite", "files", "postgres", "redis", "pgvector", "redisearch"]


# A byte scan of PostgreSQL needs a CHECKPOINT of the whole server (5 s on a shared one).
def _scanned(kinds: list[str]) -> list[Any]:
    return [pytest.param(k, marks=pytest.mark.slow) if k in ("postgres", "pgvector") else k for k in kinds]


SCANNED = _scanned(BACKENDS)
SEARCH_URLS = {"pgvector": "pgvector_url", "redisearch": "redisearch_url"}


@contextmanager
def opened(kind: str, where: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh store of ``kind``: the machine's servers, or the test-owned ones with their search modules."""
    if kind not in SEARCH_URLS:
        with backend(kind, where) as store:
            yield store
        return
    url = request.getfixturevalue(SEARCH_URLS[kind])
    if kind == "pgvector":
        import psycopg

        from convmem.stores.postgres import PostgresStore

        store = PostgresStore(url, schema=schema_for(where), max_size=2)
        try:
            yield store
        finally:
            store.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema_for(where)} CASCADE".encode())
    else:
        from convmem.stores.redis import RedisStore

        store = RedisStore(url, prefix=prefix_for(where))
        try:
            yield store
        finally:
            store.close()
            drop_redis(url, prefix_for(where))


MODEL = "hash-8"


def canary() -> str:
    # Letters then digits: no stemmer (porter, english) changes a word that ends in a digit.
    return "cx" + secrets.token_hex(8) + "9"


@dataclass
class Seeded:
    canaries: dict[str, list[str]]  # user -> every canary written for them
    superseded: dict[str, list[str]]  # user -> those of a replaced block version (a backend may drop them)


def _msgs(user: str, tag: str, n: int, words: list[str]) -> list[tuple[Message, int]]:
    out = []
    for i in range(n):
        word = canary()
        words.append(word)
        role = "user" if i % 2 == 0 else "assistant"
        out.append((Message(role=role, content=f"{user} said {word}", id=f"{tag}-{i}", created_at=T0), 7))
    return out


def seed(store: Any, users: tuple[str, str]) -> Seeded:
    canaries: dict[str, list[str]] = {}
    superseded: dict[str, list[str]] = {}
    facts, blocks, recall = store.facts(), store.blocks(), store.recall()
    for user in users:
        words = canaries.setdefault(user, [])
        store.append(AppendRequest("chat", _msgs(user, "a", 6, words), user_id=user))
        fork = store.fork("chat", 3, user_id=user)
        store.append(AppendRequest(fork.id, _msgs(user, "f", 2, words), user_id=user, expected_seq=4))
        store.append(AppendRequest("other", _msgs(user, "o", 3, words), user_id=user))
        rows = []
        for session in ("chat", fork.id, "other"):
            word = canary()
            words.append(word)
            rows.append(
                Fact(
                    f"{user}-{session[:6]}-fact",
                    user,
                    f"{user} likes {word}",
                    T0,
                    T0,
                    subject=f"{user}.likes",
                    session_id=session,
                    source_message_ids=("a-0",),
                )
            )
        facts.write_facts(rows, [])
        for version in range(2):
            word = canary()
            words.append(word)
            blocks.save_block(BlockRecord(user, "persona", f"{user} is {word}", 0), expected_version=version)
            if version == 0:
                superseded[user] = [word]
        docs = []
        for session, prefix, count in (("chat", "a", 6), (fork.id, "f", 2), ("other", "o", 3)):
            for i in range(count):
                word = canary()
                words.append(word)
                text = f"{user} recalls {word}"
                docs.append(RecallDoc(f"{prefix}-{i}", session, user, i, "user", text, T0 + timedelta(i), text))
        recall.save_docs(docs)
        vectors = np.random.default_rng(len(user)).random((len(docs), 8), dtype=np.float32)
        recall.save_vectors(MODEL, docs, vectors)
    return Seeded(canaries, superseded)


def snapshot(store: Any, user: str) -> dict[str, Any]:
    """Everything every read API returns for ``user``."""
    out: dict[str, Any] = {"sessions": store.list_sessions(user_id=user)}
    for info in out["sessions"]:
        out[f"get:{info.id}"] = store.get_session(info.id, user_id=user)
        out[f"messages:{info.id}"] = list(store.messages(info.id, user_id=user))
        out[f"load:{info.id}"] = store.load(info.id, user_id=user, unfolded_limit=100)
        out[f"export:{info.id}"] = store.export_jsonl(info.id, user_id=user)
    out["facts"] = store.facts().list_facts(user_id=user)
    out["blocks"] = store.blocks().list_blocks(user)
    recall = store.recall()
    out["docs"] = recall.load_docs(user)
    refs, matrix = recall.load_vectors(user, MODEL)
    out["vectors"] = (refs, np.asarray(matrix).tobytes())
    if isinstance(recall, LexicalRecallStore):
        out["lexical"] = recall.lexical_search(f"{user} recalls", user_id=user, limit=50)
    if isinstance(recall, SearchingRecallStore) and recall.searches():
        query = StoreQuery(user, Where(), 50, text=f"{user} recalls", model=MODEL, vector=np.ones(8, np.float32))
        out["search"] = recall.search(query)
        out["count"] = recall.count_docs(user)
    return out


def store_bytes(kind: str, store: Any, where: Path) -> bytes:
    """Every byte the store keeps (see the module docstring for what that is per backend)."""
    if kind == "memory":
        return b""  # nothing on disk: the scan is of the read APIs above
    if kind in ("sqlite", "files"):
        return b"".join(p.read_bytes() for p in sorted(where.rglob("*")) if p.is_file())
    if kind in ("postgres", "pgvector"):
        return _postgres_bytes(store)
    if kind in ("redis", "redisearch"):
        return _redis_bytes(store)
    raise AssertionError(kind)


def _redis_bytes(store: Any) -> bytes:
    """Every key of the store's prefix: its name and its whole value, read by type (DUMP compresses with LZF)."""
    import redis

    chunks: list[bytes] = []
    with redis.Redis.from_url(store.settings.url) as client:
        for name in client.scan_iter(match=f"{store.keys.prefix}*", count=1000):
            kind = client.type(name)
            if kind == b"string":
                value: Any = [client.get(name)]
            elif kind == b"hash":
                value = [b for pair in client.hgetall(name).items() for b in pair]
            elif kind == b"zset":
                value = client.zrange(name, 0, -1)
            elif kind == b"list":
                value = client.lrange(name, 0, -1)
            elif kind == b"set":
                value = list(client.smembers(name))
            else:
                raise AssertionError(f"a key of an unexpected type: {name!r} {kind!r}")
            chunks += [name, *value]
    return b"".join(chunks)


def _postgres_bytes(store: Any) -> bytes:
    """The schema's relation files (tables, indexes, TOAST), read by the server after a checkpoint, and its rows."""
    import psycopg

    schema = store.settings.schema
    with psycopg.connect(store.settings.url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        rels = conn.execute(
            "SELECT c.oid FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
            "AND c.relkind IN ('r', 'i', 't', 'm') "
            "UNION SELECT t.oid FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid "
            "WHERE c.relnamespace = %s::regnamespace "
            "UNION SELECT i.indexrelid FROM pg_class c JOIN pg_index i ON i.indrelid = c.reltoastrelid "
            "WHERE c.relnamespace = %s::regnamespace",
            (schema, schema, schema),
        ).fetchall()
        chunks = []
        for (oid,) in rels:
            (data,) = conn.execute(
                "SELECT pg_read_binary_file(pg_relation_filepath(%s::oid), 0, pg_relation_size(%s::oid), true)",
                (oid, oid),
            ).fetchone()
            chunks.append(bytes(data or b""))
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema,)).fetchall()
        for (table,) in tables:
            rows = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t'.encode()).fetchall()
            chunks.extend(r[0].encode() for r in rows)
    return b"".join(chunks)


def found(data: bytes, words: list[str]) -> list[str]:
    low = data.lower()
    return [w for w in words if w[-10:].encode() in low]


@pytest.mark.parametrize("kind", SCANNED)
def test_forget_a_user_leaves_no_byte_and_the_other_user_untouched(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with opened(kind, tmp_path, request) as store:
        seeded = seed(store, ("alice", "bob"))
        before = snapshot(store, "bob")
        assert ("search" in before) == (kind in SEARCH_URLS)  # the server's own search is compared too

        receipt = store.forget(user_id="alice")
        assert receipt.removed == {
            "sessions": 3,
            "messages": 11,
            "facts": 3,
            "blocks": 1,
            "recall_docs": 11,
            "vectors": 11,
        }
        assert sorted(receipt.sessions)[0:1]
        assert "chat" in receipt.sessions
        assert "other" in receipt.sessions
        store.compact()

        assert snapshot(store, "bob") == before
        assert snapshot(store, "alice") == {
            "sessions": [],
            "facts": [],
            "blocks": [],
            "docs": [],
            "vectors": ([], np.zeros((0, 0), dtype=np.float32).tobytes()),
            **({"lexical": []} if "lexical" in before else {}),
            **({"search": StoreResult([], 0), "count": 0} if "search" in before else {}),
        }
        data = store_bytes(kind, store, tmp_path)
        assert found(data, seeded.canaries["alice"]) == []
        live = [w for w in seeded.canaries["bob"] if w not in seeded.superseded["bob"]]
        assert found(data, live) == (live if kind != "memory" else [])
        again = store.forget(user_id="alice")
        assert again.total == 0
        assert again.pending == ""


@pytest.mark.parametrize("kind", BACKENDS)
def test_forget_a_session_takes_its_forks_and_nothing_else(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with opened(kind, tmp_path, request) as store:
        seed(store, ("alice", "bob"))
        bob = snapshot(store, "bob")
        other = {k: v for k, v in snapshot(store, "alice").items() if k.endswith(":other")}
        fork = next(i for i in store.list_sessions(user_id="alice") if i.parent_id is not None)

        receipt = store.forget(user_id="alice", session_id="chat", compact=True)
        assert set(receipt.sessions) == {"chat", fork.id}
        assert receipt.removed["sessions"] == 2
        assert receipt.removed["messages"] == 8
        assert receipt.removed["facts"] == 2
        assert receipt.removed["recall_docs"] == 8
        assert receipt.removed["blocks"] == 0  # blocks belong to the user, not to a session
        assert receipt.compacted
        assert receipt.pending == ""

        after = snapshot(store, "alice")
        assert [i.id for i in after["sessions"]] == ["other"]
        assert {k: v for k, v in after.items() if k.endswith(":other")} == other
        assert {d.session_id for d in after["docs"]} == {"other"}
        assert [f.session_id for f in after["facts"]] == ["other"]
        assert snapshot(store, "bob") == bob
        assert store.forget(user_id="alice", session_id="chat").total == 0


def test_receipt_counts_every_kind_and_holds_no_content() -> None:
    receipt = ForgetReceipt("alice", None, {"messages": 2})
    assert list(receipt.removed) == list(KINDS)
    assert receipt.total == 2
    assert receipt.as_dict()["removed"] == dict.fromkeys(KINDS, 0) | {"messages": 2}


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_writer_of_an_erased_session_gets_session_lost(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A writer appends while the session is erased: it ends with SessionLostError and nothing of it remains."""
    with opened(kind, tmp_path, request) as store:
        store.append(AppendRequest("chat", _msgs("alice", "w", 1, []), user_id="alice"))
        errors: list[BaseException] = []
        started = threading.Event()

        def writer() -> None:
            seq = 1
            try:
                while True:
                    msg = Message(role="user", content=f"turn {seq}", id=f"t{seq}", created_at=T0)
                    store.append(AppendRequest("chat", [(msg, 3)], user_id="alice", expected_seq=seq))
                    seq += 1
                    started.set()
            except BaseException as exc:  # the one way out of the loop
                errors.append(exc)
                started.set()

        thread = threading.Thread(target=writer)
        thread.start()
        started.wait(10)
        store.forget(user_id="alice", session_id="chat")
        thread.join(10)
        assert not thread.is_alive()
        assert len(errors) == 1, errors
        assert isinstance(errors[0], SessionLostError), errors
        assert store.list_sessions(user_id="alice") == []
        assert store.forget(user_id="alice").total == 0  # nothing was re-created behind the erasure


@pytest.mark.parametrize("kind", _scanned(["sqlite", "postgres", "pgvector"]))
def test_the_scan_finds_what_forget_leaves_until_the_compaction(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Without the compaction, FTS5 segments (SQLite) and dead tuples (PostgreSQL; a plain VACUUM leaves some
    too) still hold erased words: the compaction step is needed, and the scan is able to see them."""
    with opened(kind, tmp_path, request) as store:
        seeded = seed(store, ("alice", "bob"))
        receipt = store.forget(user_id="alice")
        assert receipt.pending
        assert receipt.compact.startswith("convmem compact --db ")
        assert found(store_bytes(kind, store, tmp_path), seeded.canaries["alice"])
        store.compact()
        assert found(store_bytes(kind, store, tmp_path), seeded.canaries["alice"]) == []


def test_a_file_log_read_before_an_erasure_reads_the_rewritten_file(tmp_path: Path) -> None:
    """Another process's open fact store (its offset into the old file) sees the rewrite, not a stale tail."""
    from convmem.stores import FileStore

    store, reader = FileStore(tmp_path), FileStore(tmp_path).facts()
    seed(store, ("alice", "bob"))
    assert len(reader.list_facts(user_id="alice")) == 3
    store.forget(user_id="alice")
    assert reader.list_facts(user_id="alice") == []
    assert len(reader.list_facts(user_id="bob")) == 3
    more = Fact("bob-new", "bob", "bob likes tea", T0, T0)
    reader.write_facts([more], [])  # appends after the rewritten file's end, not the old one's
    assert more in store.facts().list_facts(user_id="bob")


def test_a_persisting_redis_keeps_erased_data_in_its_aof_until_compact(tmp_path: Path) -> None:
    """The server's own file (an AOF, plain commands here so a scan can read it) holds the erased writes until
    ``compact`` rewrites it; the receipt says so."""
    from convmem.stores.redis import RedisStore

    from ._servers import RedisServer

    server = RedisServer(tmp_path, durable=True)
    server.command += ["--aof-use-rdb-preamble", "no"]
    server.start()
    try:
        store = RedisStore(server.url, prefix="convmem-t-aof:")
        try:
            seeded = seed(store, ("alice", "bob"))
            receipt = store.forget(user_id="alice")
            assert "AOF" in receipt.pending
            assert receipt.compact

            def aof() -> bytes:
                return b"".join(p.read_bytes() for p in (tmp_path / "appendonlydir").iterdir() if p.is_file())

            assert found(aof(), seeded.canaries["alice"])
            store.compact()
            assert found(aof(), seeded.canaries["alice"]) == []
            live = [w for w in seeded.canaries["bob"] if w not in seeded.superseded["bob"]]
            assert found(aof(), live) == live
        finally:
            store.close()
    finally:
        server.stop()


@pytest.mark.parametrize(("removed", "compacted", "left"), [(1, False, True), (0, False, False), (1, True, False)])
def test_a_receipt_names_what_storage_holds_only_when_something_was_removed_and_not_compacted(
    removed: int, compacted: bool, left: bool
) -> None:
    receipt = ForgetReceipt.made(
        "u", None, {"messages": removed}, ["s"], compacted=compacted, pending="freed pages", command="convmem compact"
    )
    assert (receipt.pending, receipt.compact) == (("freed pages", "convmem compact") if left else ("", ""))
    assert receipt.compacted is compacted
    assert receipt.sessions == ("s",)


@pytest.mark.slow
def test_compaction_waits_for_an_older_snapshot_and_refuses_while_it_lasts(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """VACUUM FULL keeps every row an open snapshot can still see: a transaction begun before the erasure keeps
    the erased rows in the files, so the compaction waits for it, and names it rather than report success."""
    import psycopg

    from convmem.errors import StoreError
    from convmem.stores.postgres import _forget as pg_forget

    with opened("postgres", tmp_path, request) as store:
        seeded = seed(store, ("alice", "bob"))
        reader = psycopg.connect(store.settings.url)  # a report that began before the erasure
        try:
            reader.execute(f'SET search_path = "{store.settings.schema}"')
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT count(*) FROM messages").fetchone()
            store.forget(user_id="alice")
            with pytest.raises(StoreError, match=r"\d+ other transaction\(s\) of this database began before it"):
                store.db.run(pg_forget.compact(wait=0.2))
        finally:
            reader.close()  # the snapshot ends: now the compaction clears everything
        store.compact()
        assert found(store_bytes("postgres", store, tmp_path), seeded.canaries["alice"]) == []
