"""OpenAICompatibleFactExtractor against a real local chat-completions server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from convmem import Memory, Message
from convmem.errors import LLMError
from convmem.llm import Extraction, OpenAICompatibleFactExtractor
from convmem.longterm import Fact, FactAdd, FactInvalidate, Facts, FactUpdate

from .conftest import API_KEY, FAST
from .server import ChatServer, Reply

T0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
LISBON = Fact("f1", "alice", "Alice lives in Lisbon", T0, T0, subject="alice.home")
CAR = Fact("f2", "alice", "Alice owns a red car", T0, T0, subject="alice.car")
OLD = Fact("f0", "alice", "Alice works at Acme", T0 - timedelta(days=9), T0, valid_to=T0, subject="alice.job")
FACTS = [LISBON, CAR, OLD]
MESSAGES = [
    Message(role="user", content="I moved to Porto last week.", id="m1", created_at=T0),
    Message(role="user", content="I sold my car, and I started learning the cello.", id="m2", created_at=T0),
]


def op(kind: str, sources: list[str], **fields: Any) -> dict[str, Any]:
    base = {"op": kind, "fact_id": None, "text": None, "subject": None, "reason": None}
    return base | fields | {"source_message_ids": sources}


def reply(*operations: dict[str, Any]) -> Reply:
    return Reply.text(json.dumps({"operations": list(operations)}), prompt_tokens=300, completion_tokens=40)


@pytest.fixture
def extractor(server: ChatServer) -> Iterator[OpenAICompatibleFactExtractor]:
    made = OpenAICompatibleFactExtractor(
        "gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, retry=FAST, seed=0, timeout=0.25
    )
    yield made
    made.close()


def test_operations_are_parsed_validated_and_grounded(
    server: ChatServer, extractor: OpenAICompatibleFactExtractor
) -> None:
    server.script(
        reply(
            op("update", ["m1"], fact_id="f1", text="Alice lives in Porto", subject="alice.home", reason="moved"),
            op("invalidate", ["m2"], fact_id="f2", reason="sold her car"),
            op("add", ["m2"], text="Alice is learning the cello", subject="alice.hobby"),
        )
    )
    result = extractor.extract(MESSAGES, FACTS, user_id="alice")
    assert isinstance(result, Extraction)
    assert result == [
        FactUpdate("f1", "Alice lives in Porto", ("m1",), subject="alice.home", reason="moved"),
        FactInvalidate("f2", "sold her car", ("m2",)),
        FactAdd("Alice is learning the cello", ("m2",), subject="alice.hobby"),
    ]
    assert result.rejected == ()
    assert [(u.model, u.usage.input_tokens) for u in result.usage] == [("gpt-4o-mini", 300)]
    body = server.requests[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    prompt = server.requests[0].text
    assert "[f1] (alice.home) Alice lives in Lisbon" in prompt
    assert "Alice works at Acme" not in prompt  # ended facts are history, not candidates
    assert "[m1 2024-05-01T12:00:00+00:00] user: I moved to Porto" in prompt


def test_ungrounded_or_unrelated_operations_are_rejected_with_reasons(
    server: ChatServer, extractor: OpenAICompatibleFactExtractor
) -> None:
    server.script(
        reply(
            op("invalidate", ["m2"], fact_id="f9", reason="unrelated"),  # no such fact (Graphiti-style overreach)
            op("invalidate", ["m2"], fact_id="f0", reason="again"),  # already ended
            op("invalidate", ["m2"], fact_id="f2", reason=None),  # an invalidation needs a reason
            op("add", [], text="Alice likes jazz"),  # no source
            op("add", ["m7"], text="Alice likes jazz"),  # a source that was not among the new messages
            op("update", ["m1"], fact_id="f1", text="Alice lives in Porto", reason="moved"),
            op("update", ["m1"], fact_id="f1", text="Alice lives in Braga", reason="moved"),  # same fact twice
            {"op": "delete", "fact_id": "f2", "source_message_ids": ["m2"]},  # not an operation we know
        )
    )
    result = extractor.extract(MESSAGES, FACTS, user_id="alice")
    assert result == [FactUpdate("f1", "Alice lives in Porto", ("m1",), reason="moved")]
    reasons = [r.reason for r in result.rejected]
    assert len(reasons) == 7
    assert "'f9', which is not a valid known fact" in reasons[0]
    assert "'f0', which is not a valid known fact" in reasons[1]
    assert "needs a reason" in reasons[2]
    assert "cites no new message" in reasons[3]
    assert "cites no new message" in reasons[4]
    assert "second operation on fact 'f1'" in reasons[5]
    assert "malformed operation: op" in reasons[6]


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (Reply.text('{"operations": [{"op": "add", '), "malformed JSON"),
        (Reply.text("Sure! Alice moved to Porto."), "malformed JSON"),
        (Reply.text(json.dumps({"facts": ["Alice lives in Porto"]})), "does not match the schema: operations"),
        (Reply.text(""), "empty reply"),
        (Reply.json({"unexpected": True}), "no choices in the reply"),
        (Reply.error(500, "down"), "HTTP 500: down (3 attempts)"),
        (Reply.slow(3.0), "timed out"),
    ],
)
def test_bad_replies_raise_with_the_reason_and_change_no_fact(
    server: ChatServer, extractor: OpenAICompatibleFactExtractor, bad: Reply, why: str
) -> None:
    server.script(*[bad] * 3)
    with pytest.raises(LLMError, match=r"rejected|HTTP|timed out|choices") as caught:
        extractor.extract(MESSAGES, FACTS, user_id="alice")
    assert why in str(caught.value)
    assert server.base_url in str(caught.value)


def test_a_failing_extractor_in_a_memory_loses_nothing(
    server: ChatServer, extractor: OpenAICompatibleFactExtractor
) -> None:
    server.script(Reply.text("not json at all"))
    server.default = lambda request: reply()
    facts = Facts(extractor=extractor)
    memory = Memory(max_tokens=300, sinks=[facts], user_id="alice")
    added = [memory.add({"role": "user", "content": f"note {i}: my locker code is {1000 + i}"}) for i in range(60)]
    assert [m.id for m in memory.messages()] == [m.id for m in added]
    warnings = memory.stats().warnings
    assert any("malformed JSON" in w for w in warnings)
    assert facts.facts(user_id="alice") == []
    assert len(server.requests) >= 2  # later evictions asked again


def test_json_object_mode_and_fenced_replies(server: ChatServer) -> None:
    server.script(Reply.text('```json\n{"operations": []}\n```'))
    extractor = OpenAICompatibleFactExtractor(
        "gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, retry=FAST, response_format="json_object"
    )
    try:
        assert extractor.extract(MESSAGES, FACTS) == []
    finally:
        extractor.close()
    assert server.requests[0].body["response_format"] == {"type": "json_object"}


async def test_async_extraction(server: ChatServer) -> None:
    server.script(reply(op("add", ["m2"], text="Alice is learning the cello")))
    extractor = OpenAICompatibleFactExtractor("gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, retry=FAST)
    result = await extractor.aextract(MESSAGES, FACTS, user_id="alice")
    assert result == [FactAdd("Alice is learning the cello", ("m2",))]
    await extractor.aclose()
