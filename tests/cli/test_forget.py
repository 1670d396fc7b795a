"""``convmem forget`` and ``convmem compact`` on a real SQLite file: the receipt, the erasure, the disk."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from convmem.cli import app
from convmem.messages import Message
from convmem.stores import SQLiteStore
from convmem.stores.base import AppendRequest

runner = CliRunner()


def _seed(path: Path) -> None:
    store = SQLiteStore(path)
    try:
        for user in ("alice", "bob"):
            for session in ("s1", "s2"):
                msg = Message(role="user", content=f"{user} secret zq{user}{session}q9", id=f"{session}-m")
                store.append(AppendRequest(session, [(msg, 3)], user_id=user))
    finally:
        store.close()


def invoke(*args: str, input: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), input=input, env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_forget_prints_the_receipt_and_compact_clears_the_file(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    code, out = invoke("forget", "--user", "alice", "--db", str(db), "--yes")
    assert code == 0, out
    receipt = json.loads(out)
    assert receipt["removed"]["sessions"] == 2
    assert receipt["removed"]["messages"] == 2
    assert receipt["pending"]
    assert receipt["compact"].endswith(f"compact --db {db}")
    code, out = invoke("compact", "--db", str(db))
    assert code == 0, out
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"zqalice" not in data
    assert b"zqbobs1q9" in data
    store = SQLiteStore(db)
    try:
        assert sorted(i.id for i in store.list_sessions(user_id="bob")) == ["s1", "s2"]
        assert store.list_sessions(user_id="alice") == []
    finally:
        store.close()


def test_forget_one_session_asks_first_and_a_no_erases_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    code, _ = invoke("forget", "-u", "bob", "-s", "s1", "--db", str(db), input="n\n")
    assert code == 1
    code, out = invoke("forget", "-u", "bob", "-s", "s1", "--db", str(db), "--compact", input="y\n")
    assert code == 0, out
    receipt = json.loads(out[out.index("{") :])
    assert receipt["sessions"] == ["s1"]
    assert receipt["compacted"] is True
    assert receipt["pending"] == ""


def test_forget_needs_a_user_and_a_missing_database_is_an_error(tmp_path: Path) -> None:
    code, out = invoke("forget", "--db", str(tmp_path / "c.db"), "--yes")
    assert code == 2
    assert "--user" in out
    code, out = invoke("forget", "-u", "a", "--db", str(tmp_path / "missing.db"), "--yes")
    assert code == 2
    assert "no database" in out
    assert not (tmp_path / "missing.db").exists()


def test_sweep_keeps_the_newest_sessions(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    code, out = invoke("sweep", "-u", "alice", "--keep", "1", "--db", str(db), "--yes")
    assert code == 0, out
    assert json.loads(out)["sessions"] == ["s1"]  # s2 was written last
    code, out = invoke("sweep", "-u", "alice", "--db", str(db), "--yes")
    assert code == 2
    assert "--keep" in out
    store = SQLiteStore(db)
    try:
        assert [i.id for i in store.list_sessions(user_id="alice")] == ["s2"]
        assert len(store.list_sessions(user_id="bob")) == 2
    finally:
        store.close()
