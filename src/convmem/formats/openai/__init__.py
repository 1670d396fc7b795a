"""OpenAI Chat Completions messages <-> :class:`~convmem.messages.Message`, losslessly.

One Chat Completions message dict is one Message::

    to_openai(from_openai(d)) == d        # every valid *request* dict d
    from_openai(to_openai(m)) == m        # every Message m the format can express

The package by concept: ``_parse`` reads a message dict, ``_render`` writes one (and a list, whose
tool results' images move to a user message). A reply's fields that a request does not take
(``annotations``, an empty ``refusal``, ``audio`` beyond its ``id``, unknown keys) are kept in
``extra["openai"]`` -- the stored message and its export keep them -- but never rendered: the
request type refuses them. An assistant's non-empty ``refusal``, legacy ``function_call`` and
audio ``id`` are sent (and counted). A tool result's images and files cannot ride in a Chat
tool message: :func:`to_openai_messages` moves them into a user message after the
results (:func:`moved_images`); :func:`to_openai` refuses such a message alone.

Vendor fields of Chat-compatible servers are kept and sent back where their server needs them:
DeepSeek's ``reasoning_content`` on an assistant message that calls tools (its thinking mode
refuses such a turn without it), Gemini's ``extra_content`` (``{"google": {"thought_signature"}}``)
on each tool call. ``to_openai(..., vendor=...)`` names the target model's provider; a known
provider other than theirs never gets them (a model switch sends no one's reasoning to another).

Mapping:

* ``content`` a string stays a string; a list stays a tuple of parts (a list of one
  text part is still a list). ``text`` -> TextPart, ``image_url`` -> ImagePart (a
  ``data:<type>;base64,`` URL becomes ``data`` + ``media_type``, any other URL stays
  ``url``), ``input_audio`` -> AudioPart, ``file`` -> FilePart (``file_data`` split
  like a data URL when it is one), ``refusal`` -> TextPart with
  ``extra={"openai": {"type": "refusal"}}``.
* ``tool_calls[i]`` -> ToolCall; a ``"custom"`` call's free-text ``input`` becomes its
  arguments as a JSON string, with ``extra={"openai": {"type": "custom"}}`` (a Responses
  ``custom_tool_call`` is the same call: each OpenAI format renders the other's).
* the legacy ``function`` role (a function's result) -> a user Message with
  ``extra={"openai": {"role": "function"}}`` and its ``name``: a unit of its own, since
  the legacy ``function_call`` it answers is no ToolCall.
* Everything else (``refusal``, ``audio``, ``annotations``, ``function_call``, keys
  of nested objects ...) is kept verbatim in ``extra["openai"]`` following the
  scheme described in ``convmem.formats._common``; ``"content": null`` and
  ``"tool_calls": []`` are kept there as well, so they come back as they were.

Raises InvalidMessageError (naming the field) for: unknown roles and part types,
tool calls neither function nor custom, arguments that are not JSON, tool messages without
``tool_call_id``, a local image ``path`` and file parts given by ``url``.
``metadata``, ``id``, ``created_at``, ``width`` and ``height`` are never rendered.

Example::

    m = from_openai({"role": "user", "content": "hi"})
    assert to_openai(m) == {"role": "user", "content": "hi"}
"""

from __future__ import annotations

from ._parse import FMT, FUNCTION_ROLE, from_openai, from_openai_messages
from ._render import TOOL_IMAGE_NOTE, VENDOR_FIELDS, moved_images, to_openai, to_openai_messages, tool_image_label

__all__ = [
    "FMT",
    "FUNCTION_ROLE",
    "TOOL_IMAGE_NOTE",
    "VENDOR_FIELDS",
    "from_openai",
    "from_openai_messages",
    "moved_images",
    "to_openai",
    "to_openai_messages",
    "tool_image_label",
]
