"""A local HTTP server speaking the three provider APIs with canned replies, recording each body.

The real ``openai`` and ``anthropic`` clients post to it (``base_url``); nothing in them is mocked.
Replies carry usage with cached tokens, so ``add_response`` has something to record.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ProviderServer", "anthropic_reply", "chat_reply", "responses_reply"]


def chat_reply(text: str | None = "ok", calls: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}} for i, name in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": 2000,
            "completion_tokens": 10,
            "total_tokens": 2010,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
    }


def anthropic_reply(text: str = "ok", calls: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": "let me see", "signature": "c2ln"}]
    if text:
        content.append({"type": "text", "text": text, "citations": None})
    content += [{"type": "tool_use", "id": i, "name": name, "input": {}} for i, name in calls]
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 10,
            "cache_read_input_tokens": 1500,
            "cache_creation_input_tokens": 400,
        },
    }


def responses_reply(text: str = "ok", calls: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]}
    ]
    if text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
            }
        )
    output += [
        {"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": name, "arguments": "{}", "status": "completed"}
        for i, name in calls
    ]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "gpt-4o",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1536},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 5},
            "total_tokens": 2010,
        },
    }


class ProviderServer:
    """``/v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` on 127.0.0.1."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.script: deque[dict[str, Any]] = deque()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.bodies.append((self.path, body))
                if server.script:
                    reply = server.script.popleft()
                elif self.path.endswith("/messages"):
                    reply = anthropic_reply()
                elif self.path.endswith("/responses"):
                    reply = responses_reply()
                else:
                    reply = chat_reply()
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
