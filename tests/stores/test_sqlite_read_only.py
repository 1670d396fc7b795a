"""A read-only SQLite database opens for reading (``mode=ro``, else ``immutable=1``), and only for reading."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from convmem import Memory
from convmem.errors import StoreError
from convmem.stores import AsyncSQLiteStore, SQLiteStore
from convmem.stores.base import AppendRequest
from convmem.testing._data import numbered


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _written(path: Path) -> None:
    store = SQLiteStore(path)
    store.append(AppendRequest("chat", numbered(3), user_id="u"))
    store.close()  # the last connection checkpoints: no -wal or -shm are left


def test_a_read_only_store_reads_everything_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _written(path)
    before = _digest(path)
    store = SQLiteStore(path, read_only=True)
    try:
        assert [m.message.id for m in store.messages("chat", user_id="u")] == ["m0", "m1", "m2"]
        assert [i.id for i in store.list_sessions(user_id="u")] == ["chat"]
        assert b"m2" in store.export_jsonl("chat", user_id="u")
        memory = Memory.open("chat", store=store, user_id="u", max_tokens=500)
        assert len(memory.context().messages) == 3
        with pytest.raises(StoreError, match="read-only; nothing was written"):
            store.append(AppendRequest("chat", numbered(1, start=3), user_id="u"))
        with pytest.raises(StoreError, match="read-only"):
            store.delete_session("chat", user_id="u")
    finally:
        store.close()
    # Not a byte of the database changes (in a writable directory SQLite makes the -shm WAL reads need).
    assert _digest(path) == before


def test_a_database_open_read_only_elsewhere_stays_readable_and_a_missing_one_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _written(path)
    held = sqlite3.connect(path)  # another process with the database open in WAL: its -shm exists
    held.execute("SELECT 1 FROM sessions").fetchall()
    try:
        store = SQLiteStore(path, read_only=True)
        assert [m.message.id for m in store.messages("chat", user_id="u")] == ["m0", "m1", "m2"]
        store.close()
    finally:
        held.close()
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(tmp_path / "absent.db", read_only=True)
    assert not (tmp_path / "absent.db").exists()


async def test_the_async_twin_opens_read_only_too(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _written(path)
    store = AsyncSQLiteStore(path, read_only=True)
    try:
        assert len(await store.messages("chat", user_id="u")) == 3
        with pytest.raises(StoreError, match="read-only"):
            await store.append(AppendRequest("chat", numbered(1, start=3), user_id="u"))
    finally:
        await store.aclose()
