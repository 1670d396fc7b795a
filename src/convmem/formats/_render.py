"""Messages -> any of the three provider formats: the one entry point of the renderers.

What comes in: Messages and a format. What happens: the format's own renderer renders them
(:func:`~convmem.formats.openai.to_openai_messages`,
:func:`~convmem.formats.anthropic.to_anthropic`, :func:`~convmem.formats.responses.to_responses`).
What goes out: a list of dicts, or an :class:`~convmem.formats.anthropic.AnthropicRequest`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError
from ..messages import Message
from ._detect import FORMATS, Format
from .anthropic import AnthropicRequest, to_anthropic
from .openai import to_openai_messages
from .responses import to_responses

__all__ = ["render"]


def render(
    messages: Sequence[Message], format: Format, *, drop_names: bool = False
) -> list[dict[str, Any]] | AnthropicRequest:
    """Render Messages for ``format``: a list of dicts, or an AnthropicRequest.

    Args:
        messages: the conversation.
        format: one of :data:`FORMATS`.
        drop_names: leave ``name`` out for formats without a name field instead of raising.

    Raises:
        InvalidMessageError: a message cannot be expressed in ``format``.
        ConfigurationError: ``format`` is not one of :data:`FORMATS`.
    """
    if format == "openai":
        return to_openai_messages(messages)
    if format == "anthropic":
        return to_anthropic(messages, drop_names=drop_names)
    if format == "responses":
        return to_responses(messages, drop_names=drop_names)
    raise ConfigurationError(f"unknown format {format!r}; expected one of {FORMATS}")
