"""What the renderers send of a Message beyond its modelled fields, so that counters can price it.

Every field a request carries is counted (the budget is only honest if it is). The modelled
fields (content, name, tool calls, tool_call_id) are priced by the counter itself; this module
names the rest, per format namespace, exactly as the renderers send it:

* OpenAI Chat: an assistant's non-empty ``refusal`` and its legacy ``function_call`` (name and
  arguments); a tool result with images adds a user message carrying a label
  (:func:`~convmem.formats.openai.tool_image_label`), and the tool message carries
  :data:`~convmem.formats.openai.TOOL_IMAGE_NOTE` when it has no text of its own.
* Anthropic: the text of kept ``thinking`` blocks, and a document's ``context``.
* Responses: the summary and content text of kept ``reasoning`` items.

Opaque provider data (thinking ``signature``, ``redacted_thinking`` data, ``encrypted_content``)
is sent but is not text the model reads as tokens: it is not counted. A message carries the
namespace of the format it came from, so its extras are exact there and over-counted (never
under) in the other formats, which do not send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages import FilePart, ImagePart, Message, TextPart
from .openai import TOOL_IMAGE_NOTE, tool_image_label

__all__ = ["sent_extras"]


def sent_extras(message: Message) -> tuple[list[str], int]:
    """The texts rendered beyond the modelled fields of ``message``, and how many messages it adds."""
    texts: list[str] = []
    added = 0
    extra = message.extra
    if extra:
        openai = extra.get("openai")
        if message.role == "assistant" and isinstance(openai, Mapping):
            refusal = openai.get("refusal")
            if isinstance(refusal, str) and refusal:
                texts.append(refusal)
            call = openai.get("function_call")
            if (
                isinstance(call, Mapping)
                and isinstance(call.get("name"), str)
                and isinstance(call.get("arguments"), str)
            ):
                texts += [call["name"], call["arguments"]]
        texts += _layout_texts(extra.get("anthropic"), "thinking")
        texts += _layout_texts(extra.get("responses"), "reasoning")
    content = message.content
    if isinstance(content, tuple):
        for part in content:
            context = _namespace(part.extra, "anthropic").get("context") if isinstance(part, FilePart) else None
            if isinstance(context, str):
                texts.append(context)
        if message.role == "tool" and any(isinstance(p, ImagePart) for p in content):
            added = 1
            texts.append(tool_image_label(message.tool_call_id or ""))
            if not any(isinstance(p, TextPart) for p in content):
                texts.append(TOOL_IMAGE_NOTE)
    return texts, added


def _namespace(extra: Mapping[str, Any], fmt: str) -> Mapping[str, Any]:
    ns = extra.get(fmt) if extra else None
    return ns if isinstance(ns, Mapping) else {}


def _layout_texts(ns: object, kind: str) -> list[str]:
    if not isinstance(ns, Mapping) or not isinstance(ns.get("$layout"), list):
        return []
    texts: list[str] = []
    for entry in ns["$layout"]:
        if not isinstance(entry, Mapping) or entry.get("type") != kind:
            continue
        if kind == "thinking" and isinstance(entry.get("thinking"), str):
            texts.append(entry["thinking"])
        for key in ("summary", "content") if kind == "reasoning" else ():
            for piece in entry.get(key) or ():
                if isinstance(piece, Mapping) and isinstance(piece.get("text"), str):
                    texts.append(piece["text"])
    return texts
