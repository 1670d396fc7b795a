"""A provider's whole reply -> the assistant Messages to store and the usage to record.

:func:`parse_reply` takes, as an SDK object or its dict:

* an OpenAI ``ChatCompletion``: ``choices[0].message`` (text, tool calls, refusal, annotations,
  audio). Cut off by ``finish_reason: "length"`` in the middle of a call's arguments, the calls whose
  arguments are not JSON are kept, verbatim, in ``extra["openai"]["$truncated"]`` (never sent as calls:
  nobody runs them, and a call sent without its result is refused); an audio reply's audio tokens,
  when its usage reports them, in ``extra["openai"]["$audio_tokens"]`` (what sending it back by id costs);
* an Anthropic ``Message``: its content blocks (text, ``tool_use``, ``thinking``, server tools and
  their results, ``compaction`` ...); the reply's ``id``, ``model``, ``stop_reason``,
  ``stop_sequence``, ``type`` and ``usage`` are kept in the message's ``extra["anthropic"]``
  (export is lossless) and never rendered into a request;
* a Responses ``Response``: its ``output`` items, parsed together so that reasoning items, the
  provider's tool items (``web_search_call``, ``mcp_call`` ...) and parallel calls join their
  assistant message; a reply of reasoning only (cut by ``max_output_tokens``) stores nothing, since a
  reasoning item sent back without the item that followed it is refused;
* a Responses ``CompactedResponse`` (``responses.compact``): its output (the user messages and the
  compaction item) as one Message, kept verbatim: the summary a memory adopts.

Example::

    messages, usage = parse_reply(client.chat.completions.create(...))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidMessageError
from ..messages import Message
from ._carry import TRUNCATED
from ._common import LAYOUT, listing, mapping
from ._sdk import is_sdk_object
from ._sent import AUDIO_TOKENS
from .anthropic import from_anthropic
from .openai import from_openai
from .responses import compaction_message, from_responses

__all__ = ["parse_reply"]

_ANTHROPIC_REPLY = ("id", "model", "stop_reason", "stop_sequence", "type", "usage", "container")


def _dump(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if is_sdk_object(value):
        try:
            dumped = value.model_dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
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
        choice = mapping(choices[0], "choices[0]")
        message = mapping(choice.get("message"), "choices[0].message")
        return [from_openai(_chat_reply(message, choice.get("finish_reason"), usage))], usage
    if d.get("object") == "response.compaction":
        return [compaction_message(listing(d.get("output"), "output"))], usage
    if d.get("object") == "response" or "output" in d:
        items = listing(d.get("output"), "output")
        if all(isinstance(i, Mapping) and i.get("type") == "reasoning" for i in items):
            return [], usage  # reasoning alone is refused when sent back
        return [m for m in from_responses(items) if _holds(m)], usage
    if d.get("type") == "message" and "content" in d:
        kept = {key: d[key] for key in _ANTHROPIC_REPLY if key in d}
        parsed = from_anthropic([{"role": "assistant", "content": d["content"], **kept}])
        return [m for m in parsed if _holds(m)], usage
    raise InvalidMessageError(
        "is not a ChatCompletion (choices), a Responses Response (output) or an Anthropic Message", field="response"
    )


def _holds(m: Message) -> bool:
    """A reply message worth storing: content, calls, or objects kept verbatim (a server tool's traffic)."""
    return bool(m.content or m.tool_calls or any(LAYOUT in ns for ns in m.extra.values() if isinstance(ns, Mapping)))


def _chat_reply(message: Mapping[str, Any], finish: object, usage: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A Chat reply message with what the request side needs kept: a call cut off mid-arguments set aside
    (``$truncated``), an audio reply's audio tokens (``$audio_tokens``)."""
    out = dict(message)
    calls = out.get("tool_calls")
    if finish == "length" and isinstance(calls, list):
        whole = [c for c in calls if _whole(c)]
        if len(whole) != len(calls):
            out[TRUNCATED] = [c for c in calls if not _whole(c)]
            if whole:
                out["tool_calls"] = whole
            else:
                del out["tool_calls"]
    details = usage.get("completion_tokens_details") if usage is not None else None
    audio = details.get("audio_tokens") if isinstance(details, Mapping) else None
    if isinstance(out.get("audio"), Mapping) and isinstance(audio, int) and not isinstance(audio, bool) and audio > 0:
        out[AUDIO_TOKENS] = audio
    return out


def _whole(call: object) -> bool:
    """True when a Chat tool call's arguments are JSON (a cut-off one's are not)."""
    fn = call.get("function") if isinstance(call, Mapping) else None
    arguments = fn.get("arguments") if isinstance(fn, Mapping) else None
    if not isinstance(arguments, str):
        return True  # not cut off: let the parser name what is wrong with it
    try:
        json.loads(arguments)
    except ValueError:
        return False
    return True
