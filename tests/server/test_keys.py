"""Keys: stored only as hashes, shown once, never logged or echoed; the CLI and a real ``convmem serve``."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from convmem.errors import ConfigurationError
from convmem.server.keys import hash_key, open_registry

CLI = [sys.executable, "-m", "convmem"]


def test_the_registry_stores_hashes_only(tmp_path: Path) -> None:
    registry = open_registry(str(tmp_path / "keys.db"))
    key = registry.create_key("acme", label="ci")
    assert key.secret not in repr(key)
    assert key.secret not in repr(registry)
    registry.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert key.secret.encode() not in raw
    rows = sqlite3.connect(tmp_path / "keys.db").execute("SELECT key_hash FROM api_keys").fetchall()
    assert rows == [(hash_key(key.secret),)]
    again = open_registry(str(tmp_path / "keys.db"))
    assert again.tenant_of(key.secret) == "acme"
    assert again.tenant_of(key.secret[:-1] + ("A" if key.secret[-1] != "A" else "B")) is None
    with pytest.raises(ConfigurationError, match="tenant name"):  # in the tree, no longer a bare ValueError
        again.create_key("Not A Tenant")
    again.close()


def test_keys_cli_prints_the_key_once_and_lists_ids_only(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from convmem.cli import app

    runner = CliRunner()
    db = str(tmp_path / "keys.db")
    made = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--keys", db])
    assert made.exit_code == 0
    key = made.stdout.strip()
    assert key.startswith("cmk_")
    assert key not in made.stderr
    listed = runner.invoke(app, ["keys", "list", "--keys", db])
    assert key not in listed.output
    assert key.split("_")[1] in listed.output
    revoked = runner.invoke(app, ["keys", "revoke", key.split("_")[1], "--keys", db])
    assert revoked.exit_code == 0
    assert open_registry(db).tenant_of(key) is None
    bad = runner.invoke(app, ["keys", "create", "--tenant", "BAD NAME", "--keys", db])
    assert bad.exit_code == 2
    assert "tenant name" in bad.stderr


def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import convmem.server as server

    monkeypatch.setitem(sys.modules, "fastapi", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'convmem\[server\]'"):
        server.require_server_extra()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_convmem_serve_never_logs_or_echoes_a_key(tmp_path: Path) -> None:
    keys_db = str(tmp_path / "keys.db")
    registry = open_registry(keys_db)
    key = registry.create_key("acme").secret
    revoked = registry.create_key("acme")
    registry.revoke(revoked.info.key_id)
    registry.close()
    admin = "admin-" + os.urandom(16).hex()
    port = _free_port()
    log = tmp_path / "serve.log"
    env = os.environ | {"CONVMEM_ADMIN_KEY": admin}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *CLI,
                "serve",
                "--store",
                str(tmp_path / "data.db"),
                "--keys",
                keys_db,
                "--port",
                str(port),
                "--log-level",
                "trace",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    made_keys: list[str] = []
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        http = httpx.Client(timeout=60)  # a loaded machine can be slow; never a reason to fail here
        auth = {"Authorization": f"Bearer {key}"}
        assert http.post(url + "/v1/sessions", json={"model": "gpt-4o", "id": "s"}, headers=auth).status_code == 201
        body = {"messages": [{"role": "user", "content": "hi"}]}
        assert http.post(url + "/v1/sessions/s/messages", json=body, headers=auth).status_code == 201
        for wrong in (revoked.secret, key + "x", admin):
            response = http.get(url + "/v1/sessions", headers={"Authorization": f"Bearer {wrong}"})
            assert response.status_code == 401
            assert wrong not in response.text
        created = http.post(url + "/v1/admin/tenants/acme/keys", json={}, headers={"Authorization": f"Bearer {admin}"})
        assert created.status_code == 201
        made_keys.append(created.json()["key"])
        assert http.get(url + "/v1/nowhere", headers=auth).status_code == 404
    finally:
        if "http" in locals():
            http.close()
        proc.terminate()
        proc.wait(15)
    text = log.read_text()
    assert "GET /v1/sessions" in text  # the access log ran, at trace level
    secrets = [key, revoked.secret, admin, *made_keys]
    assert [s[:12] for s in secrets if s in text or s[13:] in text] == []


def test_a_postgresql_registry_serves_several_hosts(tmp_path: Path) -> None:
    from ..stores._servers import PG_URL, drop_schemas, schema_for

    schema = schema_for(tmp_path)
    registry = open_registry(f"{PG_URL}#{schema}")
    try:
        key = registry.create_key("acme")
        other = open_registry(f"{PG_URL}#{schema}")  # another worker, another host
        assert other.tenant_of(key.secret) == "acme"
        registry.revoke(key.info.key_id)
        assert registry.tenant_of(key.secret) is None
        other.close()
        import psycopg

        with psycopg.connect(PG_URL) as conn:
            hashes = conn.execute(f"SELECT key_hash FROM {schema}.api_keys").fetchall()
        assert hashes == [(hash_key(key.secret),)]
    finally:
        registry.close()
        drop_schemas({schema})
