"""SQLiteStore passes the conformance suite (sync and async) against a real database file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from convmem.errors import SessionNotFoundError
from convmem.messages import Message
from convmem.stores import AsyncSQLiteStore, SQLiteStore
from convmem.stores.base import AppendRequest
from convmem.stores.sqlite._sql import MIGRATIONS
from convmem.testing import AsyncStoreConformance, StoreConformance


class TestSQLiteStore(StoreConformance):
    def make_store(self, location: Path) -> SQLiteStore:
        return SQLiteStore(location / "convmem.db")

    releases_connection = True

    def per_kind(self, store: Any, kind: str) -> Any:
        from convmem.stores.sqlite.longterm import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore

        return {"facts": SQLiteFactStore, "blocks": SQLiteBlockStore, "recall": SQLiteRecallStore}[kind](store)


class TestAsyncSQLiteStore(AsyncStoreConformance):
    def make_store(self, location: Path) -> AsyncSQLiteStore:
        return AsyncSQLiteStore(location / "convmem.db")


def test_the_default_path_honours_convmem_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMEM_DB", str(tmp_path / "sub" / "env.db"))
    store = SQLiteStore()
    assert store.path == str(tmp_path / "sub" / "env.db")
    store.close()
    with sqlite3.connect(tmp_path / "sub" / "env.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert [n for (n,) in db.execute("SELECT name FROM schema_migrations")] == [n for n, _ in MIGRATIONS]
    db.close()


def test_a_database_of_global_session_ids_migrates_to_ids_scoped_by_user(tmp_path: Path) -> None:
    """0004: sessions keyed by (user, id), message ids unique per session; forks and states survive."""
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, statements in MIGRATIONS[:3]:
        for statement in statements:
            db.execute(statement)
        db.execute("INSERT INTO schema_migrations VALUES (?, '2024-01-01T00:00:00+00:00')", (name,))
    stamp = "2024-01-01T00:00:00+00:00"
    state = '{"window_start":1,"folded_to":-1,"pinned_start":0,"summary":null,"stats":{"k":1}}'
    sessions = [  # id, user, parent, fork_seq, next_seq
        ("chat", "alice", None, None, 3),
        ("chat-fork", "alice", "chat", 1, 3),
        ("plain", None, None, None, 1),
    ]
    for session_id, user, parent, fork_seq, next_seq in sessions:
        db.execute(
            "INSERT INTO sessions (id, user_id, created_at, updated_at, parent_id, fork_seq, base_count, "
            "message_count, next_seq, state, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 3)",
            (
                session_id,
                user,
                stamp,
                stamp,
                parent,
                fork_seq,
                2 if parent else 0,
                1 if parent else next_seq,
                next_seq,
                state,
            ),
        )
    rows = [("chat", 0, "a0"), ("chat", 1, "a1"), ("chat", 2, "a2"), ("chat-fork", 2, "f2"), ("plain", 0, "p0")]
    for session_id, seq, message_id in rows:
        payload = f'{{"role":"user","content":"{message_id}","id":"{message_id}"}}'
        db.execute(
            "INSERT INTO messages (session_id, seq, id, role, payload, tokens) VALUES (?, ?, ?, 'user', ?, 3)",
            (session_id, seq, message_id, payload),
        )
    db.commit()
    db.close()
    store = SQLiteStore(path)
    try:
        assert [r.message.id for r in store.messages("chat-f", user_id="alice")] == ["a0", "a1", "f2"]
        fork = store.get_session("chat-fork", user_id="alice")
        assert (fork.parent_id, fork.fork_seq, fork.message_count) == ("chat", 1, 3)
        loaded = store.load("chat", user_id="alice")
        assert (loaded.state.window_start, loaded.state.version, loaded.next_seq) == (1, 3, 3)
        assert [r.message.id for r in store.messages("plain")] == ["p0"]
        with pytest.raises(SessionNotFoundError):
            store.get_session("chat", user_id="bob")
        # Bob's own "chat", with alice's message ids: no clash, no error.
        assert store.append(
            AppendRequest("chat", [(Message(role="user", content="mine", id="a0"), 2)], user_id="bob")
        ) == [0]
        assert store.append(
            AppendRequest("chat", [(Message(role="user", content="a3", id="a3"), 2)], user_id="alice")
        ) == [3]
    finally:
        store.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    check.close()
