"""ADK events and requests <-> convmem messages and Chat dicts (no I/O): what each side reads of the other.

See :mod:`convmem.integrations.adk` for the mapping of an event's parts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.genai import types
from pydantic_core import to_jsonable_python

from ...errors import ConfigurationError
from ...messages import Message, ToolCall

__all__ = ["KEY", "contents_of", "event_messages", "json_of", "session_key", "signature", "text_of", "tools_of"]

KEY = "adk"  # the metadata key of the event (on messages) and of the ADK fields (on sessions)


def session_key(app_name: str, session_id: str) -> str:
    """The convmem session id of an ADK session (``adk:<app>:<id>``): two apps never share a session.

    ``:`` is a character the service's session ids allow, so the service (and ``convmem`` CLI) can
    address an ADK session whose id it allows too.
    """
    if not app_name or ":" in app_name or "#" in app_name:
        raise ConfigurationError(f"an ADK app name must be non-empty, without ':' or '#', got {app_name!r}")
    return f"adk:{app_name}:{session_id}"


def event_messages(event: Event) -> list[Message]:
    """The convmem messages of an ADK event (see the module docstring); the first carries the whole event."""
    content = event.content
    if content is None or not content.parts:
        return []
    when = datetime.fromtimestamp(event.timestamp, timezone.utc)
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for number, part in enumerate(content.parts):
        if part.thought:
            continue  # reasoning is not sent back
        if part.text:
            texts.append(part.text)
        elif part.function_call is not None:
            call = part.function_call
            arguments = json_of(call.args or {})
            calls.append(ToolCall(call.id or f"{event.id}-{number}", call.name or "", arguments))
        elif part.function_response is not None:
            answer = part.function_response
            text = json_of(answer.response or {})
            results.append(Message(role="tool", content=text, tool_call_id=answer.id or "", created_at=when))
    out: list[Message] = []
    if content.role == "model":
        if texts or calls:
            out.append(
                Message(role="assistant", content="".join(texts) or None, tool_calls=tuple(calls), created_at=when)
            )
    else:
        out += results
        if texts:
            out.append(Message(role="user", content="".join(texts), created_at=when))
    keyed = [replace(m, id=event.id if i == 0 else f"{event.id}.{i}") for i, m in enumerate(out)]
    if keyed:
        # As a JSON string, not an object: the store checks an object's every member on each read, and
        # pydantic parses a string straight into the Event (together, half of a long session's load).
        keyed[0] = replace(keyed[0], metadata={KEY: {"event": event.model_dump_json(exclude_none=True)}})
    return keyed


def json_of(value: Any) -> str:
    """JSON of a call's arguments or a tool's response (a tool may return pydantic models, as load_memory does)."""
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False, sort_keys=True)


def dumped(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


def contents_of(dicts: Sequence[Mapping[str, Any]]) -> list[types.Content]:
    """OpenAI chat dicts -> genai contents (a run of tool results is one user content, as ADK sends them)."""
    names: dict[str, str] = {}
    out: list[types.Content] = []
    for d in dicts:
        role = d["role"]
        text = text_of(d.get("content"))
        if role == "assistant":
            parts = [types.Part(text=text)] if text else []
            for call in d.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
                arguments = _object(call["function"]["arguments"], "arguments")
                parts.append(
                    types.Part(function_call=types.FunctionCall(id=call["id"], name=names[call["id"]], args=arguments))
                )
            out.append(types.Content(role="model", parts=parts))
        elif role == "tool":
            call_id = d["tool_call_id"]
            part = types.Part(
                function_response=types.FunctionResponse(
                    id=call_id, name=names.get(call_id, ""), response=_object(text, "result")
                )
            )
            last = out[-1] if out else None
            if last is not None and last.role == "user" and last.parts and last.parts[-1].function_response is not None:
                last.parts.append(part)
            else:
                out.append(types.Content(role="user", parts=[part]))
        else:
            out.append(types.Content(role="user", parts=[types.Part(text=text)]))
    return out


def _object(text: str, key: str) -> dict[str, Any]:
    """A JSON object as stored, or the text under ``key`` (convmem cut it to fit, or a provider wrote it)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {key: text}
    return value if isinstance(value, dict) else {key: value}


def text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, types.Content):
        return "".join(p.text or "" for p in content.parts or () if not p.thought)
    if isinstance(content, types.Part):
        return content.text or ""
    if isinstance(content, Sequence):
        return "".join(
            text_of(item) if not isinstance(item, Mapping) else str(item.get("text", "")) for item in content
        )
    return str(content)


def signature(content: types.Content | None) -> tuple[Any, ...]:
    """What identifies a content ADK built from an event: its role, texts and call ids."""
    if content is None:
        return ()
    parts = []
    for part in content.parts or ():
        if part.function_call is not None:
            parts.append(("call", part.function_call.id))
        elif part.function_response is not None:
            parts.append(("result", part.function_response.id))
        elif part.text and not part.thought:
            parts.append(("text", part.text))
    return (content.role, *parts)


def tools_of(request: LlmRequest) -> list[dict[str, Any]]:
    """The request's function declarations as Chat tool definitions, so the budget counts them."""
    out = []
    for tool in request.config.tools or ():
        for declaration in getattr(tool, "function_declarations", None) or ():
            schema = declaration.parameters_json_schema
            if schema is None and declaration.parameters is not None:
                schema = declaration.parameters.model_dump(mode="json", exclude_none=True)
            function = {"name": declaration.name or "", "parameters": schema or {"type": "object", "properties": {}}}
            if declaration.description:
                function["description"] = declaration.description
            out.append({"type": "function", "function": function})
    return out
