"""Every shape we know, in all three formats, is a request the provider SDK's own (strict) types accept,
posted through the real SDK clients; the canned reply goes back in with ``add_response`` and the next
turns are checked the same way (issue 13)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from convmem import Memory
from convmem.formats import FORMATS
from convmem.policy.context import Context

from . import strict
from .server import ProviderServer, anthropic_reply, chat_reply, responses_reply
from .shapes import SHAPES

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

MODELS = {"openai": "gpt-4o", "responses": "gpt-4o", "anthropic": "claude-sonnet-4-6"}
CALLS = (("call_a", "get_weather"), ("functions.lookup:1", "lookup"))


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def _check(fmt: str, messages: list[dict[str, Any]], system: Any = None) -> None:
    if fmt == "openai":
        strict.chat_messages(messages)
    elif fmt == "responses":
        strict.responses_items(messages)
    else:
        strict.anthropic_system(system)
        strict.anthropic_messages(messages)


def _post(fmt: str, server: ProviderServer, ctx: Context, reply: dict[str, Any] | None = None) -> Any:
    """Send ``ctx`` through the real SDK client; check the body that went over the wire; return the reply."""
    _check(fmt, ctx.messages, ctx.system)
    if reply is not None:
        server.script.append(reply)
    if fmt == "anthropic":
        client: Any = anthropic.Anthropic(base_url=server.base_url, api_key="sk-test", max_retries=0)
        answer = client.messages.create(model=MODELS[fmt], max_tokens=64, **ctx.request())
    else:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="sk-test", max_retries=0)
        if fmt == "openai":
            answer = client.chat.completions.create(model=MODELS[fmt], **ctx.request())
        else:
            answer = client.responses.create(model=MODELS[fmt], **ctx.request())
    path, body = server.bodies[-1]
    assert path.endswith({"openai": "/chat/completions", "responses": "/responses", "anthropic": "/messages"}[fmt])
    wire = body["input"] if fmt == "responses" else body["messages"]
    _check(fmt, wire, body.get("system"))
    return answer


def _reply(fmt: str, calls: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    if fmt == "openai":
        return chat_reply(None if calls else "ok", calls)
    if fmt == "anthropic":
        return anthropic_reply("" if calls else "ok", calls)
    return responses_reply("" if calls else "ok", calls)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rendered_requests_are_accepted_and_replies_go_back(shape: str, fmt: str, server: ProviderServer) -> None:
    options, batches = SHAPES[shape]()
    memory = Memory(MODELS[fmt], format=fmt, **options)
    for batch in batches:
        memory.add_many(batch)
    stored = len(memory.messages())

    # Turn 1: the shape as it stands, and a text reply.
    first = memory.context()
    assert first.format == fmt
    assert first.messages
    added = memory.add_response(_post(fmt, server, first))
    assert [m.role for m in added] == ["assistant"]
    assert added[0].text == "ok"

    # Turn 2: a question, answered by two parallel calls (one id outside Anthropic's pattern).
    memory.add({"role": "user", "content": "and tomorrow?"})
    calls = memory.add_response(_post(fmt, server, memory.context(), _reply(fmt, CALLS)))
    assert [c.id for m in calls for c in m.tool_calls] == [i for i, _ in CALLS]
    assert memory.pending_tool_calls == [i for i, _ in CALLS]
    memory.add_many([{"role": "tool", "tool_call_id": i, "content": f"result of {i}"} for i, _ in CALLS])

    # Turn 3: the results go out with their calls.
    third = memory.context()
    answer = memory.add_response(_post(fmt, server, third))
    assert answer[0].text == "ok"
    assert len(memory.messages()) == stored + 1 + 1 + 1 + 2 + 1
    stats = memory.stats()
    assert stats.input_tokens == 3 * 2000
    assert stats.output_tokens == 3 * 10
    assert stats.cached_input_tokens > 0
    assert stats.cache_savings_usd > 0
