"""Provider compaction as the running summary, replayed through the real SDK clients.

A session runs turn by turn against the local provider server; twice the provider compacts (an Anthropic
``compaction`` block at the head of its reply, a Responses ``compaction`` item in its output). Every
request is checked strictly; the Responses requests never again hold an item from before the latest
compaction item (OpenAI reads and bills whatever precedes it), the Anthropic requests resend the
compaction block as it came; the store still holds every original message, and recall finds them.
``responses.compact`` output is adopted in one call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from convmem import Memory
from convmem.stores import MemoryStore

from . import rules, strict
from .server import ProviderServer, anthropic_reply, responses_reply

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TURNS = 12
COMPACT_AT = (4, 9)  # the turns whose reply compacts


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def _anthropic_compacting(turn: int) -> dict[str, Any]:
    reply = anthropic_reply(f"answer {turn}")
    block = {"type": "compaction", "content": f"summary of turns 0-{turn}", "encrypted_content": f"enc{turn}"}
    reply["content"] = [block, *reply["content"]]
    reply["usage"]["iterations"] = [
        {"type": "compaction", "input_tokens": 3000, "output_tokens": 200},
        {"type": "message", "input_tokens": 100, "output_tokens": 10},
    ]
    return reply


def _responses_compacting(turn: int) -> dict[str, Any]:
    reply = responses_reply(f"answer {turn}")
    reply["output"] = [{"type": "compaction", "id": f"cmp_{turn}", "encrypted_content": f"enc{turn}"}, *reply["output"]]
    return reply


def _question(turn: int) -> str:
    return f"question {turn} about the {['harbour', 'glacier', 'orchard', 'lighthouse'][turn % 4]} number {turn}"


def _replay(fmt: str, server: ProviderServer) -> tuple[Memory, list[Any]]:
    store = MemoryStore()
    model = "claude-sonnet-4-6" if fmt == "anthropic" else "gpt-4o"
    memory = Memory(model, format=fmt, strategy="provider", store=store, recall=True, user_id="ada", max_tokens=50_000)
    memory.add({"role": "system", "content": "You are terse."})
    requests = []
    for turn in range(TURNS):
        memory.add({"role": "user", "content": _question(turn)})
        ctx = memory.context()
        if fmt == "anthropic":
            strict.anthropic_system(ctx.system)
            for i, message in enumerate(ctx.messages):  # a compaction block is a beta type
                strict.check(anthropic.types.beta.BetaMessageParam, message, f"messages[{i}]")
            reply = _anthropic_compacting(turn) if turn in COMPACT_AT else anthropic_reply(f"answer {turn}")
            server.script.append(reply)
            client: Any = anthropic.Anthropic(base_url=server.base_url, api_key="sk-test", max_retries=0)
            answer = client.beta.messages.create(model=model, max_tokens=64, **ctx.request())  # compaction is beta
        else:
            strict.responses_items(ctx.messages)
            reply = _responses_compacting(turn) if turn in COMPACT_AT else responses_reply(f"answer {turn}")
            server.script.append(reply)
            client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="sk-test", max_retries=0)
            answer = client.responses.create(model=model, **ctx.request())
        rules.check(fmt, ctx.messages)
        requests.append(server.bodies[-1][1])
        memory.add_response(answer)  # the SDK's own object
    return memory, requests


def _own_texts(item: dict[str, Any]) -> list[str]:
    """An item's own texts (not the recall block prepended to the newest user message, which quotes the archive)."""
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [p.get("text", "") for p in content or () if not p.get("text", "").startswith("<recall>")]


def _originals_kept_and_found(memory: Memory) -> None:
    texts = [m.text for m in memory.messages()]
    for turn in range(TURNS):
        assert _question(turn) in texts, "the store holds every original message"
    archived = memory.messages(status=("summarized", "archived"))
    assert _question(0) in [m.text for m in archived]
    assert memory.recall is not None
    hits = memory.recall.search("glacier number 1", user_id="ada", k=3)
    assert any(h.doc.text == _question(1) for h in hits), "recall finds what the compaction stands for"


def test_responses_requests_never_hold_an_item_from_before_the_latest_compaction(server: ProviderServer) -> None:
    memory, requests = _replay("responses", server)
    for turn, body in enumerate(requests):
        items = body["input"]
        compactions = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
        latest = max((t for t in COMPACT_AT if t < turn), default=None)
        if latest is None:
            assert not compactions
            continue
        assert [items[i]["encrypted_content"] for i in compactions] == [f"enc{latest}"], "the latest one only"
        before = items[: compactions[0]]
        assert all(item.get("role") in ("system", "developer") for item in before), "nothing of the history before it"
        assert not any(_question(latest) in _own_texts(item) for item in items), "what it compacted is not sent again"
        assert _question(turn) in str(items[compactions[0] :])
    _originals_kept_and_found(memory)
    stats = memory.stats()
    assert stats.summaries == len(COMPACT_AT)


def test_anthropic_requests_resend_the_compaction_block_as_it_came(server: ProviderServer) -> None:
    memory, requests = _replay("anthropic", server)
    for turn, body in enumerate(requests):
        messages = body["messages"]
        latest = max((t for t in COMPACT_AT if t < turn), default=None)
        blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
        compactions = [b for b in blocks if b.get("type") == "compaction"]
        if latest is None:
            assert not compactions
            continue
        block = {"type": "compaction", "content": f"summary of turns 0-{latest}", "encrypted_content": f"enc{latest}"}
        assert compactions == [block], "the latest compaction, verbatim"
        assert messages[1]["role"] == "assistant"
        assert messages[1]["content"][0] == block, "first, after the placeholder"
        assert messages[1]["content"][1:3] == [
            {"type": "thinking", "thinking": "let me see", "signature": "c2ln"},
            {"type": "text", "text": f"answer {latest}"},
        ], "with the rest of its reply, byte for byte"
    _originals_kept_and_found(memory)
    # The compaction's own usage (Anthropic's iterations, left out of the top-level counts) is recorded and costed.
    stats = memory.stats()
    assert stats.input_tokens == TURNS * (100 + 1500 + 400) + len(COMPACT_AT) * 3000
    assert stats.output_tokens == TURNS * 10 + len(COMPACT_AT) * 200


def test_a_reopened_memory_sends_the_compaction_it_adopted(server: ProviderServer) -> None:
    memory, _ = _replay("responses", server)
    reopened = Memory.open(memory.session_id, store=memory.store, user_id="ada", recall=True)
    assert reopened.context().messages == memory.context().messages
    assert reopened.context().account.summary == memory.context().account.summary > 0


def test_responses_compact_output_is_adopted_in_one_call(server: ProviderServer) -> None:
    memory = Memory("gpt-4o", format="responses", strategy="provider", max_tokens=50_000)
    memory.add({"role": "developer", "content": "Be terse."})
    for turn in range(3):
        memory.add({"role": "user", "content": _question(turn)})
        memory.add({"role": "assistant", "content": f"answer {turn}"})
    kept = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _question(t)}]} for t in range(3)
    ]
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC"}
    server.script.append(
        {
            "id": "cmp_resp",
            "object": "response.compaction",
            "created_at": 1,
            "output": [*kept, compaction],
            "usage": {
                "input_tokens": 900,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": 80,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 980,
            },
        }
    )
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="sk-test", max_retries=0)
    compacted = client.responses.compact(model="gpt-4o", input=memory.context().messages)
    memory.add_response(compacted)  # one call: the output becomes the summary, its usage is recorded
    memory.add({"role": "user", "content": "and now?"})
    items = memory.context().messages
    strict.responses_items(items)
    assert items == [
        {"role": "developer", "content": "Be terse."},
        *kept,
        compaction,
        {"role": "user", "content": "and now?"},
    ]
    assert memory.stats().input_tokens == 900
    assert len(memory.messages()) == 1 + 6 + 1 + 1
