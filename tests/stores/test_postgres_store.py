"""PostgresStore passes the conformance suite (sync and async) against the real server, one schema per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convmem.stores.base import AppendRequest
from convmem.stores.postgres import AsyncPostgresStore, PostgresStore
from convmem.testing import AsyncStoreConformance, StoreConformance

from ._servers import PG_URL, drop_schemas, schema_for

SCHEMAS: set[str] = set()


@pytest.fixture(autouse=True, scope="module")
def _drop_test_schemas() -> Iterator[None]:
    yield
    drop_schemas(SCHEMAS)


def _schema(location: Path) -> str:
    SCHEMAS.add(schema_for(location))
    return schema_for(location)


class TestPostgresStore(StoreConformance):
    def make_store(self, location: Path) -> PostgresStore:
        return PostgresStore(PG_URL, schema=_schema(location), max_size=4)

    releases_connection = True

    def per_kind(self, store: Any, kind: str) -> Any:
        from convmem.stores.postgres.longterm import PostgresBlockStore, PostgresFactStore, PostgresRecallStore

        return {"facts": PostgresFactStore, "blocks": PostgresBlockStore, "recall": PostgresRecallStore}[kind](store)


class TestAsyncPostgresStore(AsyncStoreConformance):
    def make_store(self, location: Path) -> AsyncPostgresStore:
        return AsyncPostgresStore(PG_URL, schema=_schema(location), max_size=4)


def test_a_schema_of_global_session_ids_migrates_to_ids_scoped_by_user(tmp_path: Path) -> None:
    """0003: sessions keyed by (user, id), message ids unique per session; forks and states survive."""
    import psycopg

    from convmem.errors import SessionNotFoundError
    from convmem.messages import Message
    from convmem.stores.postgres._sql import MIGRATIONS

    schema = _schema(tmp_path)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
        conn.execute(f"SET search_path = {schema}".encode())
        conn.execute(
            b"CREATE TABLE schema_migrations (name text PRIMARY KEY, applied_order serial, "
            b"applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for name, statements in MIGRATIONS[:2]:
            for statement in statements:
                conn.execute(statement.encode())
            conn.execute(b"INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
        state = '{"window_start":1,"folded_to":-1,"pinned_start":0,"summary":null,"stats":{"k":1}}'
        for session_id, user, parent, fork_seq, next_seq in (
            ("chat", "alice", None, None, 3),
            ("chat-fork", "alice", "chat", 1, 3),
            ("plain", None, None, None, 1),
        ):
            conn.execute(
                b"INSERT INTO sessions (id, user_id, created_at, updated_at, parent_id, fork_seq, base_count, "
                b"message_count, next_seq, state, version) VALUES (%s, %s, now(), now(), %s, %s, %s, %s, %s, %s, 3)",
                (session_id, user, parent, fork_seq, 2 if parent else 0, 1 if parent else next_seq, next_seq, state),
            )
        for session_id, seq, message_id in (
            ("chat", 0, "a0"),
            ("chat", 1, "a1"),
            ("chat", 2, "a2"),
            ("chat-fork", 2, "f2"),
            ("plain", 0, "p0"),
        ):
            payload = f'{{"role":"user","content":"{message_id}","id":"{message_id}"}}'
            conn.execute(
                b"INSERT INTO messages (session_id, seq, id, role, payload, tokens) VALUES (%s, %s, %s, 'user', %s, 3)",
                (session_id, seq, message_id, payload),
            )
    store = PostgresStore(PG_URL, schema=schema)
    try:
        assert [r.message.id for r in store.messages("chat-f", user_id="alice")] == ["a0", "a1", "f2"]
        fork = store.get_session("chat-fork", user_id="alice")
        assert (fork.parent_id, fork.fork_seq, fork.message_count) == ("chat", 1, 3)
        loaded = store.load("chat", user_id="alice")
        assert (loaded.state.window_start, loaded.state.version, loaded.next_seq) == (1, 3, 3)
        assert [r.message.id for r in store.messages("plain")] == ["p0"]
        with pytest.raises(SessionNotFoundError):
            store.get_session("chat", user_id="bob")
        assert store.append(
            AppendRequest("chat", [(Message(role="user", content="mine", id="a0"), 2)], user_id="bob")
        ) == [0]
        assert store.append(
            AppendRequest("chat", [(Message(role="user", content="a3", id="a3"), 2)], user_id="alice")
        ) == [3]
    finally:
        store.close()
