"""Conversation shapes, each as the batches an application adds, and the memory options it uses."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SHAPES", "Shape"]

Shape = tuple[dict[str, Any], list[list[Any]]]  # memory options, batches for add_many
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
_SYS = {"role": "system", "content": "You are terse."}
_HI = {"role": "user", "content": "hi"}


def _call(i: str, name: str = "get_weather", args: str = '{"city":"Oslo"}') -> dict[str, Any]:
    return {"id": i, "type": "function", "function": {"name": name, "arguments": args}}


def _image(detail: str | None, url: str = "https://x.example/a.png") -> dict[str, Any]:
    inner = {"url": url} if detail is None else {"url": url, "detail": detail}
    return {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": inner}]}


def _talk(n: int, words: int = 40) -> list[list[Any]]:
    out: list[list[Any]] = []
    for i in range(n):
        out.append([{"role": "user", "content": f"question {i} " + "word " * words}])
        out.append([{"role": "assistant", "content": f"answer {i} " + "word " * words}])
    return out


def _agent_session() -> Shape:
    path = Path(__file__).resolve().parents[2] / "examples" / "agent_session.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {"max_tokens": 16_000}, [rows]


_BIG: dict[str, Any] = {"max_tokens": 100_000}
SHAPES: dict[str, Callable[[], Shape]] = {
    "plain": lambda: (_BIG, [[_SYS, _HI], [{"role": "assistant", "content": "hello"}]]),
    "names": lambda: (_BIG, [[_SYS, {"role": "user", "content": "hi", "name": "ada"}]]),
    "image_no_detail": lambda: (_BIG, [[_image(None)]]),
    "image_low": lambda: (_BIG, [[_image("low")]]),
    "image_high_data": lambda: (_BIG, [[_image("high", f"data:image/png;base64,{_PNG}")]]),
    "image_original": lambda: (_BIG, [[_image("original")]]),
    "tool_result_image": lambda: (
        _BIG,
        [
            [_HI],
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}]}],
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [
                                {"type": "text", "text": "here"},
                                {
                                    "type": "image",
                                    "source": {"type": "base64", "media_type": "image/png", "data": _PNG},
                                },
                            ],
                        }
                    ],
                }
            ],
        ],
    ),
    "tool_result_only_image": lambda: (
        _BIG,
        [
            [_HI, {"role": "assistant", "content": None, "tool_calls": [_call("c1", "shot", "{}")]}],
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "c1",
                            "content": [{"type": "image", "source": {"type": "url", "url": "https://x.example/s.png"}}],
                        }
                    ],
                }
            ],
        ],
    ),
    "parallel_chat": lambda: (
        _BIG,
        [
            [_SYS, _HI, {"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]}],
            [
                {"role": "tool", "tool_call_id": "c1", "content": "sun"},
                {"role": "tool", "tool_call_id": "c2", "content": "rain"},
            ],
        ],
    ),
    "parallel_responses_items": lambda: (
        _BIG,
        [
            [_HI],
            [
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "w",
                    "arguments": "{}",
                    "id": "fc_1",
                    "status": "completed",
                },
                {
                    "type": "function_call",
                    "call_id": "c2",
                    "name": "w",
                    "arguments": "{}",
                    "id": "fc_2",
                    "status": "completed",
                },
                {"type": "function_call_output", "call_id": "c1", "output": "sun"},
                {"type": "function_call_output", "call_id": "c2", "output": "rain"},
            ],
        ],
    ),
    "anthropic_two_results": lambda: (
        _BIG,
        [
            [_HI],
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "checking"},
                        {"type": "tool_use", "id": "t1", "name": "w", "input": {"c": 1}},
                        {"type": "tool_use", "id": "t2", "name": "w", "input": {"c": 2}},
                    ],
                }
            ],
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "sun"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "rain", "is_error": True},
                    ],
                }
            ],
        ],
    ),
    "reasoning_then_message": lambda: (
        _BIG,
        [
            [_HI],
            [
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]},
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "done", "annotations": [], "logprobs": []}],
                },
            ],
        ],
    ),
    "reasoning_then_call": lambda: (
        _BIG,
        [
            [_HI],
            [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
        ],
    ),
    "thinking_blocks": lambda: (
        _BIG,
        [
            [_HI],
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "plan", "signature": "c2ln"},
                        {"type": "tool_use", "id": "t1", "name": "w", "input": {}},
                    ],
                }
            ],
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}],
        ],
    ),
    "empty_content_with_calls": lambda: (
        _BIG,
        [
            [_HI, {"role": "assistant", "content": "", "tool_calls": [_call("c1")]}],
            [{"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        ],
    ),
    "refusal": lambda: (
        _BIG,
        [[_HI, {"role": "assistant", "content": None, "refusal": "I cannot help with that."}]],
    ),
    "readme_idiom_dump": lambda: (
        _BIG,
        [
            [
                _HI,
                {
                    "role": "assistant",
                    "content": "hello",
                    "refusal": None,
                    "annotations": [],
                    "audio": None,
                    "function_call": None,
                    "tool_calls": None,
                },
            ]
        ],
    ),
    "anthropic_message_dump": lambda: (
        _BIG,
        [
            [_HI],
            [
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "hello", "citations": None}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 3, "output_tokens": 1},
                }
            ],
        ],
    ),
    "odd_tool_ids": lambda: (
        _BIG,
        [
            [
                _HI,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_call("functions.get_weather:0"), _call("call 2/é")],
                },
            ],
            [
                {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sun"},
                {"role": "tool", "tool_call_id": "call 2/é", "content": "rain"},
            ],
        ],
    ),
    "system_cache_control": lambda: (
        _BIG,
        [
            [
                {
                    "role": "system",
                    "content": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
                },
                _HI,
            ]
        ],
    ),
    "unknown_keys": lambda: (
        _BIG,
        [
            [
                {"role": "user", "content": "hi", "x_trace": 1},
                {"role": "assistant", "content": "yo", "reasoning_content": "r"},
            ]
        ],
    ),
    "file_part": lambda: (
        _BIG,
        [
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
                            "title": "a.pdf",
                        },
                        {"type": "text", "text": "read"},
                    ],
                }
            ]
        ],
    ),
    "evict_token_budget": lambda: ({"max_tokens": 600, "strategy": "token_budget"}, [[_SYS], *_talk(12)]),
    "evict_sliding_window": lambda: (
        {"max_tokens": 100_000, "strategy": "sliding_window", "strategy_options": {"max_messages": 5}},
        [
            [_SYS],
            *_talk(6),
            [{"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]}],
            [
                {"role": "tool", "tool_call_id": "c1", "content": "a"},
                {"role": "tool", "tool_call_id": "c2", "content": "b"},
            ],
        ],
    ),
    "evict_summary_buffer": lambda: ({"max_tokens": 700, "strategy": "summary_buffer"}, [[_SYS], *_talk(12)]),
    "evict_compaction": lambda: ({"max_tokens": 700, "strategy": "compaction"}, [[_SYS], *_talk(12)]),
    "agent_session": _agent_session,
}
