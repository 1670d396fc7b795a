"""A provider's whole reply -> the assistant Messages to store and the usage to record.

:func:`parse_reply` takes, as an SDK object or its dict:

* an OpenAI ``ChatCompletion``: ``choices[0].message`` (text, tool calls, refusal, annotations);
* an Anthropic ``Message``: its content blocks (text, ``tool_use``, ``thinking``); the reply's
  ``id``, ``model``, ``stop_reason``, ``stop_sequence``, ``type`` and ``usage`` are kept in the
  message's ``extra["anthropic"]`` (export is lossless) and never rendered into a request;
* a Responses ``Response``: its ``output`` items, parsed together so that reasoning items and
  parallel ``function_call`` items join their assistant message. Built-in tool items
  (``web_search_call`` ...) are run by the provider and are not stored; a reply with no text and no
  call (reasoning only, e.g. cut by ``max_output_tokens``) stores nothing, since a reasoning item
  sent back without the item that followed it is refused.

Example::

    messages, usage = parse_reply(client.chat.completions.create(...))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidMessageError
from ..messages import Message
from ._common import listing, mapping
from ._sdk import is_sdk_object
from .anthropic import from_anthropic
from .openai import from_openai
from .responses import from_responses

__all__ = ["parse_reply"]

_RESPONSES_KEPT = frozenset({"message", "function_call", "reasoning"})
_ANTHROPIC_REPLY = ("id", "model", "stop_reason", "stop_sequence", "type", "usage", "container")


def _dump(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if is_sdk_object(value):
        try:
            dumped = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception as exc:
            raise InvalidMessageError(f"model_dump() failed: {type(exc).__name__}", field="response") from None
        if isinstance(dumped, Mapping):
            return dumped
    raise InvalidMessageError(
        f"must be a ChatCompletion, an Anthropic Message or a Responses Response (or its dict), "
        f"got {type(value).__name__}",
        field="response",
    )


def parse_reply(response: Any) -> tuple[list[Message], Mapping[str, Any] | None]:
    """The assistant Messages of ``response`` and its usage object (None when it has none).

    Raises:
        InvalidMessageError: ``response`` is none of the three, or its output is invalid.
    """
    d = _dump(response)
    usage = d.get("usage")
    usage = usage if isinstance(usage, Mapping) else None
    if "choices" in d:
        choices = listing(d["choices"], "choices")
        if not choices:
            raise InvalidMessageError("holds no choice", field="choices")
        message = mapping(mapping(choices[0], "choices[0]").get("message"), "choices[0].message")
        return [from_openai(message)], usage
    if d.get("object") == "response" or "output" in d:
        items = [
            i for i in listing(d.get("output"), "output") if isinstance(i, Mapping) and i.get("type") in _RESPONSES_KEPT
        ]
        messages = [m for m in from_responses(items) if m.content or m.tool_calls]
        return messages, usage
    if d.get("type") == "message" and "content" in d:
        kept = {key: d[key] for key in _ANTHROPIC_REPLY if key in d}
        parsed = from_anthropic([{"role": "assistant", "content": d["content"], **kept}])
        return [m for m in parsed if m.content or m.tool_calls], usage
    raise InvalidMessageError(
        "is not a ChatCompletion (choices), a Responses Response (output) or an Anthropic Message", field="response"
    )
