"""Anthropic Messages API requests <-> :class:`~convmem.messages.Message` lists.

The package by concept: ``_rules`` states the API's rules both directions keep (roles,
alternation, the continuation placeholder, what each block takes); ``_parse`` reads a request
into Messages; ``_render`` builds one (``system=`` and ``messages=``); ``_marks`` places
``cache_control`` breakpoints. Tool-call ids are escaped to the API's pattern by
:mod:`convmem.formats._ids`, beside the formats rather than in here: mapping ids reversibly to a
provider's pattern is not Anthropic's concern alone.

Anthropic keeps the system prompt outside the message list, has only user and
assistant messages, and requires them to alternate starting with a user. So:

* system and developer messages go to ``system``: one string-content message stays
  a string, anything else becomes a list of text blocks (in message order).
* tool calls become ``tool_use`` blocks; tool results become ``tool_result`` blocks
  in a user message, first in that message, in the order given.
* consecutive messages of the same Anthropic role are merged into one (content
  concatenated; a string content becomes a text block).
* a list that would start with an assistant message gets a user message whose
  content is :data:`CONTINUATION_PLACEHOLDER` in front; parsing drops it again.

Round trips. ``to_anthropic(from_anthropic(msgs, system))`` gives back the same
request for every request that already alternates. ``from_anthropic(to_anthropic(ms))``
preserves every piece of content in order, and is the identity when no two messages
merge and each content is already in its Anthropic form; it is *not* the identity for
message boundaries (merged messages come back as one, a user text after tool results
comes back as its own user message), for ``developer`` (comes back as ``system``),
for system messages placed after others (hoisted), for a string content that was
merged (comes back as a text part) and for tool-call ``arguments`` text (re-encoded
compactly from the ``input`` object; the decoded JSON is equal).

``extra["anthropic"]`` follows ``convmem.formats._common``: on a tool Message it holds
the unknown keys of its ``tool_result`` block (``is_error``, ``cache_control``); on
other Messages the unknown keys of the message dict. ``thinking`` and
``redacted_thinking`` blocks of an assistant message are kept verbatim, with the
order of all blocks, in ``extra["anthropic"]["$layout"]`` (``"p"`` = next part,
``"t"`` = next tool call, an object = a kept block), stored only when the order is
not parts-then-calls. Other unknown block types raise InvalidMessageError, as do
audio parts, names (unless ``drop_names=True``), local image paths, tool-call
arguments that are not a JSON object, and text placed before tool results.
Image ``detail``, ``width`` and ``height`` are hints for OpenAI's counter and are
not rendered.

Example::

    from convmem.formats.anthropic import to_anthropic

    request = to_anthropic([Message(role="system", content="Be brief."),
                            Message(role="user", content="hi")])
    client.messages.create(model=..., max_tokens=..., **request.kwargs())
"""

from __future__ import annotations

from ._parse import from_anthropic
from ._render import AnthropicRequest, to_anthropic
from ._rules import CONTINUATION_PLACEHOLDER

__all__ = ["CONTINUATION_PLACEHOLDER", "AnthropicRequest", "from_anthropic", "to_anthropic"]
