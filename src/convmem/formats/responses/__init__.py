"""OpenAI Responses API input items <-> :class:`~convmem.messages.Message` lists.

The package by concept: ``_rules`` states what the API takes (roles, part types, the items of a run,
what a reply's objects carry that a request does not); ``_parse`` reads items into Messages;
``_render`` builds items from them. Call ids are spelled as the API takes them by
:mod:`convmem.formats._ids`. Items map to Messages like this:

* a ``message`` item (or an "easy" ``{"role": ..., "content": ...}`` without
  ``type``) is a Message. A string content is rendered in the easy form (no
  ``type``), so a plain text message is the same dict in all three formats; a list
  content is rendered with ``"type": "message"``. Text parts are ``output_text`` in
  assistant messages and ``input_text`` elsewhere; any other text type
  (``refusal`` included) is kept in the part's ``extra["responses"]["type"]``.
* consecutive calls, together with a directly preceding assistant ``message`` item,
  are ONE assistant Message with several tool calls, so parallel calls stay one unit:
  a ``function_call`` is a ToolCall; a ``custom_tool_call`` is one whose arguments are
  its free-text ``input`` as a JSON string (``extra["responses"]["type"]`` says so);
  a call the application answers that is neither (``computer_call``, ``shell_call``,
  ``local_shell_call``, ``apply_patch_call``, ``mcp_approval_request``) is a ToolCall
  named by its type (or its ``name``) whose arguments are its other fields, the item
  itself kept verbatim in ``extra["responses"]["$item"]``. The items the provider runs
  or the request directs (``reasoning``, ``web_search_call``, ``file_search_call``,
  ``mcp_call``, ``mcp_list_tools``, ``image_generation_call``, ``code_interpreter_call``,
  ``tool_search_call``, ``additional_tools``, ``item_reference``, ``program`` ...:
  :data:`convmem.formats._native.RESPONSES_KEPT`) inside or in front of such a run
  belong to it too: they are kept verbatim, with the order of the run, in
  ``extra["responses"]["$layout"]`` (``"m"`` = the message item, ``"t"`` = the next
  call, an object = a kept item), stored only when the order is not message-then-calls.
* a ``compaction`` item is an assistant Message of its own holding only it (in its
  ``$layout``): the summary a memory adopts (see :mod:`convmem.formats._native`).
* an output is a tool Message answering its call: ``function_call_output`` and
  ``custom_tool_call_output`` by their output (text or parts); the others by their
  text, the item kept verbatim in ``$item``.
* ``input_image`` -> ImagePart (``image_url`` split like a data URL when it is one),
  or FilePart with ``extra["responses"]["type"] == "input_image"`` when the image is
  given by ``file_id``; ``input_file`` -> FilePart; ``input_audio`` -> AudioPart.

Unknown keys (``id``, ``status``, ``annotations``, ``logprobs`` ...) are kept in
``extra["responses"]`` as described in ``convmem.formats._common``. Unknown item or
part types, roles other than user/system/developer/assistant, a name (unless
``drop_names=True``) and local image paths raise InvalidMessageError.

Reasoning and ids (``store: false``). A reasoning item is sent exactly as received,
always in the same request as the items that followed it (one Message, evicted and
cut whole), and those items keep the ids they came with: a reasoning item with
``encrypted_content`` (ask for ``include=["reasoning.encrypted_content"]`` when
``store`` is false) is self-contained; one without it is a reference the server
resolves only while it keeps the response (``store: true``).

Round trips: ``to_responses(from_responses(items)) == items`` for valid items, and
``from_responses(to_responses([m])) == [m]`` for every expressible Message. For
lists, an assistant message directly followed by a content-less assistant message
with tool calls (or a reasoning-only one) comes back merged with it.

Example::

    items = to_responses([Message(role="user", content="hi")])
    client.responses.create(model=..., input=items)
"""

from __future__ import annotations

from ._parse import compaction_message, from_responses
from ._render import to_responses

__all__ = ["compaction_message", "from_responses", "to_responses"]
