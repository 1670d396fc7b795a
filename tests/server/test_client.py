"""``Client`` / ``AsyncClient`` against a live service: the same calls give what ``Memory`` gives in process."""

from __future__ import annotations

from typing import Any

import pytest

from convmem import AsyncClient, Client, InvalidMessageError, Memory, SessionNotFoundError
from convmem.errors import ConfigurationError, ConflictError, ServiceError

from .conftest import Live

TOOL_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}],
}
SCRIPT: list[Any] = [
    {"role": "system", "content": "You are terse."},
    *[
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "lorem ipsum " * (3 + i % 5)}
        for i in range(14)
    ],
    [TOOL_CALL, {"role": "tool", "tool_call_id": "c1", "content": "result " * 10}],
    {"role": "assistant", "content": "done"},
]
OPTIONS: dict[str, Any] = {"model": "gpt-4o", "max_tokens": 260, "max_output_tokens": 40, "strategy": "summary_buffer"}


def same(messages: list[Any]) -> list[Any]:
    """What must match between two memories fed the same script (ids and times are each memory's own)."""
    return [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages]


def run(memory: Any) -> list[Any]:
    seen = []
    for step in SCRIPT:
        memory.add_many(step) if isinstance(step, list) else memory.add(step)
        seen.append(memory.context(format="anthropic"))
    return seen


def test_switching_is_one_line(live: Live) -> None:
    local = Memory(**OPTIONS)
    remote = Client(live.url, api_key=live.key_a, user_id="u1", **OPTIONS)
    with remote:
        for mine, theirs in zip(run(local), run(remote), strict=True):
            assert theirs.messages == mine.messages
            assert theirs.system == mine.system
            # The service keeps the session's memory open between requests, so the account matches
            # in full, ``reused`` (what the previous context shares with this one) included.
            assert theirs.account == mine.account
            assert theirs.left_out == mine.left_out
            assert theirs.window == mine.window
        assert remote.stats() == local.stats()
        assert same(remote.messages()) == same(local.messages())
        assert same(remote.messages("summarized")) == same(local.messages("summarized"))
        assert remote.messages("summarized")
        assert remote.budget == local.budget
        assert remote.reserved_output == local.reserved_output
        assert remote.context("and?").account == local.context("and?").account
        again = Client.open(remote.session_id[:6], base_url=live.url, api_key=live.key_a, user_id="u1")
        assert again.context().messages == local.context().messages
        again.close()
        fork = remote.fork(3)
        assert [m.id for m in fork.messages()] == [m.id for m in remote.messages()[:4]]
        fork.close()
        assert live.key_a not in repr(remote)


def test_errors_come_back_as_the_library_raises_them(live: Live) -> None:
    with Client(live.url, api_key=live.key_a, model="gpt-4o") as client:
        with pytest.raises(InvalidMessageError) as caught:
            client.add_many([{"role": "user", "content": "ok"}, {"role": "tool", "content": "orphan"}])
        local = Memory(model="gpt-4o")
        with pytest.raises(InvalidMessageError) as expected:
            local.add_many([{"role": "user", "content": "ok"}, {"role": "tool", "content": "orphan"}])
        assert caught.value.field == expected.value.field
        assert caught.value.index == expected.value.index
        assert client.messages() == []
        with pytest.raises(ConflictError):
            Client(live.url, api_key=live.key_a, model="gpt-4o", session_id=client.session_id)
    with pytest.raises(SessionNotFoundError):
        Client.open("nope", base_url=live.url, api_key=live.key_a)
    with pytest.raises(SessionNotFoundError):  # another tenant's session looks absent
        Client.open(client.session_id, base_url=live.url, api_key=live.key_b)
    with pytest.raises(ServiceError, match="a valid API key is required") as refused:  # the service's own 401
        Client(live.url, api_key="cmk_00000000_" + "x" * 43, model="gpt-4o")
    assert (refused.value.status, refused.value.kind) == (401, "unauthorized")
    with pytest.raises(ConfigurationError, match="cannot take"):
        Client(live.url, api_key=live.key_a, model="gpt-4o", summarizer=object())


async def test_the_async_twin_matches(live: Live) -> None:
    remote = await AsyncClient.create(live.url, api_key=live.key_a, user_id="u2", **OPTIONS)
    local = Memory(**OPTIONS)
    async with remote:
        for step in SCRIPT:
            if isinstance(step, list):
                await remote.add_many(step)
                local.add_many(step)
            else:
                await remote.add(step)
                local.add(step)
            assert (await remote.context()).account == local.context().account
        assert await remote.stats() == local.stats()
        assert same(await remote.messages()) == same(local.messages())
        usage = await remote.record_usage({"prompt_tokens": 7, "completion_tokens": 3})
        assert usage == local.record_usage({"prompt_tokens": 7, "completion_tokens": 3})
        assert (await remote.stats()).input_tokens == 7


def test_the_turn_replay_gives_the_context_that_was_served_at_each_turn(live: Live) -> None:
    import httpx

    with Client(live.url, api_key=live.key_a, user_id="u3", **OPTIONS) as remote:
        served = run(remote)
        seq = -1
        summaries_seen = []
        for step, ctx in zip(SCRIPT, served, strict=True):
            seq += len(step) if isinstance(step, list) else 1
            turn = httpx.get(
                f"{live.url}/v1/sessions/{remote.session_id}/turns/{seq}",
                params={"user_id": "u3", "format": "anthropic"},
                headers={"Authorization": f"Bearer {live.key_a}"},
            ).json()
            assert turn["exact"] is True
            assert turn["context"]["messages"] == ctx.messages
            assert turn["context"]["account"]["total"] == ctx.account.total
            assert turn["context"]["account"]["summary"] == ctx.account.summary
            assert [tuple(x.values()) for x in turn["context"]["left_out"]] == [tuple(x) for x in ctx.left_out]
            if turn["summary"] is not None:
                summaries_seen.append(turn["summary"]["text"])
        history = httpx.get(
            f"{live.url}/v1/sessions/{remote.session_id}/summaries",
            params={"user_id": "u3"},
            headers={"Authorization": f"Bearer {live.key_a}"},
        ).json()
        assert len(history) >= 2
        assert history[-1]["text"] == summaries_seen[-1]
        assert remote.stats().summaries == len(history)


def test_replies_and_provider_batches_go_in_as_they_come(live: Live) -> None:
    reply = {
        "object": "response",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        ],
        "usage": {"input_tokens": 1500, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 1024}},
    }
    outputs = [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in ("c1", "c2")]
    local = Memory("gpt-4o")
    with Client(live.url, api_key=live.key_a, user_id="u2", model="gpt-4o") as remote:
        for memory in (local, remote):
            memory.add({"role": "user", "content": "call both"})
            [assistant] = memory.add_response(reply)
            assert [call.id for call in assistant.tool_calls] == ["c1", "c2"]
            assert len(memory.add_many(outputs)) == 2
            # The same calls given as items, as a Responses stream delivers them: one assistant message.
            again = [{**item, "call_id": f"{item['call_id']}b"} for item in reply["output"][1:]]
            assert len(memory.add_many(again)) == 1
            memory.add_many([{**item, "call_id": f"{item['call_id']}b"} for item in outputs])
        assert remote.context(format="responses").messages == local.context(format="responses").messages
        assert remote.stats().cached_input_tokens == local.stats().cached_input_tokens == 1024
        errors = []
        for memory in (local, remote):  # an error reads the same from the service as from the library
            with pytest.raises(InvalidMessageError) as caught:
                memory.add_many([{"role": "user", "content": "ok"}, {"role": "tool", "content": "x"}])
            errors.append(caught.value)
        assert str(errors[1]) == str(errors[0])
        assert (errors[1].field, errors[1].index) == (errors[0].field, errors[0].index)
