"""PostgreSQL honours the store's ``timeout`` behind another client's lock and for a statement.

Another client holds a lock the store needs: the store gives up after its own ``timeout`` with a
StoreError naming it, not after the server's defaults (forever) or a driver's; nothing is written,
and the session is whole once the lock is released.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from convmem.errors import StoreError
from convmem.stores.base import AppendRequest
from convmem.testing._data import numbered

from ._servers import PG_URL, drop_schemas, schema_for

psycopg = pytest.importorskip("psycopg")


def test_a_write_behind_another_clients_lock_gives_up_after_the_stores_timeout(tmp_path: Path) -> None:
    from convmem.stores.postgres import PostgresStore

    schema = schema_for(tmp_path)
    store = PostgresStore(PG_URL, schema=schema, max_size=2, timeout=1.0)
    try:
        store.append(AppendRequest("s", numbered(2), user_id="u"))
        with psycopg.connect(PG_URL) as other:  # a transaction of another client, holding the table
            other.execute(f"LOCK TABLE {schema}.sessions IN ACCESS EXCLUSIVE MODE".encode())
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"timeout of 1s"):
                store.append(AppendRequest("s", numbered(1, start=2), user_id="u", expected_seq=2))
            waited = time.monotonic() - started
            assert waited < 5, f"waited {waited:.1f}s behind the lock with timeout=1"
            other.rollback()
        assert [m.message.id for m in store.messages("s", user_id="u")] == ["m0", "m1"]  # nothing half-written
        store.append(AppendRequest("s", numbered(1, start=2), user_id="u", expected_seq=2))
    finally:
        store.close()
        drop_schemas({schema})


def test_a_statement_longer_than_the_timeout_is_cancelled(tmp_path: Path) -> None:
    from convmem.stores.postgres import PostgresStore

    schema = schema_for(tmp_path)
    store = PostgresStore(PG_URL, schema=schema, max_size=1, timeout=1.0)
    try:
        store.append(AppendRequest("s", numbered(1), user_id="u"))
        with store.db.pool.connection() as conn:  # a connection as the store configures them
            assert conn.execute("SHOW statement_timeout").fetchone() == ("1s",)
            assert conn.execute("SHOW lock_timeout").fetchone() == ("1s",)
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("SELECT pg_sleep(3)")
    finally:
        store.close()
        drop_schemas({schema})
