"""SQLiteStore passes the conformance suite (sync and async) against a real database file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from convmem.stores import AsyncSQLiteStore, SQLiteStore
from convmem.stores.sqlite._sql import MIGRATIONS
from convmem.testing import AsyncStoreConformance, StoreConformance


class TestSQLiteStore(StoreConformance):
    def make_store(self, location: Path) -> SQLiteStore:
        return SQLiteStore(location / "convmem.db")


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
