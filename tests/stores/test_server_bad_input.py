"""Server backends: missing extras, missing or wrong URLs, unreachable servers and schema drift give clear errors.

Every connection error names the server (host and port) and never the password,
and a schema this convmem does not know is refused before anything is changed.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import convmem.stores
from convmem import ConfigurationError, StoreError
from convmem.errors import InvalidIdError, SessionNotFoundError
from convmem.stores import open_store
from convmem.stores.base import AppendRequest
from convmem.stores.postgres import PostgresStore
from convmem.stores.postgres._sql import MIGRATIONS
from convmem.stores.redis import RedisStore
from convmem.testing import numbered

from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

SECRET = "s3cret-Pa55"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def schema(tmp_path: Path) -> Iterator[str]:
    name = schema_for(tmp_path)
    yield name
    drop_schemas({name})


@pytest.mark.parametrize(
    ("backend", "module", "extra"),
    [("PostgresStore", "psycopg", "postgres"), ("RedisStore", "redis", "redis")],
)
def test_a_missing_extra_names_the_pip_command(
    backend: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package looks like to import
    for name in [m for m in sys.modules if m.startswith(("convmem.stores.postgres", "convmem.stores.redis"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(convmem.stores.__dict__, backend, raising=False)
    hint = f"pip install 'convmem[{extra}]'"
    with pytest.raises(ConfigurationError, match=rf"{module}.*{hint}".replace("[", r"\[").replace("]", r"\]")):
        getattr(convmem.stores, backend)
    with pytest.raises(ConfigurationError, match=hint.replace("[", r"\[").replace("]", r"\]")):
        open_store("postgresql://localhost/x" if extra == "postgres" else "redis://localhost/0")


def test_open_store_opens_the_server_backends() -> None:
    with psycopg.connect(PG_URL) as conn:  # a spec opens the default schema: remove it after, if we made it
        existed = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'convmem'").fetchone() is not None
    try:
        for spec in (PG_URL, PG_URL.replace("postgresql://", "postgres://")):
            store = open_store(spec)
            assert isinstance(store, PostgresStore)
            store.close()
    finally:
        if not existed:
            drop_schemas({"convmem"})
    store = open_store(REDIS_URL)  # connects and pings; writes nothing
    assert isinstance(store, RedisStore)
    store.close()


def test_urls_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, schema: str) -> None:
    monkeypatch.delenv("CONVMEM_POSTGRES_URL", raising=False)
    monkeypatch.delenv("CONVMEM_REDIS_URL", raising=False)
    with pytest.raises(ConfigurationError, match="CONVMEM_POSTGRES_URL"):
        PostgresStore()
    with pytest.raises(ConfigurationError, match="CONVMEM_REDIS_URL"):
        RedisStore()
    monkeypatch.setenv("CONVMEM_POSTGRES_URL", PG_URL)
    monkeypatch.setenv("CONVMEM_REDIS_URL", REDIS_URL)
    pg, rd = PostgresStore(schema=schema), RedisStore(prefix=prefix_for(tmp_path))
    batch = AppendRequest("s", numbered(1), user_id="u")
    assert pg.append(batch) == rd.append(batch) == [0]
    pg.close()
    rd.close()
    drop_prefixes({prefix_for(tmp_path)})


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"postgresql://postgres:{SECRET}@127.0.0.1:{{free}}/test", r"127\.0\.0\.1:\d+/test.*refused"),
        (f"postgresql://nobody:{SECRET}@127.0.0.1:5432/test", r"127\.0\.0\.1:5432/test.*role \"nobody\""),
        (f"postgresql://postgres:{SECRET}@127.0.0.1:5432/no_such_db", r"127\.0\.0\.1:5432/no_such_db.*does not exist"),
        (f"postgresql://postgres:{SECRET}@no-such-host.invalid:5432/test", r"no-such-host\.invalid:5432"),
        (f"postgresql://postgres:{SECRET}@127.0.0.1:6379/test", r"127\.0\.0\.1:6379/test"),  # Redis's port
        (f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test?sslmode=bogus", r"sslmode"),
    ],
)
def test_postgres_connection_errors_name_the_server_never_the_password(url: str, expected: str) -> None:
    with pytest.raises(StoreError, match=expected) as info:
        PostgresStore(url.replace("{free}", str(_free_port())), timeout=2)
    assert SECRET not in str(info.value)
    assert info.value.__cause__ is None  # the driver's exception (which may quote the URL) is not chained


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"redis://:{SECRET}@127.0.0.1:{{free}}/0", r"127\.0\.0\.1:\d+/0.*(refused|Error 111)"),
        (f"redis://nobody:{SECRET}@127.0.0.1:6379/0", r"127\.0\.0\.1:6379/0"),
        ("redis://127.0.0.1:6379/99", r"127\.0\.0\.1:6379/99.*(DB index|out of range)"),
        (f"redis://:{SECRET}@127.0.0.1:5432/0", r"127\.0\.0\.1:5432/0"),  # PostgreSQL's port
        ("http://127.0.0.1:6379", r"invalid Redis URL"),
    ],
)
def test_redis_connection_errors_name_the_server_never_the_password(url: str, expected: str) -> None:
    with pytest.raises(StoreError, match=expected) as info:
        RedisStore(url.replace("{free}", str(_free_port())), timeout=2, retry_for=0.5)
    assert SECRET not in str(info.value)
    assert info.value.__cause__ is None


def _tables(schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
            (schema,),
        ).fetchall()
    return [(str(a), str(b)) for a, b in rows]


def test_a_schema_of_a_newer_convmem_is_refused_before_any_change(schema: str) -> None:
    PostgresStore(PG_URL, schema=schema).close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {schema}.schema_migrations (name) VALUES ('0099_from_the_future')".encode())
    before = _tables(schema)
    with pytest.raises(StoreError, match=rf"{schema}.*newer convmem.*0099_from_the_future"):
        PostgresStore(PG_URL, schema=schema)
    assert _tables(schema) == before


def test_a_schema_of_another_program_is_refused(schema: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
        conn.execute(f"CREATE TABLE {schema}.invoices (id int)".encode())
    with pytest.raises(StoreError, match=rf"{schema}.*another program"):
        PostgresStore(PG_URL, schema=schema)
    assert _tables(schema) == [("invoices", "id")]


def test_a_bad_schema_name_or_ttl_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="schema"):
        PostgresStore(PG_URL, schema="Robert'); DROP TABLE students;--")
    from datetime import timedelta

    with pytest.raises(ConfigurationError, match="ttl"):
        RedisStore(REDIS_URL, ttl=timedelta(0))


def test_processes_starting_at_once_migrate_once(schema: str) -> None:
    """Eight stores open a fresh schema at the same moment; the advisory lock lets one migrate."""
    barrier, errors, stores = threading.Barrier(8), [], []

    def start() -> None:
        barrier.wait()
        try:
            stores.append(PostgresStore(PG_URL, schema=schema))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(PG_URL) as conn:
        names = conn.execute(f"SELECT name FROM {schema}.schema_migrations".encode()).fetchall()
    assert [n for (n,) in names] == [name for name, _ in MIGRATIONS]
    for store in stores:
        store.close()


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_an_id_prefix_is_taken_literally(backend: str, tmp_path: Path, schema: str) -> None:
    """LIKE wildcards and lex-range bytes in a prefix match only themselves."""
    store: Any = (
        PostgresStore(PG_URL, schema=schema)
        if backend == "postgres"
        else RedisStore(REDIS_URL, prefix=prefix_for(tmp_path))
    )
    try:
        for session_id in ("a_b", "axb", "c%d", "cxd", "[g", "(h"):
            store.append(AppendRequest(session_id, numbered(1, prefix=session_id), user_id="u"))
        for prefix, expected in (("a_", "a_b"), ("c%", "c%d"), ("[", "[g"), ("(", "(h")):
            assert store.get_session(prefix, user_id="u").id == expected
        with pytest.raises(SessionNotFoundError):
            store.get_session("_", user_id="u")
        with pytest.raises(InvalidIdError):  # a backslash is no id (convmem.limits.check_id): never a LIKE escape
            store.get_session("e\\", user_id="u")
    finally:
        store.close()
        drop_prefixes({prefix_for(tmp_path)})
