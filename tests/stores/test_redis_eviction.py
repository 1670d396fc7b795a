"""A Redis that may lose data is named: its ``maxmemory-policy`` is read at open, and nothing opens with holes.

Each test owns a ``redis-server`` (the machine's binary, on a free port) with a small ``maxmemory``
and one policy, and fills it: under ``noeviction`` writes are refused by name and every session still
reads whole; under a policy that can evict the store's keys the store refuses to open unless
``allow_eviction=True`` accepts the risk, and then every session either opens with all its
acknowledged messages or raises a named error, never a silent hole.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from convmem import Memory
from convmem.errors import ConfigurationError, ConvmemError, StoreError
from convmem.stores._record import scoped
from convmem.stores.redis import AsyncRedisStore, RedisStore

from ._servers import RedisServer

POLICIES = (
    "noeviction",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
)
DAY = timedelta(days=1)


@pytest.fixture
def small_redis(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, durable=False, extra=["--maxmemory", "2mb", "--maxmemory-policy", request.param])
    server.start()
    yield server
    server.stop()


def _evicts(policy: str, ttl: timedelta | None) -> bool:
    return policy.startswith("allkeys-") or (ttl is not None and policy.startswith("volatile-"))


@pytest.mark.parametrize("small_redis", POLICIES, indirect=True)
@pytest.mark.parametrize("ttl", [None, DAY], ids=["no-ttl", "ttl"])
def test_the_policy_is_read_at_open_and_one_that_can_evict_the_stores_keys_is_refused(
    small_redis: RedisServer, ttl: timedelta | None
) -> None:
    policy = small_redis.command[small_redis.command.index("--maxmemory-policy") + 1]
    if _evicts(policy, ttl):
        with pytest.raises(ConfigurationError, match=f"maxmemory-policy is '{policy}' \\(CONFIG GET\\)") as info:
            RedisStore(small_redis.url, ttl=ttl)
        assert "allow_eviction=True" in str(info.value)
        with pytest.warns(RuntimeWarning, match=policy):
            RedisStore(small_redis.url, ttl=ttl, allow_eviction=True).close()
    else:
        RedisStore(small_redis.url, ttl=ttl).close()


@pytest.mark.slow
@pytest.mark.parametrize("small_redis", POLICIES, indirect=True)
def test_filling_memory_under_every_policy_never_opens_a_session_with_a_hole(small_redis: RedisServer) -> None:
    policy = small_redis.command[small_redis.command.index("--maxmemory-policy") + 1]
    ttl = DAY if policy.startswith("volatile-") else None  # the managed services' default: keys that expire
    with pytest.warns(RuntimeWarning) if _evicts(policy, ttl) else _no_warning():
        store = RedisStore(small_redis.url, ttl=ttl, allow_eviction=True, retry_for=0.2)
    acknowledged: dict[str, int] = {}
    refused = None
    try:
        for s in range(150):  # ~3.6 MB of messages into 2 MB
            session_id = f"chat-{s:03d}"
            memory = Memory(max_tokens=100_000, store=store, session_id=session_id)
            try:
                for i in range(6):
                    memory.add({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "x" * 4000})
                    acknowledged[session_id] = acknowledged.get(session_id, 0) + 1
            except StoreError as exc:  # a full noeviction Redis refuses the write, by name
                refused = exc
                break
        assert policy != "noeviction" or refused is not None, "memory never filled up"
        whole = lost = second_lost = 0
        for session_id, count in acknowledged.items():
            try:
                again = Memory.open(session_id, store=store, max_tokens=100_000)
                # What the open loaded (every message fits the window), not a second read: Redis evicts before
                # any command once over maxmemory, reads included, so a later read may meet a newer hole.
                messages = again.context().messages
            except ConvmemError:
                lost += 1  # named: SessionLostError, SessionNotFoundError, an ambiguous prefix...
                continue
            assert len(messages) == count, f"{session_id} opened with {len(messages)} of {count} messages"
            whole += 1
            # Every read after the open is checked too: it meets newer holes (Redis evicts before any command
            # once over maxmemory), and each either gives the whole session or raises a named error.
            for reader in ("store", "memory"):
                try:
                    rows = list(store.messages(session_id)) if reader == "store" else again.messages()
                except ConvmemError:
                    second_lost += 1
                    continue
                assert len(rows) == count, f"{session_id}: a read after the open gave {len(rows)} of {count}"
            try:
                exported = store.export_jsonl(session_id)
            except ConvmemError:
                second_lost += 1
            else:
                assert exported.count(b"\n") == 1 + count, f"{session_id}: an export with a hole"  # header + rows
        if policy == "noeviction":
            assert lost == second_lost == 0, "a full noeviction Redis must still be read"
        elif _evicts(policy, ttl):
            assert lost > 0, "nothing was evicted: the test did not fill memory"
        assert whole > 0
    finally:
        store.close()


@pytest.mark.parametrize("small_redis", ["allkeys-lru"], indirect=True)
async def test_the_async_store_refuses_an_evicting_policy_on_its_first_operation(small_redis: RedisServer) -> None:
    store = AsyncRedisStore(small_redis.url)
    try:
        for _ in range(2):  # and keeps refusing: it is not checked once and forgotten
            with pytest.raises(ConfigurationError, match="allkeys-lru"):
                await store.list_sessions()
    finally:
        await store.aclose()


class _no_warning:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_managed_redis_that_refuses_config_is_asked_through_info_then_the_option(tmp_path: Path) -> None:
    renamed = ["--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""]
    server = RedisServer(tmp_path / "a", durable=False, extra=renamed)
    (tmp_path / "a").mkdir()
    server.start()
    try:  # CONFIG is refused (renamed away, as several managed services do): INFO says the policy
        with pytest.raises(ConfigurationError, match=r"'allkeys-lru' \(INFO memory\)"):
            RedisStore(server.url)
    finally:
        server.stop()
    server = RedisServer(tmp_path / "b", durable=False, extra=[*renamed, "--rename-command", "INFO", ""])
    (tmp_path / "b").mkdir()
    server.start()
    try:  # neither CONFIG nor INFO: the store cannot know, and says which option tells it
        with pytest.raises(ConfigurationError, match="pass maxmemory_policy="):
            RedisStore(server.url)
        with pytest.raises(ConfigurationError, match=r"'allkeys-lru' \(the maxmemory_policy option\)"):
            RedisStore(server.url, maxmemory_policy="allkeys-lru")
        RedisStore(server.url, maxmemory_policy="noeviction").close()
    finally:
        server.stop()


def test_a_read_after_the_open_meets_a_new_hole_and_names_it(tmp_path: Path) -> None:
    """What eviction does between an open and a later read, done by hand (a row set deleted behind the store's back):
    the messages read, the memory's archive read and the export each raise SessionLostError, never return holes."""
    import redis

    from convmem.errors import SessionLostError

    from ._backends import backend
    from ._servers import REDIS_URL

    with backend("redis", tmp_path) as store:
        memory = Memory(max_tokens=100_000, store=store, session_id="s")
        for i in range(4):
            memory.add({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"})
        fork = store.fork("s", 1)
        again = Memory.open("s", store=store, max_tokens=100_000)
        assert len(list(store.messages("s"))) == 4
        assert len(list(store.messages(fork.id))) == 2
        client = redis.Redis.from_url(REDIS_URL)
        try:
            assert client.delete(f"{store.keys.prefix}m:{scoped(None, 's')}") == 1  # evicted: the unpinned rows
        finally:
            client.close()
        for read in (
            lambda: list(store.messages("s")),
            lambda: list(store.messages("s", from_seq=3)),  # a page that itself holds no hole
            again.messages,
            lambda: store.export_jsonl("s"),
            lambda: list(store.messages(fork.id)),  # the fork's shared rows were in the parent's row set
            lambda: Memory.open("s", store=store),
        ):
            with pytest.raises(SessionLostError, match=r"(4|2) messages were stored, 0 remain"):
                read()
