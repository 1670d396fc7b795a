"""The optional LLM query rewriter, against a real local OpenAI-compatible server."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from convmem.errors import LLMError
from convmem.llm import OpenAICompatibleQueryRewriter
from convmem.longterm.recall.index import RecallDoc, RecallIndex

from .conftest import API_KEY, FAST
from .server import ChatServer, Reply

T0 = datetime(2023, 5, 8, tzinfo=timezone.utc)
DOCS = [
    RecallDoc("m0", "s", "u", 0, "user", "My sister lives in Lisbon", T0, "My sister lives in Lisbon"),
    RecallDoc("m1", "s2", "u", 1, "user", "The weather is nice", T0, "The weather is nice"),  # not a neighbour
]


def rewriter(server: ChatServer, **options: object) -> OpenAICompatibleQueryRewriter:
    return OpenAICompatibleQueryRewriter(
        "gpt-4o-mini",
        base_url=server.base_url,
        api_key=API_KEY,
        retry=FAST,
        timeout=5.0,
        **options,  # type: ignore[arg-type]
    )


def queries(*strings: str) -> Reply:
    return Reply.text(json.dumps({"queries": list(strings)}))


def test_rewritten_words_find_what_the_question_does_not_say(server: ChatServer) -> None:
    server.script(queries("sister", "brother", "lives in"))
    plain = RecallIndex()
    plain.add(DOCS)
    assert plain.search("Where does my sibling reside?", user_id="u") == []
    recall = RecallIndex(rewriter=rewriter(server))
    recall.add(DOCS)
    hits = recall.search("Where does my sibling reside?", user_id="u")
    assert [h.doc.message_id for h in hits] == ["m0"]
    body = server.requests[0].body
    assert body["model"] == "gpt-4o-mini"
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][-1] == {"role": "user", "content": "Where does my sibling reside?"}
    assert recall.rewriter.usage  # type: ignore[union-attr]


def test_answers_are_cached_per_question(server: ChatServer) -> None:
    server.script(queries("sister"), queries("weather"))
    made = rewriter(server, cache_size=1)
    assert made.rewrite("my sibling?") == ("sister",)
    assert made.rewrite("  my   sibling? ") == ("sister",)  # same question, whitespace aside: no new call
    assert len(server.requests) == 1
    assert made.rewrite("is it sunny?") == ("weather",)
    server.script(queries("sister again"))
    assert made.rewrite("my sibling?") == ("sister again",)  # evicted by the size-1 cache: asked again
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    "reply",
    [
        Reply.text("not json at all"),
        Reply.text(json.dumps({"answer": "Lisbon"})),
        Reply.text(json.dumps({"queries": []})),
        Reply.text(json.dumps({"queries": [1, None, "  "]})),
        Reply.error(500),
        Reply.error(401, "bad key sk-test-SECRET0123456789"),
    ],
)
def test_a_failed_rewrite_falls_back_to_the_question(server: ChatServer, reply: Reply) -> None:
    server.script(*([reply] * 3))
    made = rewriter(server)
    with pytest.raises(LLMError) as raised:
        made.rewrite("Where does my sister live?")
    assert API_KEY not in str(raised.value)
    server.script(*([reply] * 3))
    recall = RecallIndex(rewriter=made)
    recall.add(DOCS)
    hits = recall.search("Where does my sister live?", user_id="u")
    assert [h.doc.message_id for h in hits] == ["m0"]
    assert "query rewriting failed" in recall.warnings[-1]
    assert API_KEY not in recall.warnings[-1]


def test_fenced_and_thinking_replies_are_read(server: ChatServer) -> None:
    server.script(Reply.text('<think>hmm</think>```json\n{"queries": ["a", "b", "a", "c"]}\n```'))
    assert rewriter(server, max_queries=2).rewrite("q") == ("a", "b")


def test_dense_search_does_not_call_the_rewriter(server: ChatServer) -> None:
    from convmem.longterm.recall.embedders import HashingEmbedder

    recall = RecallIndex(embedder=HashingEmbedder(32), rewriter=rewriter(server))
    recall.add(DOCS)
    recall.search("sister", user_id="u", mode="dense")
    assert server.requests == []
