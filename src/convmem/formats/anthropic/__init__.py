"""The Anthropic Messages format, both ways: ``_parse`` reads blocks into messages, ``_render`` builds the
request (``system=`` and ``messages=``) by the API's rules, ``_marks`` places ``cache_control`` breakpoints.

Example::

    from convmem.formats.anthropic import to_anthropic

    request = to_anthropic(messages)   # {"system": [...], "messages": [...]}
"""

from __future__ import annotations

from ._parse import CONTINUATION_PLACEHOLDER, from_anthropic
from ._render import AnthropicRequest, to_anthropic

__all__ = ["CONTINUATION_PLACEHOLDER", "AnthropicRequest", "from_anthropic", "to_anthropic"]
