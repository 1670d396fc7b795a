"""OpenAICompatibleSummarizer against a real local chat-completions server.

Every failure script runs through a real ``Memory`` with ``summary_buffer``:
nothing is lost, no error text reaches the summary or the context, the
failure is a warning in the stats, and the next eviction retries the fold.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from convmem import AsyncMemory, Memory, Message
from convmem.errors import LLMError
from convmem.llm import OpenAICompatibleSummarizer
from convmem.llm.summarizer import Summary
from convmem.tokens import cost, count_messages

from .conftest import API_KEY
from .server import ChatServer, Reply

Make = Callable[..., OpenAICompatibleSummarizer]
ERROR_WORDS = re.compile(r"HTTP|timed out|malformed|error|empty summary|cannot connect|Retry", re.IGNORECASE)


def user(i: int) -> dict[str, str]:
    return {"role": "user", "content": f"msg-{i}: the parcel {i} weighs {i + 3} kg and ships to Porto."}


def make_memory(summarizer: object) -> Memory:
    return Memory(
        max_tokens=400,
        strategy="summary_buffer",
        strategy_options={"max_tokens": 300, "keep_recent_tokens": 120},
        summarizer=summarizer,
        summary_max_tokens=80,
    )


def fill_until_evictions(memory: Memory, server: ChatServer, evictions: int, start: int = 0) -> list[Message]:
    """Add messages until ``evictions`` more summarize requests reached the server."""
    added = []
    target = len(server.requests) + evictions
    i = start
    while len(server.requests) < target:
        added.append(memory.add(user(i)))
        i += 1
        assert i < start + 200, "no eviction happened"
    return added


def assert_nothing_lost(memory: Memory, added: list[Message]) -> None:
    assert [m.id for m in memory.messages()] == [m.id for m in added]
    assert [m.content for m in memory.messages()] == [m.content for m in added]
    for message in memory.context().messages:
        content = message["content"]
        assert not ERROR_WORDS.search(content if isinstance(content, str) else str(content))


def test_success_installs_the_reply_and_charges_its_usage(server: ChatServer, make_summarizer: Make) -> None:
    server.script(Reply.text("- Facts: parcels ship to Porto", prompt_tokens=150, completion_tokens=12))
    memory = make_memory(make_summarizer())
    added = fill_until_evictions(memory, server, 1)
    stats = memory.stats()
    assert stats.summaries == 1
    assert stats.summary_failures == 0
    assert stats.warnings == ()
    assert "- Facts: parcels ship to Porto" in memory.context().messages[0]["content"]
    assert (stats.input_tokens, stats.output_tokens) == (150, 12)
    assert stats.cost_usd == pytest.approx(cost("gpt-4o-mini", 150, 12))
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["max_tokens"] == 80
    assert "Goals" in request.body["messages"][0]["content"]  # the prompt names what to keep
    assert_nothing_lost(memory, added)


FAILURES = {
    "429 then Retry-After honoured": ([Reply.error(429, "slow down", headers={"Retry-After": "0.3"})], None),
    "500 then success": ([Reply.error(500, "upstream crashed")], None),
    "timeout": ([Reply.slow(3.0)] * 3, "timed out after 0.25 s (3 attempts)"),
    "malformed JSON": ([Reply.raw(b'{"choices": [')], "HTTP 200: malformed response"),
    "empty reply": ([Reply.text("   ")], "empty summary"),
    "reply ignoring the schema": ([Reply.json({"result": "here is your summary"})], "no choices in the reply"),
    "401 wrong key": ([Reply.error(401, f"Incorrect API key provided: {API_KEY[:7]}****6789")], "HTTP 401"),
    "404 unknown model": (
        [Reply.error(404, "The model `gpt-x` does not exist", code="model_not_found")],
        "HTTP 404 model_not_found",
    ),
    "429 asking for too long": (
        [Reply.error(429, "quota", headers={"Retry-After": "120"})],
        "the server asked to retry after 120 s",
    ),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_failure_scripts_lose_nothing_and_retry_at_the_next_eviction(
    name: str, server: ChatServer, make_summarizer: Make
) -> None:
    replies, warning = FAILURES[name]
    server.script(*replies)
    memory = make_memory(make_summarizer(timeout=0.25))
    started = time.monotonic()
    added = fill_until_evictions(memory, server, len(replies) + (warning is None))
    if name.startswith("429 then"):
        assert time.monotonic() - started >= 0.3  # waited as long as the server asked, not the tiny backoff
    stats = memory.stats()
    if warning is None:  # retried within the call: the first eviction was summarized
        assert (stats.summaries, stats.summary_failures) == (1, 0)
        assert_nothing_lost(memory, added)
        return
    assert (stats.summaries, stats.summary_failures) == (0, 1)
    assert warning in stats.warnings[-1]
    assert "summary failed" in stats.warnings[-1]
    assert server.base_url in stats.warnings[-1]
    assert "SECRET" not in stats.warnings[-1]
    assert "****" not in stats.warnings[-1]
    assert_nothing_lost(memory, added)
    failed_request = server.requests[-1].text
    # The next eviction retries: the messages of the failed fold are in the next request too.
    added += fill_until_evictions(memory, server, 1, start=len(added))
    assert memory.stats().summaries == 1
    retried = [m.text for m in added if m.text in failed_request]
    assert retried
    assert all(text in server.requests[-1].text for text in retried)
    assert_nothing_lost(memory, added)


@pytest.mark.parametrize(
    ("reply", "status", "words"),
    [
        (Reply.error(401, f"Incorrect API key provided: {API_KEY[:7]}****6789"), 401, "HTTP 401"),
        (Reply.error(404, "The model `gpt-x` does not exist", code="model_not_found"), 404, "model_not_found"),
        (Reply.error(400, "bad request"), 400, "HTTP 400"),
    ],
)
def test_client_errors_name_endpoint_and_status_never_the_key(
    server: ChatServer, make_summarizer: Make, reply: Reply, status: int, words: str
) -> None:
    server.script(reply)
    summarizer = make_summarizer(model="gpt-x")
    with pytest.raises(LLMError) as caught:
        summarizer.summarize(None, [Message(role="user", content="hi")], 50)
    error = caught.value
    assert error.status == status
    assert error.endpoint == f"POST {server.base_url}/chat/completions"
    assert error.endpoint in str(error)
    assert words in str(error)
    assert "'gpt-x'" in str(error)
    assert "SECRET" not in str(error)
    assert "6789" not in str(error)
    assert error.__cause__ is None
    assert len(server.requests) == 1  # client errors are not retried


def test_unreachable_base_url_is_an_llm_error_and_loses_nothing(make_summarizer: Make) -> None:
    with ChatServer() as gone:
        url = gone.base_url  # a port that was just freed: nothing listens there now
    summarizer = make_summarizer(base_url=url)
    with pytest.raises(LLMError) as caught:
        summarizer.summarize(None, [Message(role="user", content="hi")], 50)
    assert caught.value.status is None
    assert url in str(caught.value)
    assert "cannot connect" in str(caught.value)
    assert "(3 attempts)" in str(caught.value)
    memory = make_memory(summarizer)
    added = [memory.add(user(i)) for i in range(40)]
    stats = memory.stats()
    assert stats.summaries == 0
    assert stats.summary_failures >= 2
    assert "cannot connect" in stats.warnings[-1]
    assert_nothing_lost(memory, added)


def test_usage_of_a_billed_but_unusable_reply_is_still_charged(server: ChatServer, make_summarizer: Make) -> None:
    server.script(Reply.text("", prompt_tokens=90, completion_tokens=0))
    memory = make_memory(make_summarizer())
    fill_until_evictions(memory, server, 1)
    stats = memory.stats()
    assert stats.summary_failures == 1
    assert (stats.input_tokens, stats.output_tokens) == (90, 0)


def test_a_summary_over_n_evictions_is_built_incrementally(server: ChatServer, make_summarizer: Make) -> None:
    server.default = lambda request: Reply.text(f"summary after call {len(server.requests)}")
    memory = make_memory(make_summarizer())
    added = fill_until_evictions(memory, server, 5)
    assert memory.stats().summaries == 5
    seen: set[str] = set()
    for number, request in enumerate(server.requests, start=1):
        text = request.text
        previous = f"summary after call {number - 1}" if number > 1 else "(none yet)"
        assert f"<current_summary>\n{previous}\n</current_summary>" in text
        assert text.count("summary after call") == (number > 1)  # only the previous summary, no older ones
        here = {m.text for m in added if m.text in text}
        assert here
        assert not here & seen
        seen |= here
    assert "summary after call 5" in memory.context().messages[0]["content"]


@pytest.mark.slow  # a real local server and many requests; the full suite runs it
def test_chunked_summary_of_an_eviction_five_times_the_input_budget(server: ChatServer, make_summarizer: Make) -> None:
    server.default = lambda request: Reply.text(f"part summary {len(server.requests)}")
    budget = 600
    summarizer = make_summarizer(max_input_tokens=budget)
    counter = summarizer.counter
    messages = [Message(role="user", content=" ".join(f"w{i}x{j}" for j in range(40)), id=f"m{i}") for i in range(60)]
    messages.append(Message(role="tool", tool_call_id="c1", content=" ".join(f"big{j}" for j in range(900))))
    total = count_messages(counter, messages)
    assert total > 5 * budget
    summary = summarizer.summarize("earlier summary", messages, 100)
    assert isinstance(summary, Summary)
    assert summary == f"part summary {len(server.requests)}"
    assert len(summary.usage) == len(server.requests) >= 5
    sent = ""
    for number, request in enumerate(server.requests, start=1):
        body = [Message(role=m["role"], content=m["content"]) for m in request.body["messages"]]
        assert count_messages(counter, body) <= budget  # every chunk request fits the input budget
        previous = "earlier summary" if number == 1 else f"part summary {number - 1}"
        assert f"<current_summary>\n{previous}\n</current_summary>" in request.text
        sent += request.text
    for message in messages:  # nothing was cut: every word of every message reached some request
        assert all(word in sent for word in message.text.split())


async def test_async_memory_summarizes_and_survives_a_failure(server: ChatServer, make_summarizer: Make) -> None:
    server.script(Reply.error(503, "overloaded"), Reply.error(503, "overloaded"), Reply.error(503, "overloaded"))
    summarizer = make_summarizer()
    memory = AsyncMemory(
        max_tokens=400,
        strategy="summary_buffer",
        strategy_options={"max_tokens": 300, "keep_recent_tokens": 120},
        summarizer=summarizer,
        summary_max_tokens=80,
    )
    added = []
    i = 0
    while memory.stats().summaries < 1:
        added.append(await memory.add(user(i)))
        i += 1
    stats = memory.stats()
    assert stats.summary_failures == 1
    assert "HTTP 503" in stats.warnings[0]
    assert [m.id for m in await memory.messages()] == [m.id for m in added]
    assert (await memory.context()).messages[0]["content"].count("summary") >= 1
    await summarizer.aclose()
