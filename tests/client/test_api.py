"""The rest of the API through the client: the user's sessions, facts, blocks and recall, as the library types."""

from __future__ import annotations

from datetime import datetime

import pytest

from convmem import AsyncClient, Client, ConflictError, SessionNotFoundError
from convmem.errors import ServiceError
from convmem.longterm.blocks.store import BlockRecord
from convmem.longterm.facts.model import Fact
from convmem.longterm.recall.hits import RecallHit
from convmem.session import SessionInfo
from tests.server.conftest import Live

CHAT = [
    {"role": "user", "content": "We moved to Lisbon last spring, near the river."},
    {"role": "assistant", "content": "Lisbon in spring sounds lovely."},
    {"role": "user", "content": "My sister Ana visits in June."},
]
# Recall searches what left the window: a small budget and some talk after the chat send it there.
SMALL = {"model": "gpt-4o", "max_tokens": 200, "max_output_tokens": 20}
LATER = [{"role": "assistant" if i % 2 == 0 else "user", "content": f"later talk {i} " * 8} for i in range(8)]


def test_sessions_list_search_fork_export_import_delete(live: Live) -> None:
    user = "sessions-user"
    first = Client(live.url, api_key=live.key_a, user_id=user, model="gpt-4o", session_id="trip-lisbon", title="Trip")
    first.add_many(CHAT)
    second = Client(live.url, api_key=live.key_a, user_id=user, model="gpt-4o", title="Groceries")
    second.add({"role": "user", "content": "milk"})
    listed = first.list_sessions()
    assert all(isinstance(s, SessionInfo) for s in listed)
    assert [s.id for s in listed] == [second.session_id, "trip-lisbon"]  # most recent first, ids as chosen
    assert [s.message_count for s in listed] == [1, 3]
    assert [s.id for s in first.search_sessions("trip")] == ["trip-lisbon"]
    assert first.list_sessions(limit=1)[0].id == second.session_id

    fork = first.fork(1)
    assert [m.text for m in fork.messages()] == [m["content"] for m in CHAT[:2]]
    assert {s.id: s.parent_id for s in first.list_sessions()}[fork.session_id] == "trip-lisbon"

    exported = first.export()
    copy = first.import_session(exported, session_id="trip-copy")
    assert copy.session_id == "trip-copy"
    assert [m.text for m in copy.messages()] == [m.text for m in first.messages()]
    with pytest.raises(ConflictError, match="taken"):
        first.import_session(exported, session_id="trip-copy")

    copy.delete()
    assert "trip-copy" not in [s.id for s in first.list_sessions()]
    with pytest.raises(SessionNotFoundError):
        Client.open("trip-copy", base_url=live.url, api_key=live.key_a, user_id=user)
    other_tenant = Client(live.url, api_key=live.key_b, user_id=user, model="gpt-4o")
    assert [s.id for s in other_tenant.list_sessions()] == [other_tenant.session_id]  # another tenant's: unseen
    for client in (first, second, fork, copy, other_tenant):
        client.close()


def test_facts_blocks_and_recall_as_the_library_returns_them(live: Live) -> None:
    client = Client(live.url, api_key=live.key_a, user_id="longterm-user", **SMALL)
    client.add_many(CHAT)
    client.add_many(LATER)
    assert client.stats().archived >= len(CHAT)

    fact = client.facts.add("Lives in Lisbon", subject="home", valid_from=datetime(2024, 3, 1).astimezone())
    assert isinstance(fact, Fact)
    assert client.facts.add("Lives in Lisbon", subject="home").id == fact.id  # a duplicate is merged (retry-safe)
    newer = client.facts.update(fact.id, "Lives in Porto", reason="moved")
    assert [f.text for f in client.facts.facts()] == ["Lives in Porto"]
    ended = client.facts.invalidate(newer.id, reason="moved abroad")
    assert ended.valid_to is not None
    assert ended.invalid_reason == "moved abroad"
    assert client.facts.facts() == []
    assert {f.text for f in client.facts.history()} == {"Lives in Lisbon", "Lives in Porto"}

    made = client.blocks.put("persona", "likes tea", expected_version=0, priority=0, max_tokens=50)
    assert isinstance(made, BlockRecord)
    assert (made.version, made.priority, made.max_tokens) == (1, 0, 50)
    appended = client.blocks.append("persona", "sister Ana", expected_version=1)
    assert appended.value == "likes tea\nsister Ana"
    replaced = client.blocks.replace("persona", "tea", "coffee", expected_version=2)
    assert (replaced.value, replaced.version, replaced.priority, replaced.max_tokens) == (
        "likes coffee\nsister Ana",
        3,
        0,
        50,
    )  # the settings an edit does not name stay
    with pytest.raises(ConflictError, match="version"):
        client.blocks.append("persona", "x", expected_version=1)
    assert [b.name for b in client.blocks.list_blocks()] == ["persona"]
    assert client.blocks.get("persona") == replaced
    with pytest.raises(ServiceError) as missing:
        client.blocks.get("nothing")
    assert missing.value.status == 404

    hits = client.recall("where did we move? Lisbon", k=2)
    assert hits
    assert all(isinstance(h, RecallHit) for h in hits)
    assert "Lisbon" in hits[0].doc.text
    assert hits[0].doc.session_id == client.session_id
    assert hits[0].reason  # each hit explains itself, as in process
    client.close()


async def test_the_async_client_has_the_same_api(live: Live) -> None:
    client = await AsyncClient.create(live.url, api_key=live.key_a, user_id="async-user", **SMALL)
    await client.add_many(CHAT)
    await client.add_many(LATER)
    assert [s.id for s in await client.list_sessions()] == [client.session_id]
    assert [s.id for s in await client.search_sessions(client.session_id[:6])] == [client.session_id]
    fact = await client.facts.add("Has a sister, Ana")
    assert [f.id for f in await client.facts.facts()] == [fact.id]
    await client.blocks.put("notes", "one", expected_version=0)
    assert (await client.blocks.append("notes", "two", expected_version=1)).value == "one\ntwo"
    assert (await client.recall("sister Ana June"))[0].doc.text == CHAT[2]["content"]
    fork = await client.fork(0)
    assert len(await fork.messages()) == 1
    await fork.delete()
    await fork.aclose()
    await client.delete()
    assert await client.list_sessions() == []
    await client.aclose()
