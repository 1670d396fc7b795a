"""Provider formats: OpenAI Chat Completions, Anthropic Messages and OpenAI Responses.

Each format converts both ways without loss: ``openai``, ``responses`` and the ``anthropic``
package (see each docstring for the exact round-trip guarantees and for what raises), over the
``extra`` scheme of ``_common``, with tool-call ids mapped to a provider's pattern by ``_ids``.
Around them: ``_detect`` tells a dict's format, ``_parse`` parses dicts, batches and SDK objects
(``_sdk``) in the format detected, ``_render`` renders for a format, ``_replies`` reads a whole
reply, and ``_sent`` names what a request sends beyond the modelled fields, for the counters.
This package is their public surface::

    from convmem.formats import parse_messages, render

    messages = parse_messages(request["messages"])           # format detected
    request = render(messages, "anthropic")                   # AnthropicRequest
    items = render(messages, "responses")                     # list of input items

Detection looks at markers only one format has (``tool_calls`` -> openai,
``tool_use`` blocks -> anthropic, ``function_call`` items -> responses ...). A dict
such as ``{"role": "user", "content": "hi"}`` is valid in every format, so
:func:`detect_format` returns None for it, and such dicts are parsed as OpenAI
(preference order: :data:`FORMATS`). A string-content message parses to the same
Message in every format; a list content differs only in what ``extra`` records
(Responses notes the missing ``type``).
"""

from __future__ import annotations

from ._detect import FORMATS, Format, detect_format
from ._parse import as_message, parse_items, parse_message, parse_messages
from ._render import render
from ._replies import parse_reply
from ._sent import sent_estimate, sent_extras
from .anthropic import AnthropicRequest

__all__ = [
    "FORMATS",
    "AnthropicRequest",
    "Format",
    "as_message",
    "detect_format",
    "parse_items",
    "parse_message",
    "parse_messages",
    "parse_reply",
    "render",
    "sent_estimate",
    "sent_extras",
]
