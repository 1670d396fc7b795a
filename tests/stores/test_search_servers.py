"""Recall searched inside the servers: PostgreSQL with pgvector (HNSW) and Redis with RediSearch.

Each test runs on both test-owned servers (``conftest.py``), in a schema or key prefix of its own. The
index loads nothing of a user there: documents, vectors and both retrievers stay in the server. The
machine's own PostgreSQL 15 and Redis 7.0 (no pgvector, no RediSearch) keep testing the fallback, in
``test_server_longterm.py``; the last test here checks they are detected as such.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
import redis

from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.index import RecallDoc, RecallIndex
from convmem.longterm.recall.model import Where
from convmem.longterm.recall.store import StoreQuery
from convmem.stores.postgres import PostgresStore
from convmem.stores.postgres.longterm import PostgresRecallStore
from convmem.stores.redis import RedisStore
from convmem.stores.redis.longterm import RedisRecallStore

from ..longterm.embedders import FlakyEmbedder
from ._servers import PG_URL, REDIS_URL, prefix_for, schema_for

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
WORDS = "apple river stone cloud violin ember harbor lantern meadow copper falcon willow".split()  # noqa: SIM905


class Server:
    """Opens recall stores of one backend on its test-owned server, and removes what they wrote."""

    def __init__(self, kind: str, url: str, where: Path) -> None:
        self.kind, self.url, self.where = kind, url, where
        self.opened: list[Any] = []

    def open(self) -> Any:
        if self.kind == "pgvector":
            session_store: Any = PostgresStore(self.url, schema=schema_for(self.where))
            store: Any = PostgresRecallStore(session_store)
        else:
            session_store = RedisStore(self.url, prefix=prefix_for(self.where))
            store = RedisRecallStore(session_store)
        self.opened += [store, session_store]
        return store

    def close(self) -> None:
        for part in self.opened:
            part.close()
        if self.kind == "pgvector":
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema_for(self.where)} CASCADE".encode())
        else:
            drop_redis(self.url, prefix_for(self.where))


def drop_redis(url: str, prefix: str) -> None:
    with redis.Redis.from_url(url) as client:
        try:
            indexes = client.execute_command("FT._LIST")
        except redis.ResponseError:  # no RediSearch on this server
            indexes = []
        for name in indexes:
            if name.decode().startswith(prefix):
                client.execute_command("FT.DROPINDEX", name)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])


@pytest.fixture(params=["pgvector", "redisearch"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    url = request.getfixturevalue("pgvector_url" if request.param == "pgvector" else "redisearch_url")
    opened = Server(request.param, url, tmp_path)
    yield opened
    opened.close()


def corpus(users: list[str | None], per_user: int = 24) -> list[RecallDoc]:
    """The same texts (so the same vectors) for every user, with colliding message ids."""
    docs = []
    for user in users:
        for i in range(per_user):
            text = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5 + 3) % len(WORDS)]} note {i}"
            session = f"s{i % 3}"
            role = "assistant" if i % 4 == 0 else "user"
            docs.append(RecallDoc(f"m{i}", session, user, i // 3, role, text, T0 + timedelta(hours=i), text))
    return docs


def test_the_server_searches_and_nothing_is_loaded_in_process(server: Server) -> None:
    store = server.open()
    assert store.searches()
    recall = RecallIndex(store=store, embedder=HashingEmbedder(64))
    assert recall.add(corpus(["alice", "bob"])) == 48
    assert recall.add(corpus(["alice"])) == 0  # stored already: the server skips them
    assert recall.count(user_id="alice") == recall.count(user_id="bob") == 24
    for mode in ("lexical", "dense", "hybrid"):
        hits = recall.search("violin ember", user_id="alice", k=5, mode=mode)  # type: ignore[arg-type]
        assert hits
        assert {h.doc.user_id for h in hits} == {"alice"}
    assert len(recall) == 0  # no partition of any user was loaded


def test_dense_search_matches_exact_search(server: Server) -> None:
    """On a small archive the HNSW walk is exact: the best documents at the cosines numpy gives them."""
    store = server.open()
    docs = corpus(["alice", "bob"], per_user=40)
    remote = RecallIndex(store=store, embedder=HashingEmbedder(64))
    local = RecallIndex(embedder=HashingEmbedder(64))
    remote.add(docs)
    local.add(docs)
    for query in ["violin ember", "harbor lantern note 7", "copper", "meadow falcon willow"]:
        for user in ("alice", "bob"):
            got = remote.search(query, user_id=user, k=10, mode="dense")
            want = local.search(query, user_id=user, k=10, mode="dense")
            np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
            exact = {h.doc: h.score for h in local.search(query, user_id=user, k=100, mode="dense")}
            for hit in got:  # each one at its exact cosine (documents that tie may come in either order)
                assert exact[hit.doc] == pytest.approx(hit.score, abs=1e-5)


def test_no_result_ever_crosses_users(server: Server) -> None:
    """Six owners with identical texts, vectors and message ids: every hit of every search is the asker's."""
    store = server.open()
    users: list[str | None] = ["alice", "bob", "a", "alice ", None, "Alice"]
    docs = corpus(users)
    recall = RecallIndex(store=store, embedder=HashingEmbedder(64))
    recall.add(docs)
    for user in [*users, "nobody"]:
        own = {(d.session_id, d.message_id) for d in docs if d.user_id == user}
        for query in ["violin", "note 3", "apple river stone cloud", "zzz", ""]:
            for mode in ("lexical", "dense", "hybrid"):
                hits = recall.search(query, user_id=user, k=100, mode=mode)  # type: ignore[arg-type]
                assert all(h.doc.user_id == user for h in hits), (user, query, mode)
                assert {(h.doc.session_id, h.doc.message_id) for h in hits} <= own
        if user != "nobody":
            everything = recall.search("note", user_id=user, k=100, mode="dense")
            assert {(h.doc.session_id, h.doc.message_id) for h in everything} == own


def test_filters_apply_in_the_server(server: Server) -> None:
    store = server.open()
    docs = corpus(["alice", "bob"], per_user=36)
    remote = RecallIndex(store=store, embedder=HashingEmbedder(64))
    local = RecallIndex(embedder=HashingEmbedder(64))
    remote.add(docs)
    local.add(docs)
    cases: list[dict[str, Any]] = [
        {"session_id": "s1"},
        {"session_id": ["s0", "s2"]},
        {"roles": ["assistant"]},
        {"since": T0 + timedelta(hours=10), "until": T0 + timedelta(hours=20)},
        {"exclude_window": ("s1", 4)},
        {"exclude_window": ("s2", 0), "roles": ["user"]},
    ]
    for filters in cases:
        for mode in ("lexical", "dense"):
            got = remote.search("note", user_id="alice", k=100, mode=mode, **filters)  # type: ignore[arg-type]
            want = local.search("note", user_id="alice", k=100, mode=mode, **filters)  # type: ignore[arg-type]
            assert {h.doc for h in got} == {h.doc for h in want}, (filters, mode)


def test_fusion_population_is_exactly_what_the_filters_admit(server: Server) -> None:
    """Hybrid fusion weighs each retriever by how many documents the filters admit; the server counts them
    (from the kept per-user count, less the window's rows, when only the window is left out)."""
    store = server.open()
    docs = corpus(["alice", "bob"], per_user=36)
    recall = RecallIndex(store=store, embedder=HashingEmbedder(64))
    recall.add(docs)
    vector = HashingEmbedder(64).embed(["note"])[0]
    cases = [
        Where(),
        Where(exclude_session="s1", exclude_from=4),
        Where(exclude_session="s1", exclude_from=0),
        Where(exclude_session="s9", exclude_from=0),
        Where(exclude_session="s2", exclude_from=99),
        Where(roles=["user"], exclude_session="s2", exclude_from=0),
        Where(sessions=["s0"], exclude_session="s0", exclude_from=6),
        Where(since=T0 + timedelta(hours=10), until=T0 + timedelta(hours=20), exclude_session="s1", exclude_from=0),
    ]
    for where in cases:
        for user in ("alice", "bob", "nobody"):
            want = sum(1 for d in docs if d.user_id == user and _admits(where, d))
            query = StoreQuery(user, where, 10, text="note", model=HashingEmbedder(64).name, vector=vector)
            assert store.search(query).admitted == want, (where, user)


def _admits(where: Where, doc: RecallDoc) -> bool:
    if where.sessions is not None and doc.session_id not in where.sessions:
        return False
    if where.since is not None and doc.created_at < where.since:
        return False
    if where.until is not None and doc.created_at >= where.until:
        return False
    if where.roles is not None and doc.role not in where.roles:
        return False
    left_out = doc.session_id == where.exclude_session and doc.seq >= (where.exclude_from or 0)
    return not (where.exclude_session is not None and left_out)


def test_vectors_missing_at_archive_are_embedded_by_a_later_process(server: Server) -> None:
    store = server.open()
    broken = RecallIndex(store=store, embedder=FlakyEmbedder("raise"))
    with pytest.raises(Exception, match="unreachable"):
        broken.add(corpus(["alice"], per_user=4))
    assert store.missing_vectors("alice", "flaky") != []
    fixed = FlakyEmbedder("raise")
    fixed.broken = False
    later = RecallIndex(store=server.open(), embedder=fixed)
    hits = later.search("violin", user_id="alice", k=4, mode="dense")  # finds them, embeds them, then searches
    assert len(hits) == 4
    assert later.pending() == 0
    assert store.missing_vectors("alice", "flaky") == []


def test_the_previous_turn_comes_from_the_server(server: Server) -> None:
    from convmem import Message
    from convmem.messages import StoredMessage

    def stored(seq: int, text: str) -> StoredMessage:
        return StoredMessage(seq, Message.trusted("user", text, f"m{seq}", T0), 1)

    first = RecallIndex(store=server.open())
    first.add_messages([stored(0, "where is the harbor"), stored(1, "by the lantern")], session_id="s", user_id="u")
    later = RecallIndex(store=server.open())
    later.add_messages([stored(2, "thanks")], session_id="s", user_id="u")
    (hit,) = later.search("thanks", user_id="u", k=1)
    assert hit.doc.context == "by the lantern"


def test_pgvector_installed_later_gets_its_column_and_index(pgvector_url: str, tmp_path: Path) -> None:
    """A database without the extension keeps the fallback; once it is installed, the next open upgrades."""
    database = f"later_{schema_for(tmp_path)[-16:]}"
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}".encode())
    url = pgvector_url.replace("/postgres?", f"/{database}?")
    try:
        docs = corpus(["alice", "bob"], per_user=30)
        pg = PostgresStore(url, schema="convmem")
        store = PostgresRecallStore(pg)
        assert not store.searches()
        before = RecallIndex(store=store, embedder=HashingEmbedder(64))
        before.add(docs)
        want = [h.doc for h in before.search("violin harbor", user_id="alice", k=5, mode="dense")]
        pg.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        pg = PostgresStore(url, schema="convmem")
        store = PostgresRecallStore(pg)
        assert store.searches()
        with psycopg.connect(url, options="-c search_path=convmem") as conn:
            assert conn.execute("SELECT count(*) FROM recall_vectors WHERE embedding IS NULL").fetchone() == (0,)
            query = "SELECT indexdef FROM pg_indexes WHERE tablename = 'recall_vectors' AND indexdef LIKE '%hnsw%'"
            indexes = [r[0] for r in conn.execute(query)]
        assert len(indexes) == 1
        assert "vector_cosine_ops" in indexes[0]
        after = RecallIndex(store=store, embedder=HashingEmbedder(64))
        assert [h.doc for h in after.search("violin harbor", user_id="alice", k=5, mode="dense")] == want
        pg.close()
    finally:
        with psycopg.connect(pgvector_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)".encode())


def test_redisearch_index_made_over_existing_documents(redisearch_url: str, tmp_path: Path) -> None:
    """Documents written before the index existed are found once it has filled."""
    server = Server("redisearch", redisearch_url, tmp_path)
    try:
        store = server.open()
        RecallIndex(store=store, embedder=HashingEmbedder(64)).add(corpus(["alice"], per_user=30))
        with redis.Redis.from_url(redisearch_url) as client:
            for name in client.execute_command("FT._LIST"):
                if name.decode().startswith(prefix_for(tmp_path)):
                    client.execute_command("FT.DROPINDEX", name)
        again = server.open()  # makes the lexical index over the existing hashes
        for _ in range(200):
            if again.searches():
                break
        recall = RecallIndex(store=again, embedder=HashingEmbedder(64))
        assert recall.count(user_id="alice") == 30
        assert len(recall.search("note", user_id="alice", k=50, mode="lexical")) == 30
    finally:
        server.close()


def test_machine_servers_have_no_search_and_use_the_fallback() -> None:
    pg = PostgresStore(PG_URL, schema="convmem_t_fallback_probe")
    rd = RedisStore(REDIS_URL, prefix="convmem-t-fallback-probe:")
    try:
        for store in (PostgresRecallStore(pg), RedisRecallStore(rd)):
            assert not store.searches()
            recall = RecallIndex(store=store, embedder=HashingEmbedder(16))
            recall.add([RecallDoc("m", "s", "probe", 0, "user", "hello", T0, "hello")])
            assert recall.search("hello", user_id="probe")[0].doc.text == "hello"
            assert len(recall) == 1  # searched in process: the user's partition is loaded
    finally:
        pg.close()
        rd.close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(b"DROP SCHEMA IF EXISTS convmem_t_fallback_probe CASCADE")
        drop_redis(REDIS_URL, "convmem-t-fallback-probe:")


def test_any_user_text_is_a_safe_query_in_the_servers(server: Server) -> None:
    """Query syntax of tsquery and RediSearch, typed by a user, is just words (or nothing) to the server."""
    recall = RecallIndex(store=server.open(), embedder=HashingEmbedder(64))
    recall.add(corpus(["u", "other"], per_user=12))
    hostile = ['"', "@u:{2d}", "*", "-(", "|", "=>[KNN 10 @v $vec]", "$vec", "{", "%%", "a:* & !b", "@s:{x} | @r:[0 1]"]
    hostile += ["'; DROP TABLE recall_docs; --", "\\", "NEAR/3", "~violin", "%(user)s", "\x00", "violin)"]
    for query in hostile:
        for mode in ("lexical", "dense", "hybrid"):
            hits = recall.search(query, user_id="u", k=50, mode=mode)  # type: ignore[arg-type]
            assert all(h.doc.user_id == "u" for h in hits), (query, mode)
    assert [h.doc.message_id for h in recall.search("violin)", user_id="u", k=1, mode="lexical")] == ["m4"]


MARKERS = ["quartz", "tundra", "saffron", "glacier", "obsidian", "juniper"]


def test_no_result_crosses_users_when_the_words_are_the_other_users(server: Server) -> None:
    """Each owner's texts carry a word of its own (and many shared ones, so the lexical search prunes words):
    asked with another owner's words, a search returns nothing of that owner, whatever the mode."""
    store = server.open()
    users: list[str | None] = ["alice", "bob", "alice ", None, "Alice", "a:b"]
    docs = []
    for user, marker in zip(users, MARKERS, strict=True):
        for i in range(30):
            shared = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(4))
            text = f"{marker} {shared} said note" if i % 3 == 0 else f"{shared} said note {i}"
            docs.append(RecallDoc(f"m{i}", f"s{i % 2}", user, i, "user", text, T0 + timedelta(hours=i), text))
    recall = RecallIndex(store=store, embedder=HashingEmbedder(64))
    recall.add(docs)
    texts = {user: {d.text for d in docs if d.user_id == user} for user in users}
    for user, marker in zip(users, MARKERS, strict=True):
        for other in MARKERS:
            for query in [other, f"{other} said note", f"{other} {' '.join(WORDS)}", " ".join(MARKERS)]:
                for mode in ("lexical", "dense", "hybrid"):
                    hits = recall.search(query, user_id=user, k=50, mode=mode)  # type: ignore[arg-type]
                    assert {h.doc.text for h in hits} <= texts[user], (user, query, mode)
                    assert all(h.doc.user_id == user for h in hits)
            lexical = recall.search(other, user_id=user, k=50, mode="lexical")
            assert bool(lexical) == (other == marker)
            assert all(marker in h.doc.text for h in lexical)


def test_redisearch_ranks_by_convmems_bm25_not_by_common_words_in_short_documents(redisearch_url: str) -> None:
    """RediSearch's BM25STD gave every term the same idf and scored the user tag (RediSearch 2.10): a short
    turn holding only the speaker's name outranked the one turn holding the question's rare word. The
    candidates are ranked with convmem's BM25 instead: the same best hit as the in-process index."""
    texts = [f"Caroline: hi Melanie {i}" for i in range(30)]
    texts += [f"Caroline: I went to the {w} market with my friends and it was lovely" for w in WORDS[:10]]
    texts.append("Caroline: I researched adoption agencies all week, Melanie, and found a good one")
    docs = [RecallDoc(f"m{i}", "s", "alice", i, "user", t, T0 + timedelta(minutes=i), t) for i, t in enumerate(texts)]
    server = Server("redisearch", redisearch_url, Path(f"/rank-{id(texts)}"))
    try:
        in_server = RecallIndex(store=server.open())
        in_server.add(docs)
        in_process = RecallIndex()
        in_process.add(docs)
        for question in ("What did Caroline research?", "Which market did Caroline visit with friends?"):
            want = [h.doc.text for h in in_process.search(question, user_id="alice", k=5, mode="lexical")]
            got = [h.doc.text for h in in_server.search(question, user_id="alice", k=5, mode="lexical")]
            assert got[0] == want[0], question
        top = in_server.search("What did Caroline research?", user_id="alice", k=1, mode="lexical")
        assert "researched" in top[0].doc.text
        # Documents saved before their tokens were kept (no ``w`` field) are tokenized at query time.
        before = [h.doc.text for h in in_server.search("market friends", user_id="alice", k=8, mode="lexical")]
        with redis.Redis.from_url(redisearch_url) as client:
            removed = sum(client.hdel(key, "w") for key in client.scan_iter(match=f"{prefix_for(server.where)}rd:*"))
        assert removed == len(docs)
        after = [h.doc.text for h in in_server.search("market friends", user_id="alice", k=8, mode="lexical")]
        assert after == before
    finally:
        server.close()
