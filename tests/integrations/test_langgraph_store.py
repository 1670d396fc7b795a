"""ConvmemStore keeps LangGraph's BaseStore contract: checked against LangGraph's own InMemoryStore, op by op.

langgraph ships no store conformance tests, so the contract is LangGraph's reference implementation:
random sequences of put / delete / get / search (filters, offsets) / list_namespaces give the same answers
from both. Then what only convmem adds: the items persist in the store, are the user's facts (a memory with
``facts=True`` renders them), keep their history, and never cross users.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from convmem import ConfigurationError, Memory
from convmem.integrations.langgraph_store import ConvmemStore
from convmem.stores import open_store

USERS = ["alice", "bob"]
_ns = st.tuples(st.sampled_from(USERS), st.sampled_from(["memories", "prefs"])) | st.tuples(
    st.sampled_from(USERS), st.just("memories"), st.sampled_from(["a", "b"])
)
_value = st.fixed_dictionaries(
    {"content": st.sampled_from(["likes tea", "likes trains", "vegetarian"]), "n": st.integers(0, 3)}
)
_op = st.one_of(
    st.tuples(st.just("put"), _ns, st.sampled_from(["k1", "k2", "k3"]), _value),
    st.tuples(st.just("delete"), _ns, st.sampled_from(["k1", "k2", "k3"]), st.none()),
    st.tuples(st.just("get"), _ns, st.sampled_from(["k1", "k2", "k3"]), st.none()),
    st.tuples(
        st.just("search"),
        st.tuples(st.sampled_from(USERS)),
        st.none(),
        st.sampled_from([None, {"n": 1}, {"n": {"$gte": 2}}, {"content": {"$ne": "likes tea"}}]),
    ),
    st.tuples(st.just("list"), st.tuples(st.sampled_from(USERS)), st.none(), st.sampled_from([None, 2])),
)


def _run(store: Any, op: tuple[str, Any, Any, Any]) -> Any:
    kind, namespace, key, extra = op
    if kind == "put":
        return store.put(namespace, key, extra)
    if kind == "delete":
        return store.delete(namespace, key)
    if kind == "get":
        item = store.get(namespace, key)
        return None if item is None else (item.namespace, item.key, item.value)
    if kind == "search":
        found = store.search(namespace, filter=extra, limit=100)
        return sorted((i.namespace, i.key, repr(sorted(i.value.items()))) for i in found)
    if isinstance(store, InMemoryStore):
        # InMemoryStore lists a namespace once anything touched it (a delete of a missing key too), as a
        # defaultdict does; LangGraph's database stores list the namespaces that hold items, and so does ours.
        held = [ns for ns, items in store._data.items() if items and ns[: len(namespace)] == namespace]
        return sorted({ns[:extra] for ns in held} if extra else held)
    return store.list_namespaces(prefix=namespace, max_depth=extra)


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(_op, max_size=14))
def test_every_answer_is_langgraphs_own_stores(ops: list[tuple[str, Any, Any, Any]]) -> None:
    ours, theirs = ConvmemStore(open_store("memory")), InMemoryStore()
    for op in ops:
        assert _run(ours, op) == _run(theirs, op), op


async def test_the_async_batch_and_a_query_ranked_by_its_words() -> None:
    store = ConvmemStore(open_store("memory"), user_at=1)  # LangMem's ("memories", "{user_id}")
    await store.aput(("memories", "alice"), "m1", {"content": "Alice is vegetarian"})
    await store.aput(("memories", "alice"), "m2", {"content": "Alice takes the train to work"})
    await store.aput(("memories", "bob"), "m3", {"content": "Bob takes the train too"})
    found = await store.asearch(("memories", "alice"), query="which train does she take")
    assert [i.key for i in found] == ["m2"]  # bob's is bob's; the vegetarian item shares no word
    assert found[0].score is not None
    assert found[0].score > 0
    assert [i.key for i in await store.asearch(("memories", "alice"), offset=1, limit=1)] == ["m1"]  # newest first


def test_items_persist_are_the_users_facts_and_keep_their_history(tmp_path: Path, offline_tiktoken: Path) -> None:
    url = f"sqlite:///{tmp_path}/graph.db"
    first = open_store(url)
    ConvmemStore(first).put(("alice", "memories"), "food", {"content": "vegetarian"})
    ConvmemStore(first).put(("alice", "memories"), "food", {"content": "vegan"})
    first.close()

    again = open_store(url)
    store = ConvmemStore(again)
    item = store.get(("alice", "memories"), "food")
    assert item is not None
    assert item.value == {"content": "vegan"}
    assert item.created_at <= item.updated_at
    history = [f.text for f in store.facts.history(user_id="alice")]
    assert history == ['{"content": "vegetarian"}', '{"content": "vegan"}']
    memory = Memory(model="gpt-4o", max_tokens=2_000, store=again, user_id="alice", facts=True)
    memory.add({"role": "user", "content": "What do I eat?"})
    rendered = str(memory.context().messages)
    assert "vegan" in rendered
    assert "vegetarian" not in rendered
    store.delete(("alice", "memories"), "food")
    assert store.get(("alice", "memories"), "food") is None
    assert len(store.facts.history(user_id="alice")) == 2  # ended, not erased
    assert store.get(("bob", "memories"), "food") is None
    memory.close()
    again.close()


def test_the_refusals() -> None:
    store = ConvmemStore(open_store("memory"), user_at=1)
    with pytest.raises(InvalidNamespaceError, match="must name the user"):
        store.put(("memories",), "k", {"a": 1})
    with pytest.raises(InvalidNamespaceError, match="must name the user"):
        store.search(("memories",))
    with pytest.raises(InvalidNamespaceError, match="names the user"):
        store.list_namespaces(prefix=("memories", "*"))
    with pytest.raises(ConfigurationError, match="ttl must be minutes above 0"):
        store.put(("memories", "alice"), "k", {"a": 1}, ttl=-5)
    with pytest.raises(ConfigurationError, match="ttl must be minutes above 0"):  # a PutOp sent to batch directly
        store.batch([PutOp(("memories", "alice"), "k", {"a": 1}, ttl=0)])
    with pytest.raises(ConfigurationError, match="default_ttl"):
        ConvmemStore(open_store("memory"), ttl_config={"default_ttl": 0})
    with pytest.raises(ConfigurationError, match="user_at"):
        ConvmemStore(open_store("memory"), user_at=-1)
    store.put(("memories", "alice"), "k", {"a": 1})
    with pytest.raises(ConfigurationError, match="operator"):
        store.search(("memories", "alice"), filter={"a": {"$regex": "x"}})


class Clock:
    """A time the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


def test_a_ttl_is_the_facts_validity_and_survives_a_reopen(tmp_path: Path, offline_tiktoken: Path) -> None:
    url, clock = f"sqlite:///{tmp_path}/ttl.db", Clock()
    start = clock.now
    first = open_store(url)
    ConvmemStore(first, clock=clock).put(("alice", "memories"), "trip", {"content": "in Lisbon this week"}, ttl=10)
    ConvmemStore(first, clock=clock).put(("alice", "memories"), "food", {"content": "vegetarian"})  # no TTL
    first.close()

    again = open_store(url)
    store = ConvmemStore(again, clock=clock)
    clock.advance(9)
    assert store.get(("alice", "memories"), "trip", refresh_ttl=False) is not None
    clock.advance(2)  # 11 minutes after the put: expired
    assert store.get(("alice", "memories"), "trip", refresh_ttl=False) is None
    assert [i.key for i in store.search(("alice",))] == ["food"]
    ended = [f for f in store.facts.history(user_id="alice") if f.invalid_reason == "expired"]
    assert len(ended) == 1
    assert ended[0].valid_to == start + timedelta(minutes=10)  # ended at its expiry, not when it was seen
    assert len(store.facts.facts(user_id="alice", valid_at=start + timedelta(minutes=5))) == 2  # the history knows
    memory = Memory(model="gpt-4o", max_tokens=2_000, store=again, user_id="alice", facts=True)
    memory.add({"role": "user", "content": "Where am I?"})
    rendered = str(memory.context().messages)
    assert "vegetarian" in rendered
    assert "Lisbon" not in rendered
    memory.close()
    again.close()


def test_a_read_moves_the_expiry_once_a_minute_at_most() -> None:
    clock = Clock()
    store = ConvmemStore(open_store("memory"), clock=clock, ttl_config={"default_ttl": 10})
    ns = ("alice", "memories")
    store.put(ns, "trip", {"content": "Lisbon"})  # the config's default TTL: 10 minutes
    clock.advance(8)
    assert store.get(ns, "trip") is not None  # refreshed: now expires 18 minutes after the put
    assert store.get(ns, "trip") is not None  # the same minute: no second write
    assert len(store.facts.history(user_id="alice")) == 2
    clock.advance(9)  # 17: alive only because of the refresh
    assert [i.key for i in store.search(ns, refresh_ttl=False)] == ["trip"]
    clock.advance(2)  # 19: expired
    assert store.get(ns, "trip") is None
    assert store.search(ns) == []


def test_a_delete_or_a_new_value_before_the_expiry() -> None:
    clock = Clock()
    store = ConvmemStore(open_store("memory"), clock=clock)
    ns = ("alice", "memories")
    store.put(ns, "a", {"v": 1}, ttl=10)
    store.delete(ns, "a")
    assert store.get(ns, "a") is None  # at once, not at the expiry
    store.put(ns, "b", {"v": 1}, ttl=10)
    clock.advance(5)
    store.put(ns, "b", {"v": 1}, ttl=10)  # the same value again: its expiry starts over
    clock.advance(8)
    item = store.get(ns, "b", refresh_ttl=False)
    assert item is not None
    store.put(ns, "b", {"v": 2})  # a new value without a TTL: it no longer expires
    clock.advance(60)
    item = store.get(ns, "b")
    assert item is not None
    assert item.value == {"v": 2}


def test_the_recall_namespace_searches_the_users_archive(tmp_path: Path, offline_tiktoken: Path) -> None:
    backing = open_store(f"sqlite:///{tmp_path}/archive.db")
    for user, city in (("alice", "Lisbon"), ("bob", "Oslo")):
        memory = Memory(model="gpt-4o", max_tokens=400, store=backing, user_id=user, recall=True)
        memory.add({"role": "user", "content": f"My sister lives in {city} and plays the cello."})
        for n in range(20):  # enough to evict the first message into the archive
            memory.add({"role": "user", "content": f"Filler message {n} about nothing in particular, " * 3})
        memory.close()
    store = ConvmemStore(backing, recall="archive")
    found = store.search(("alice", "archive"), query="where does my sister live")
    assert found
    assert "Lisbon" in found[0].value["text"]
    assert found[0].value["role"] == "user"
    assert found[0].score is not None
    assert all("Oslo" not in i.value["text"] for i in found)  # bob's archive is bob's
    again = store.get(("alice", "archive"), found[0].key)
    assert again is not None
    assert again.value == found[0].value
    assert store.search(("alice", "archive"), query="sister", filter={"role": "assistant"}) == []
    assert store.get(("bob", "archive"), found[0].key) is None
    with pytest.raises(ConfigurationError, match="written by the memory"):
        store.put(("alice", "archive"), "k", {"text": "planted"})
    with pytest.raises(ConfigurationError, match="written by the memory"):
        store.delete(("alice", "archive"), found[0].key)
    with pytest.raises(ConfigurationError, match="needs a query"):
        store.search(("alice", "archive"))
    store.put(("alice", "memories"), "k", {"a": 1})  # other namespaces are still facts
    assert store.get(("alice", "memories"), "k") is not None
    with pytest.raises(ConfigurationError, match="namespace label"):
        ConvmemStore(backing, recall="")
    backing.close()
