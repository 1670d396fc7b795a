"""Provider SDK message objects (pydantic models) as plain dicts convmem can parse.

What comes in: any object with a ``model_dump`` method -- ``openai``'s
``ChatCompletionMessage``, ``anthropic``'s ``Message``, a Responses output item.
What happens: ``model_dump(mode="json", by_alias=True, exclude_none=True)``
(the API's own field names, as the SDKs send them), then the fields that exist only
on responses are dropped, because sending them back is refused by the providers:
a chat message's ``annotations``, an audio reply's data (only its ``id`` may be
sent back), an Anthropic response's ``id``, ``model``, ``stop_reason`` and usage.
What goes out: a plain dict in the provider's own request shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidMessageError

__all__ = ["is_sdk_object", "plain", "sdk_dict"]

_ANTHROPIC_RESPONSE_ONLY = ("id", "model", "stop_reason", "stop_sequence", "usage", "container", "type")


def is_sdk_object(value: object) -> bool:
    """True for a pydantic model (an SDK's message type), never for a plain mapping."""
    return not isinstance(value, Mapping) and callable(getattr(value, "model_dump", None))


def sdk_dict(value: Any) -> dict[str, Any]:
    """``value.model_dump(exclude_none=True)`` in request shape.

    Raises:
        InvalidMessageError: ``model_dump`` failed or did not return an object.
    """
    try:
        dumped = value.model_dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
    except Exception as exc:
        raise InvalidMessageError(
            f"{type(value).__name__}.model_dump(exclude_none=True) failed: {type(exc).__name__}", field="message"
        ) from None
    if not isinstance(dumped, dict):
        raise InvalidMessageError(
            f"{type(value).__name__}.model_dump() returned {type(dumped).__name__}, not an object", field="message"
        )
    if dumped.get("type") == "message" and "stop_reason" in dumped and "model" in dumped:  # an Anthropic response
        return {k: v for k, v in dumped.items() if k not in _ANTHROPIC_RESPONSE_ONLY}
    if dumped.get("type") is None:  # a Chat Completions message
        dumped.pop("annotations", None)
        audio = dumped.get("audio")
        if isinstance(audio, Mapping) and "id" in audio:
            dumped["audio"] = {"id": audio["id"]}
    return dumped


def plain(item: Any) -> Any:
    """``item`` as a plain dict: an SDK object dumped, and a dict whose content list holds SDK objects (an
    Anthropic ``{"role": "assistant", "content": response.content}``) with them dumped; anything else as it is."""
    if is_sdk_object(item):
        return sdk_dict(item)
    content = item.get("content") if isinstance(item, Mapping) else None
    if isinstance(content, list) and any(is_sdk_object(block) for block in content):
        return {**item, "content": [_block(block) for block in content]}
    return item


def _block(block: Any) -> Any:
    if not is_sdk_object(block):
        return block
    try:
        return block.model_dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
    except Exception as exc:
        raise InvalidMessageError(f"model_dump() failed: {type(exc).__name__}", field="content") from None
