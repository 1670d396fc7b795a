"""What only the Redis store has: session TTLs, and a key layout that deleting a session cleans up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from convmem.errors import SessionNotFoundError
from convmem.stores.base import AppendRequest
from convmem.stores.redis import RedisStore
from convmem.testing import numbered

from ._servers import REDIS_URL, drop_prefixes, prefix_for


@pytest.fixture
def prefix(tmp_path: Path) -> Iterator[str]:
    yield prefix_for(tmp_path)
    drop_prefixes({prefix_for(tmp_path)})


def _keys(prefix: str) -> list[str]:
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as client:
        return sorted(client.scan_iter(match=f"{prefix}*"))


def test_a_session_not_written_for_its_ttl_expires_and_frees_its_ids(prefix: str) -> None:
    store = RedisStore(REDIS_URL, prefix=prefix, ttl=timedelta(milliseconds=400))
    try:
        store.append(AppendRequest("short", numbered(3), user_id="u"))
        store.append(AppendRequest("kept", numbered(1, prefix="k"), user_id="u"))
        time.sleep(0.25)
        store.append(AppendRequest("kept", numbered(1, start=1, prefix="k"), user_id="u"))  # a write refreshes the TTL
        time.sleep(0.25)
        assert [i.id for i in store.list_sessions(user_id="u")] == ["kept"]  # the index drops what expired
        with pytest.raises(SessionNotFoundError):
            store.get_session("short", user_id="u")
        assert store.append(AppendRequest("other", numbered(3), user_id="u")) == [
            0,
            1,
            2,
        ]  # the expired session's ids are free
        assert not [k for k in _keys(prefix) if k.endswith(":short")]
    finally:
        store.close()


def test_a_fork_keeps_the_history_it_reads_alive(prefix: str) -> None:
    store = RedisStore(REDIS_URL, prefix=prefix, ttl=timedelta(milliseconds=400))
    try:
        store.append(AppendRequest("parent", numbered(4), user_id="u"))
        fork = store.fork("parent", 2, user_id="u")
        for n in range(3):  # the fork is written; its parent is not, but the fork reads its rows 0..2
            time.sleep(0.2)
            store.append(AppendRequest(fork.id, numbered(1, start=10 + n, prefix="f"), user_id="u"))
        assert [r.seq for r in store.messages(fork.id, user_id="u")] == [0, 1, 2, 3, 4, 5]
    finally:
        store.close()


def test_without_a_ttl_nothing_expires_and_deleting_removes_every_key(prefix: str) -> None:
    store = RedisStore(REDIS_URL, prefix=prefix)
    try:
        store.append(
            AppendRequest("s", [*numbered(1, prefix="sys", role="system"), *numbered(3, start=1)], user_id="u")
        )
        fork = store.fork("s", 2, user_id="u")
        with redis.Redis.from_url(REDIS_URL) as client:
            assert all(client.pttl(k) == -1 for k in _keys(prefix))
        store.delete_session("s", user_id="u")  # hidden, kept for the fork
        store.delete_session(fork.id, user_id="u")  # now both go, with their rows, ids and index entries
        assert _keys(prefix) == []
    finally:
        store.close()
