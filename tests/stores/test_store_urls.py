"""Store URLs choose their namespace: ``?schema=`` for PostgreSQL, ``?prefix=`` for Redis, everywhere a URL goes.

``open_store`` (so ``Memory(store=url)``, ``convmem sessions --db`` and
``convmem mcp --db``, which open their store through it) and the service's
``open_backend`` (``convmem serve --store``) read it; a session written
through one way is found through every other, and nothing lands in the default
namespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convmem import Memory
from convmem.cli import app
from convmem.errors import ConfigurationError
from convmem.server.backends import open_backend
from convmem.stores import open_store, split_store_url

from ._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for


@pytest.fixture(params=["postgres", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        schema = schema_for(tmp_path)
        yield f"{PG_URL}?schema={schema}"
        drop_schemas({schema})
    else:
        prefix = prefix_for(tmp_path)
        yield f"{REDIS_URL}?prefix={prefix}"
        drop_prefixes({prefix})


def test_every_way_in_reads_the_namespace_of_the_url(url: str) -> None:
    with Memory(store=url, session_id="chosen", user_id="alice", model="gpt-4o") as memory:
        memory.add({"role": "user", "content": "in my own namespace"})
    store = open_store(url)
    try:
        assert [s.id for s in store.list_sessions(user_id="alice")] == ["chosen"]
    finally:
        store.close()
    backend = open_backend(url)
    try:
        assert [s.id for s in backend.store.list_sessions(user_id="alice")] == ["chosen"]
    finally:
        backend.close()
    listed = CliRunner().invoke(app, ["sessions", "list", "--db", url, "--user", "alice", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [s["id"] for s in json.loads(listed.output)] == ["chosen"]
    elsewhere = url + "_other"  # another namespace on the same server holds nothing of it
    other = open_store(elsewhere)
    try:
        assert [s.id for s in other.list_sessions(user_id="alice")] == []
    finally:
        other.close()
        if url.startswith("postgresql"):
            drop_schemas({split_store_url(elsewhere)[1]["schema"]})
        else:
            drop_prefixes({split_store_url(elsewhere)[1]["prefix"]})


def test_the_option_is_taken_out_and_other_parameters_stay() -> None:
    assert split_store_url("postgresql://h/db?sslmode=disable&schema=s1") == (
        "postgresql://h/db?sslmode=disable",
        {"schema": "s1"},
    )
    assert split_store_url("redis://h:6379/0?prefix=app:") == ("redis://h:6379/0", {"prefix": "app:"})
    assert split_store_url("redis://h/0?schema=x") == ("redis://h/0?schema=x", {})  # not Redis's option
    for bad in ("postgresql://h/db?schema=", "postgresql://h/db?schema=a&schema=b", "redis://h/0?prefix="):
        with pytest.raises(ConfigurationError, match="once, with a value"):
            split_store_url(bad)


def test_a_url_and_a_setting_that_disagree_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="give one"):
        open_backend(f"{PG_URL}?schema=convmem_one", schema="convmem_other")
