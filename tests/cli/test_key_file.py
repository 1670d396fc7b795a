"""``$CONVMEM_KEY_FILE``: the CLI's store commands read an encrypted store with the key file it names; the
service refuses to start with it (it does not encrypt yet), rather than write in the clear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convmem.cli import app
from convmem.errors import ConfigurationError
from convmem.messages import Message
from convmem.stores import SQLiteStore
from convmem.stores.base import AppendRequest
from convmem.stores.encrypted import EncryptedStore, KeyRing

runner = CliRunner()
CANARY = "zqcanary4242q9"


def _seeded(tmp_path: Path) -> tuple[Path, Path]:
    ring = KeyRing.generate("k1")
    keys = tmp_path / "keys.json"
    keys.write_text(ring.to_json())
    db = tmp_path / "chat.db"
    store = EncryptedStore(SQLiteStore(db), ring)
    message = Message(role="user", content=f"my card {CANARY}", id="m0")
    store.append(AppendRequest("chat", [(message, 4)], user_id="alice"))
    store.close()
    return db, keys


def _run(*args: str, keys: Path | None) -> tuple[int, str]:
    env = {"COLUMNS": "200", "CONVMEM_KEY_FILE": str(keys) if keys else ""}
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


def test_the_cli_reads_an_encrypted_store_with_the_key_file_and_only_with_it(tmp_path: Path) -> None:
    db, keys = _seeded(tmp_path)
    code, out = _run("sessions", "export", "chat", "--db", str(db), "-u", "alice", keys=keys)
    assert code == 0, out
    assert json.loads(out.splitlines()[1])["message"]["content"] == f"my card {CANARY}"
    code, out = _run("sessions", "export", "chat", "--db", str(db), "-u", "alice", keys=None)
    assert code == 0, out
    assert CANARY not in out  # without the key: the sealed rows as stored
    wrong = tmp_path / "wrong.json"
    wrong.write_text(KeyRing.generate("k1").to_json())
    code, out = _run("sessions", "show", "chat", "--db", str(db), "-u", "alice", keys=wrong)
    assert code == 2
    assert "does not open" in out
    code, out = _run("forget", "--user", "alice", "--db", str(db), "--yes", keys=keys)
    assert code == 0, out
    assert json.loads(out)["removed"]["blocks"] == 1  # the user's data key went with them


def test_the_service_refuses_a_key_file_it_would_not_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from convmem.server.backends import open_backend

    _, keys = _seeded(tmp_path)
    monkeypatch.setenv("CONVMEM_KEY_FILE", str(keys))
    with pytest.raises(ConfigurationError, match="does not encrypt at rest"):
        open_backend(str(tmp_path / "service.db"))
