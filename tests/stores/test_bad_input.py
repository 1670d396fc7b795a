"""Corrupt, foreign or newer stores give an error naming the path, and are never changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from convmem import ConfigurationError, StoreError
from convmem.stores import FileStore, MemoryStore, SQLiteStore, open_store
from convmem.stores.base import AppendRequest
from convmem.testing import numbered


def test_a_garbage_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    garbage = b"this is not a database, it is a shopping list\n" * 100
    path.write_bytes(garbage)
    with pytest.raises(StoreError, match=r"chat\.db.*corrupt or not a database"):
        SQLiteStore(path)
    assert path.read_bytes() == garbage


def _database(path: Path, *statements: str) -> bytes:
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    db.close()
    return path.read_bytes()


def test_a_database_of_a_newer_convmem_is_refused_before_any_change(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    before = _database(path, "INSERT INTO schema_migrations VALUES ('0099_from_the_future', '2030-01-01')")
    with pytest.raises(StoreError, match=r"new\.db.*newer convmem.*0099_from_the_future"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_a_database_of_another_program_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    before = _database(path, "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match=r"other\.db.*another program"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_an_unopenable_database_path_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-directory.db").mkdir()
    with pytest.raises(StoreError, match=r"a-directory\.db"):
        SQLiteStore(tmp_path / "a-directory.db")
    store = SQLiteStore(tmp_path / "ok.db")
    store.close()
    with pytest.raises(StoreError, match=r"ok\.db"):
        store.get_session("x")


def test_a_corrupt_line_is_reported_with_file_and_line_and_kept(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append(AppendRequest("s", numbered(5), user_id="u"))
    path = FileStore(tmp_path).path_of("s", user_id="u") / "messages.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2][:30] + b"#" + lines[2][31:]
    damaged = b"\n".join(lines)
    path.write_bytes(damaged)
    with pytest.raises(StoreError, match=r"messages.jsonl: line 3 is corrupt"):
        list(store.messages("s", user_id="u"))
    with pytest.raises(StoreError, match=r"line 3"):
        store.load("s", user_id="u")  # the window starts at seq 0, so load reads line 3
    assert path.read_bytes() == damaged


def test_a_torn_last_line_is_cut_and_nothing_else(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append(AppendRequest("s", numbered(3), user_id="u"))
    path = FileStore(tmp_path).path_of("s", user_id="u") / "messages.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq":3,"tokens":5,"message":{"role":"us')  # a crash mid-write
    assert [r.seq for r in store.messages("s", user_id="u")] == [0, 1, 2]  # readers skip it
    assert [r.seq for r in FileStore(tmp_path).load("s", user_id="u").window] == [0, 1, 2]
    assert path.read_bytes() == whole  # repaired under the lock
    assert store.append(AppendRequest("s", numbered(1, start=3), user_id="u")) == [3]


def test_a_corrupt_session_record_is_named(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append(AppendRequest("s", numbered(1), user_id="u"))
    (FileStore(tmp_path).path_of("s", user_id="u") / "session.json").write_text("{")
    with pytest.raises(StoreError, match=r"session\.json is corrupt"):
        store.get_session("s", user_id="u")
    (tmp_path / "plain-file").write_text("x")
    with pytest.raises(StoreError, match=r"not a directory"):
        FileStore(tmp_path / "plain-file")


def test_open_store_understands_the_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVMEM_DB", str(tmp_path / "default.db"))
    opened = [
        open_store(),
        open_store("sqlite"),
        open_store(f"sqlite://{tmp_path}/a.db"),
        open_store(str(tmp_path / "b.sqlite")),
        open_store(f"files://{tmp_path}/dir"),
        open_store("memory"),
    ]
    assert [type(s).__name__ for s in opened] == ["SQLiteStore"] * 4 + ["FileStore", "MemoryStore"]
    assert [getattr(s, "path", None) for s in opened[:3]] == [str(tmp_path / "default.db")] * 2 + [
        str(tmp_path / "a.db")
    ]
    assert isinstance(opened[5], MemoryStore)
    for store in opened:
        store.close()
    for bad in ("mysql://x", "sqlite://relative.db", "notes.txt"):
        with pytest.raises(ConfigurationError):
            open_store(bad)
