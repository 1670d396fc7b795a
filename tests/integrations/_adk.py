"""The offline model the ADK tests run in ADK's own Runner, and an explicit reading of its requests.

:class:`ScriptedLlm` is a ``BaseLlm`` whose replies depend only on the request: after a
user's "Turn N: ..." it calls ``forecast`` twice in parallel (ids ``tN-a``, ``tN-b``, or a
tool the test names instead), and once the results of that turn are in it answers. So a new
process goes on exactly where the old one stopped. Every request is recorded as ADK sent it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

from convmem.messages import Message, ToolCall

PRELOADED = "The following content is from your previous conversations"  # PreloadMemoryTool's opening words


class ScriptedLlm(BaseLlm):
    """Two parallel tool calls after a user turn, an answer after their results; records every request."""

    model: str = "scripted"
    requests: list[Any] = Field(default_factory=list)
    tool: str = "forecast"
    arguments: dict[str, str] | None = None  # the calls' arguments (default: a city per call)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append((copy.deepcopy(llm_request.contents), _text(llm_request.config.system_instruction)))
        kinds = [_kind(c) for c in llm_request.contents]
        last_user = max(i for i, kind in enumerate(kinds) if kind == "user")
        turn = turn_of(_text(llm_request.contents[last_user]))
        if "results" in kinds[last_user:]:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=f"Answer {turn}: mild.")]))
            return
        calls = [
            types.Part(
                function_call=types.FunctionCall(
                    id=f"t{turn}-{x}", name=self.tool, args=self.arguments or {"city": f"City{turn}{x}"}
                )
            )
            for x in ("ab" if self.arguments is None else "a")
        ]
        yield LlmResponse(content=types.Content(role="model", parts=calls))


def turn_of(text: str) -> int:
    found = re.search(r"Turn (\d+)", text)
    assert found, text
    return int(found.group(1))


def _kind(content: types.Content) -> str:
    parts = content.parts or []
    if any(p.function_response is not None for p in parts):
        return "results"
    if content.role == "user" and not _text(content).startswith(PRELOADED):
        return "user"
    return "other"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text or "" for p in content.parts or ())


def as_convmem(contents: list[types.Content], system: str) -> list[Message]:
    """An explicit mapping of a request, independent of the adapter's: the instruction first."""
    out = [Message(role="system", content=system)] if system else []
    for content in contents:
        parts = content.parts or []
        if content.role == "model":
            calls = tuple(
                ToolCall(p.function_call.id or "", p.function_call.name or "", json.dumps(p.function_call.args))
                for p in parts
                if p.function_call is not None
            )
            out.append(Message(role="assistant", content=_text(content) or None, tool_calls=calls))
            continue
        for p in parts:
            if p.function_response is not None:
                response = json.dumps(p.function_response.response)
                out.append(Message(role="tool", content=response, tool_call_id=p.function_response.id or ""))
        if _text(content):
            out.append(Message(role="user", content=_text(content)))
    return out


def user_turn(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])
