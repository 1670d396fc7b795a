"""Replies as the providers return them, for each reply content type, go in with ``add_response``, and the next
request is checked strictly (SDK types and provider rules) in all three formats.

Server tools (Anthropic web search, Responses web search), compaction, custom tool calls (Chat and
Responses), reasoning with encrypted content (Responses under ``store: false``), thinking before a tool
call, audio, refusal, a reply cut off mid-arguments, DeepSeek's ``reasoning_content`` and Gemini's thought
signature, and tool ids that repeat across turns or run long.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from convmem import Memory
from convmem.formats import parse_messages
from convmem.formats.anthropic import from_anthropic
from convmem.formats.responses import from_responses
from convmem.tokens._vocab import load_encoding

from . import rules, strict

pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

U = {"role": "user", "content": "what is the weather in Oslo?"}
NEXT = {"role": "user", "content": "and tomorrow?"}
FORMATS = ("openai", "anthropic", "responses")
_ENC = load_encoding("o200k_base")
_VENDOR = ("reasoning_content", "extra_content")  # Chat-compatible servers' own fields, checked apart


def _chat(message: dict[str, Any], finish: str = "stop", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }


def _claude(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }


def _response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-5.1",
        "output": output,
        "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25},
    }


def checked(memory: Memory, fmt: str) -> Any:
    """The next request in ``fmt``, checked against the SDK's strict types (beta for Anthropic) and the rules."""
    ctx = memory.context(format=fmt)
    if fmt == "openai":
        for i, m in enumerate(ctx.messages):
            plain = {k: v for k, v in m.items() if k not in _VENDOR}
            plain["tool_calls"] = [{k: v for k, v in c.items() if k not in _VENDOR} for c in m.get("tool_calls", [])]
            strict.check(strict_chat(), {k: v for k, v in plain.items() if v != [] or k != "tool_calls"}, f"[{i}]")
    elif fmt == "responses":
        strict.responses_items(ctx.messages)
    else:
        strict.anthropic_system(ctx.system)
        for i, m in enumerate(ctx.messages):
            strict.check(anthropic.types.beta.BetaMessageParam, m, f"messages[{i}]")
    rules.check(fmt, ctx.messages)
    return ctx


def strict_chat() -> Any:
    from openai.types.chat import ChatCompletionMessageParam

    return ChatCompletionMessageParam


def every_format(memory: Memory) -> dict[str, Any]:
    return {fmt: checked(memory, fmt) for fmt in FORMATS}


# --- server tools ----------------------------------------------------------------------------------------
_SEARCH = [
    {"type": "text", "text": "Let me look."},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "Oslo weather"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://yr.no/oslo",
                "title": "Oslo weather",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2I",
                "page_age": "1 day ago",
            }
        ],
    },
    {"type": "text", "text": "Sunny, 21 degrees."},
]


def test_anthropic_web_search_travels_with_its_result() -> None:
    memory = Memory("claude-sonnet-4-6", format="anthropic", max_tokens=50_000)
    memory.add(U)
    memory.add_response(_claude(_SEARCH))
    memory.add(NEXT)
    sent = every_format(memory)
    assert sent["anthropic"].messages[1]["content"] == _SEARCH, "use, result and text as they came, in order"
    assert not sent["anthropic"].account.exact  # the encrypted result is estimated, and said so
    assert any("estimated" in w for w in sent["anthropic"].warnings)
    for fmt in ("openai", "responses"):
        assert "Sunny, 21 degrees." in json.dumps(sent[fmt].messages)
        assert "srvtoolu_1" not in json.dumps(sent[fmt].messages)
        assert {e.detail for e in sent[fmt].left_out} >= {
            "anthropic server_tool_use",
            "anthropic web_search_tool_result",
        }


_WEB_CALL = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "Oslo"},
}
_ANSWER = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Sunny.", "annotations": [], "logprobs": []}],
}


def test_responses_hosted_web_search_is_resent_with_its_message() -> None:
    memory = Memory("gpt-5.1", format="responses", max_tokens=50_000)
    memory.add(U)
    memory.add_response(_response([_WEB_CALL, _ANSWER]))
    memory.add(NEXT)
    sent = every_format(memory)
    items = sent["responses"].messages
    assert items[1] == _WEB_CALL
    assert items[2]["id"] == "msg_1"
    assert [e.detail for e in sent["anthropic"].left_out] == ["responses web_search_call"]


# --- custom tool calls --------------------------------------------------------------------------------------
def test_a_custom_tool_call_round_trips_in_both_openai_formats_and_is_left_out_for_anthropic() -> None:
    call = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_sql", "input": "SELECT 1"}
    memory = Memory("gpt-5.1", format="responses", max_tokens=50_000)
    memory.add(U)
    added = memory.add_response(_response([call]))
    assert memory.pending_tool_calls == ["call_1"]
    assert json.loads(added[0].tool_calls[0].arguments) == "SELECT 1"
    memory.add({"type": "custom_tool_call_output", "call_id": "call_1", "output": "1"})
    memory.add(NEXT)
    sent = every_format(memory)
    assert sent["responses"].messages[1:3] == [
        call,
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "1"},
    ]
    chat_call = sent["openai"].messages[1]["tool_calls"][0]
    assert chat_call == {"id": "call_1", "type": "custom", "custom": {"name": "apply_sql", "input": "SELECT 1"}}
    assert "apply_sql" not in json.dumps(sent["anthropic"].messages)
    assert {e.detail for e in sent["anthropic"].left_out} == {
        "a custom tool call (no anthropic equivalent)",
        "the result of a call left out",
    }


def test_a_chat_custom_tool_call_is_stored_and_answered() -> None:
    memory = Memory("gpt-5.1", max_tokens=50_000)
    memory.add(U)
    call = {"id": "call_9", "type": "custom", "custom": {"name": "shell", "input": "ls -la"}}
    memory.add_response(_chat({"content": None, "tool_calls": [call]}, "tool_calls"))
    memory.add({"role": "tool", "tool_call_id": "call_9", "content": "a.txt"})
    memory.add(NEXT)
    sent = every_format(memory)
    assert sent["openai"].messages[1]["tool_calls"] == [call]
    assert sent["responses"].messages[1] == {
        "type": "custom_tool_call",
        "call_id": "call_9",
        "name": "shell",
        "input": "ls -la",
    }
    assert sent["responses"].messages[2] == {"type": "custom_tool_call_output", "call_id": "call_9", "output": "a.txt"}


# --- reasoning ------------------------------------------------------------------------------------------------
def test_responses_reasoning_with_encrypted_content_keeps_its_ids_with_its_call() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABo..."}
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city":"Oslo"}',
    }
    memory = Memory("gpt-5.1", format="responses", max_tokens=50_000)
    memory.add(U)
    memory.add_response(_response([reasoning, call]))
    memory.add({"type": "function_call_output", "call_id": "call_1", "output": "sunny"})
    memory.add(NEXT)
    sent = every_format(memory)
    assert sent["responses"].messages[1:3] == [reasoning, {**call, "status": "completed"} if "status" in call else call]
    for fmt in ("openai", "anthropic"):  # one provider's opaque reasoning never goes to another
        assert "gAAAAABo" not in json.dumps(sent[fmt].messages)


def test_an_anthropic_thinking_turn_after_an_apps_note_still_opens_with_its_thinking() -> None:
    memory = Memory("claude-sonnet-4-6", format="anthropic", max_tokens=50_000)
    memory.add(U)
    memory.add({"role": "assistant", "content": "(checking the forecast service)"})  # the app's own note
    thinking = {"type": "thinking", "thinking": "I should call the tool.", "signature": "EqQBCgIYAh"}
    use = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
    memory.add_response(_claude([thinking, use], "tool_use"))
    memory.add({"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"})
    sent = every_format(memory)["anthropic"]
    turn = sent.messages[3]
    assert turn["content"][:2] == [thinking, use], "the turn opens with its thinking, byte for byte"
    assert sent.messages[2] == {"role": "user", "content": "(continued)"}
    assert sent.account.total >= _ENC.encode_ordinary("(continued)").__len__()


def test_deepseek_reasoning_content_goes_back_on_tool_call_turns_to_deepseek_only() -> None:
    reply = {
        "content": None,
        "reasoning_content": "The user wants the weather; call the tool.",
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
    }
    for model, sent_back in (("deepseek-chat", True), ("gpt-4o", False)):
        memory = Memory(model, max_tokens=50_000)
        memory.add(U)
        memory.add_response(_chat(reply, "tool_calls"))
        memory.add({"role": "tool", "tool_call_id": "call_0", "content": "sunny"})
        chat = every_format(memory)["openai"]
        assert ("reasoning_content" in chat.messages[1]) is sent_back, model


def test_a_gemini_thought_signature_goes_back_on_its_call_to_gemini_only() -> None:
    signature = {"google": {"thought_signature": "CiQBVKhc7u..."}}
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "weather", "arguments": "{}"},
        "extra_content": signature,
    }
    for model, sent_back in (("gemini-3-pro", True), ("gpt-4o", False)):
        memory = Memory(model, max_tokens=50_000)
        memory.add(U)
        memory.add_response(_chat({"content": None, "tool_calls": [call]}, "tool_calls"))
        memory.add({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
        chat = every_format(memory)["openai"]
        assert (chat.messages[1]["tool_calls"][0].get("extra_content") == signature) is sent_back, model


# --- audio, refusal, truncated -------------------------------------------------------------------------------
def test_an_audio_reply_is_sent_by_id_in_chat_as_its_transcript_elsewhere_and_counted_as_its_audio() -> None:
    audio = {"id": "audio_1", "data": "UklGRiQAAABXQVZF", "expires_at": 1, "transcript": "It is sunny in Oslo."}
    usage = {
        "prompt_tokens": 20,
        "completion_tokens": 400,
        "total_tokens": 420,
        "completion_tokens_details": {"audio_tokens": 380, "text_tokens": 20},
    }
    memory = Memory("gpt-4o", max_tokens=50_000)
    memory.add(U)
    memory.add_response(_chat({"content": None, "refusal": None, "audio": audio}, usage=usage))
    memory.add(NEXT)
    sent = every_format(memory)
    assert sent["openai"].messages[1] == {"role": "assistant", "content": "", "audio": {"id": "audio_1"}}
    assert sent["anthropic"].messages[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "It is sunny in Oslo."}],
    }
    assert sent["responses"].messages[1] == {"role": "assistant", "content": "It is sunny in Oslo."}
    assert sent["openai"].account.window > 380, "what sending the audio back costs, not 7 tokens"


def test_a_refusal_only_reply_is_its_refusal_in_every_format() -> None:
    memory = Memory("gpt-4o", max_tokens=50_000)
    memory.add(U)
    memory.add_response(_chat({"content": None, "refusal": "I can't help with that."}))
    memory.add(NEXT)
    sent = every_format(memory)
    assert sent["openai"].messages[1]["refusal"] == "I can't help with that."
    assert sent["anthropic"].messages[1]["content"] == [{"type": "text", "text": "I can't help with that."}]
    refusal = sent["responses"].messages[1]["content"]
    assert refusal == [{"type": "refusal", "refusal": "I can't help with that."}]


def test_a_reply_cut_off_mid_arguments_is_stored_and_sent_without_the_cut_call() -> None:
    cut = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Os'}}
    memory = Memory("gpt-4o", max_tokens=50_000)
    memory.add(U)
    (stored,) = memory.add_response(_chat({"content": "Checking", "tool_calls": [cut]}, "length"))
    assert stored.extra["openai"]["$truncated"] == [cut], "stored faithfully"
    assert memory.pending_tool_calls == [], "nobody runs a cut-off call"
    memory.add(NEXT)
    sent = every_format(memory)
    for fmt in FORMATS:
        assert "Checking" in json.dumps(sent[fmt].messages)
        assert "call_1" not in json.dumps(sent[fmt].messages)
        assert "a tool call cut off mid-arguments (finish_reason length)" in [e.detail for e in sent[fmt].left_out]


# --- ids ------------------------------------------------------------------------------------------------------
def test_ids_repeated_across_turns_and_long_ids_are_made_unique_and_short_reversibly() -> None:
    long_id = "call_" + "x" * 80
    memory = Memory("gpt-4o", max_tokens=50_000)
    for turn, call_id in enumerate(("call_0", "call_0", long_id)):
        memory.add({"role": "user", "content": f"question {turn}"})
        call = {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": "{}"}}
        memory.add_response(_chat({"content": None, "tool_calls": [call]}, "tool_calls"))
        memory.add({"role": "tool", "tool_call_id": call_id, "content": f"result {turn}"})
    sent = every_format(memory)  # the rules check uniqueness, patterns and lengths
    claude = sent["anthropic"].messages
    assert [b["id"] for m in claude if m["role"] == "assistant" for b in m["content"]][:2] == [
        "call_0",
        "cmx2_call_5f0",
    ]
    back = from_anthropic(claude)
    assert [c.id for m in back for c in m.tool_calls] == ["call_0", "call_0", long_id], "escapes come back as they were"
    items = sent["responses"].messages
    assert all(len(i["call_id"]) <= 64 for i in items if "call_id" in i)
    returned = from_responses(items)
    assert [c.id for m in returned for c in m.tool_calls][:2] == ["call_0", "call_0"]
    assert parse_messages(sent["openai"].messages)[1].tool_calls[0].id == "call_0", "Chat sends ids as they are"
