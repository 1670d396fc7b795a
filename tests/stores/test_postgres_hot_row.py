"""PostgreSQL: the session row every append updates stays HOT, and the listing it feeds stays exact.

Every append updates its session's row (counters, state). While ``updated_at`` was in the listing index no
such update could be heap-only: a burst left one dead version per message under the row's primary key, and
each later append walked them. The listing index now keys a coarse copy (``listed_at``, kept by a trigger
within a second of the exact time), so these tests check the two things that design must keep: the updates
of a burst are HOT, and ``list_sessions(limit=k)`` is still exactly the first k by the exact time, whatever
the times (within the lag, beyond it, going backwards).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import Memory, Message
from convmem.stores.base import AppendRequest
from convmem.testing._data import numbered
from tests._quick import examples

from ._servers import PG_URL, drop_schemas, schema_for

psycopg = pytest.importorskip("psycopg")

if TYPE_CHECKING:
    from convmem.stores.postgres import PostgresStore

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[tuple[PostgresStore, str]]:
    from convmem.stores.postgres import PostgresStore

    schema = schema_for(tmp_path)
    store = PostgresStore(PG_URL, schema=schema, max_size=2)
    try:
        yield store, schema
    finally:
        store.close()
        drop_schemas({schema})


_users = iter(range(10**9))

# A touch moves one session's exact time: by less than the listing lag, by more, or backwards.
touches = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from([0.0, 0.001, 0.3, 0.999, 1.0, 1.001, 2.5, 60.0, -0.5, -30.0])),
    max_size=40,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(touches=touches, limit=st.integers(1, 7))
def test_a_limited_listing_is_exactly_the_first_sessions_by_their_exact_time(
    pg: tuple[PostgresStore, str], touches: list[tuple[int, float]], limit: int
) -> None:
    store, schema = pg
    user = f"u{next(_users)}"
    for n in range(6):
        store.append(AppendRequest(f"s{n}", numbered(1), user_id=user))
    clock = dict.fromkeys(range(6), BASE)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for n in range(6):
            conn.execute(
                f"UPDATE {schema}.sessions SET updated_at = %s WHERE user_id = %s AND id LIKE %s".encode(),
                (BASE, user, f"%s{n}"),
            )
        for n, step in touches:
            clock[n] += timedelta(seconds=step)
            conn.execute(
                f"UPDATE {schema}.sessions SET updated_at = %s WHERE user_id = %s AND id LIKE %s".encode(),
                (clock[n], user, f"%s{n}"),
            )
        for updated, listed in conn.execute(
            f"SELECT updated_at, listed_at FROM {schema}.sessions WHERE user_id = %s".encode(), (user,)
        ):
            assert listed <= updated < listed + timedelta(seconds=1), "the trigger's bound, which the listing uses"
    everything = store.list_sessions(user_id=user)
    exact = sorted(everything, key=lambda info: (info.updated_at, info.id), reverse=True)
    assert [i.id for i in everything] == [i.id for i in exact]
    page = store.list_sessions(user_id=user, limit=limit)
    assert [i.id for i in page] == [i.id for i in exact[:limit]]


def _session_updates(schema: str) -> tuple[int, int]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'sessions'",
            (schema,),
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


@pytest.mark.slow
def test_the_updates_of_an_append_burst_are_heap_only(pg: tuple[PostgresStore, str]) -> None:
    store, schema = pg
    memory = Memory(store=store, session_id="burst", user_id="u", max_tokens=300)  # evicts: saves state
    for i in range(400):
        memory.add(Message(role="user" if i % 2 == 0 else "assistant", content=f"message {i} about the plan"))
    # The first add inserts the row, the other 399 update it. The server's statistics arrive from the
    # store's connections when they go idle (up to ~10 s later).
    deadline = time.monotonic() + 30
    while (counts := _session_updates(schema))[0] < 399 and time.monotonic() < deadline:
        time.sleep(0.5)
    updates, hot = counts
    assert updates >= 399, f"the server reported {updates} updates of the session row"
    # A second of burst keeps the listing key; only its moves (about one a second here) may leave the page.
    assert hot >= 0.9 * updates, f"{hot} of {updates} updates of the session row were heap-only"


def _scans_of_messages(schema: str) -> int:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'messages'", (schema,)
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.slow
def test_an_append_reads_no_other_history(pg: tuple[PostgresStore, str]) -> None:
    """The check that a batch holds no id of a fork's shared history ran as a join that the planner made a
    sequential scan of the whole messages table, every user's, on every append: per-add cost rose with it."""
    store, schema = pg
    for n in range(20):  # other history, so that a scan of the table is not free
        store.append(AppendRequest(f"other{n}", numbered(100), user_id="someone"))
    memory = Memory(store=store, session_id="burst", user_id="u", max_tokens=300)
    memory.add(Message(role="user", content="the first message"))
    deadline = time.monotonic() + 30
    while _session_updates(schema)[0] < 1 and time.monotonic() < deadline:
        time.sleep(0.5)  # the statistics so far, as the server has them
    before = _scans_of_messages(schema)
    for i in range(200):
        memory.add(Message(role="user" if i % 2 else "assistant", content=f"message {i} about the plan"))
    while _session_updates(schema)[0] < 200 and time.monotonic() < deadline + 30:
        time.sleep(0.5)
    scans = _scans_of_messages(schema) - before
    assert scans < 20, f"200 appends made {scans} sequential scans of the messages table"
