"""What the renderers send of a Message beyond its modelled fields, so that counters can price it.

Every field a request carries is counted (the budget is only honest if it is). The modelled
fields (content, name, tool calls, tool_call_id) are priced by the counter itself; this module
names the rest, per format namespace, exactly as the renderers send it:

* OpenAI Chat: an assistant's non-empty ``refusal`` and its legacy ``function_call`` (name and
  arguments), DeepSeek's ``reasoning_content`` on a tool-call turn, an audio reply's transcript
  (what the other formats send in its place); a tool result with images or files adds a user
  message carrying a label (:func:`~convmem.formats.openai.tool_image_label`), and the tool message
  carries :data:`~convmem.formats.openai.TOOL_IMAGE_NOTE` when it has no text of its own.
* Anthropic and Responses: the text of every object kept verbatim (thinking, reasoning summaries,
  server tool uses and their results, search results, compaction summaries ...:
  :func:`convmem.formats._native.texts`), a document's ``context``, and the placeholder user
  message in front of an assistant turn that opens with thinking.

:func:`sent_estimate` gives the tokens of what is opaque but billed (encrypted search results, a
Responses compaction, a generated image, an audio reply sent back by id: its audio tokens when the
reply reported them): estimated, never exact. Opaque data the provider does not bill (thinking
``signature``, ``redacted_thinking`` data, a reasoning item's ``encrypted_content``) is not counted.
A message carries the namespace of the format it came from, so its extras are exact there and
over-counted (never under) in the other formats, which do not send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages import FilePart, ImagePart, Message, TextPart
from ._native import kept_objects, opaque_tokens, texts
from .anthropic._rules import CONTINUATION_PLACEHOLDER, KEPT_KEYS
from .openai import TOOL_IMAGE_NOTE, tool_image_label

__all__ = ["AUDIO_TOKENS", "sent_estimate", "sent_extras"]

AUDIO_TOKENS = "$audio_tokens"  # extra["openai"][...]: the audio tokens a reply's usage reported for its audio
_KEPT_FORMATS = ("anthropic", "responses")


def sent_extras(message: Message) -> tuple[list[str], int]:
    """The texts rendered beyond the modelled fields of ``message``, and how many messages it adds."""
    texts_: list[str] = []
    added = 0
    extra = message.extra
    if extra:
        openai = extra.get("openai")
        if message.role == "assistant" and isinstance(openai, Mapping):
            texts_ += _chat_texts(openai, bool(message.tool_calls))
        for fmt in _KEPT_FORMATS:
            for obj in kept_objects(extra, fmt, item=False):  # an $item's text is its message's content
                texts_ += texts(obj)
        if _opens_with_thinking(extra.get("anthropic")):
            added += 1
            texts_.append(CONTINUATION_PLACEHOLDER)
    content = message.content
    if isinstance(content, tuple):
        for part in content:
            context = _namespace(part.extra, "anthropic").get("context") if isinstance(part, FilePart) else None
            if isinstance(context, str):
                texts_.append(context)
        if message.role == "tool" and any(isinstance(p, (ImagePart, FilePart)) for p in content):
            added += 1
            texts_.append(tool_image_label(message.tool_call_id or ""))
            if not any(isinstance(p, TextPart) for p in content):
                texts_.append(TOOL_IMAGE_NOTE)
    return texts_, added


def sent_estimate(message: Message) -> int:
    """The estimated tokens of the opaque content ``message`` sends (see the module docstring); 0 for most."""
    extra = message.extra
    total = 0
    if extra:
        for fmt in _KEPT_FORMATS:
            total += sum(opaque_tokens(obj, fmt) for obj in kept_objects(extra, fmt))
        openai = extra.get("openai")
        audio = openai.get(AUDIO_TOKENS) if isinstance(openai, Mapping) else None
        if isinstance(audio, int) and not isinstance(audio, bool) and audio > 0:
            total += audio
    for call in message.tool_calls:
        if call.extra:
            total += sum(opaque_tokens(obj, fmt) for fmt in _KEPT_FORMATS for obj in kept_objects(call.extra, fmt))
    return total


def _chat_texts(ns: Mapping[str, Any], calls: bool) -> list[str]:
    out: list[str] = []
    refusal = ns.get("refusal")
    if isinstance(refusal, str) and refusal:
        out.append(refusal)
    call = ns.get("function_call")
    if isinstance(call, Mapping) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), str):
        out += [call["name"], call["arguments"]]
    reasoning = ns.get("reasoning_content")
    if calls and isinstance(reasoning, str):
        out.append(reasoning)
    audio = ns.get("audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("transcript"), str) and AUDIO_TOKENS not in ns:
        out.append(audio["transcript"])
    return out


def _opens_with_thinking(ns: object) -> bool:
    layout = ns.get("$layout") if isinstance(ns, Mapping) else None
    first = layout[0] if isinstance(layout, list) and layout else None
    return isinstance(first, Mapping) and first.get("type") in KEPT_KEYS


def _namespace(extra: Mapping[str, Any], fmt: str) -> Mapping[str, Any]:
    ns = extra.get(fmt) if extra else None
    return ns if isinstance(ns, Mapping) else {}
