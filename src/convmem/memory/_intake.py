"""What ``add`` and ``context`` take, turned into messages ready to count: ids, fast parsing, the counter.

What comes in: what a caller passes (a ``Message``, an OpenAI, Anthropic or Responses
dict: :data:`MessageLike`; for a context also plain text: :data:`InputLike`) and a
model name. What happens: a plain ``{"role", "content"}`` dict skips the general
parser; anything else goes through :func:`convmem.formats.parse_items`; messages
without an id get one (a per-process random prefix and a counter); the model's
registry entry picks the counter. What goes out: messages the core validates and
counts once. Kept apart from the core because it is the one place that deals with
the outside world's shapes rather than convmem's own state.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidMessageError
from ..formats import parse_items
from ..formats._carry import changes
from ..formats.openai import moved_images, to_openai
from ..limits import check_text
from ..messages import Message
from ..tokens import ModelInfo, TokenCounter, counter_for, lookup_model

__all__ = ["InputLike", "MessageLike", "new_id", "parse_all", "rendered_alone", "resolve_counter"]

MessageLike = Message | Mapping[str, Any]
#: What ``context(input)`` takes: a message, its text (a user message), several messages, or nothing.
InputLike = MessageLike | str | Sequence[MessageLike] | None

# Ids are a per-process random prefix plus a counter: unique across processes and cheap on the hot path.
_ID_PREFIX = os.urandom(8).hex()
_ID_COUNTER = itertools.count()


def new_id() -> str:
    return f"{_ID_PREFIX}{next(_ID_COUNTER):08x}"


def _reseed_ids() -> None:
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX, _ID_COUNTER = os.urandom(8).hex(), itertools.count()


if hasattr(os, "register_at_fork"):  # a forked child must not repeat its parent's ids
    os.register_at_fork(after_in_child=_reseed_ids)


_PLAIN_KEYS = {"role", "content"}
_PLAIN_ROLES = frozenset({"user", "assistant", "system", "developer"})


def parse_all(items: Iterable[MessageLike], now: datetime) -> list[Message]:
    """Parse a batch as providers send it: plain dicts on the fast path, anything else through
    ``formats.parse_items`` (parallel Responses calls and reasoning items join their message; an
    Anthropic user message with several tool results expands)."""
    batch = list(items)
    fast = [_fast(item, index, now) for index, item in enumerate(batch)]
    if all(m is not None for m in fast):
        return fast  # type: ignore[return-value]
    return parse_items(batch)


def _fast(item: MessageLike, index: int, now: datetime) -> Message | None:
    """A plain ``{"role", "content": str}`` dict, the most common input, without the general parser."""
    if type(item) is dict and item.keys() == _PLAIN_KEYS:
        role, content = item["role"], item["content"]
        if role in _PLAIN_ROLES and type(content) is str:
            if not content.isascii():  # lone surrogates are the only text the limits refuse
                try:
                    check_text(content, "content")
                except InvalidMessageError as exc:
                    raise exc.at(index) from None
            return Message.trusted(role, content, new_id(), now)
    return None


def rendered_alone(message: Message, vendor: str | None = None) -> dict[str, Any] | None:
    """The message's own Chat dict, cached for assembly; None when it does not render as one alone: a tool
    result's images (two messages), or what Chat cannot carry as it is (another format's own items)."""
    if moved_images(message) or changes(message, "openai"):
        return None
    try:
        return to_openai(message, vendor=vendor)
    except InvalidMessageError:
        return None  # not for Chat: a Chat context renders it in full (and says why it cannot)


def resolve_counter(model: str | None, counter: TokenCounter | str | None) -> tuple[ModelInfo | None, TokenCounter]:
    """The model's registry entry (if known) and the counter to use.

    The default is the model's exact counter, else the usage-calibrated one (labelled ``exact=False``);
    ``counter`` is a TokenCounter, "approximate" or "calibrated" (checked by :class:`~convmem.memory.options.Options`).
    """
    if model is None:
        # Without a model the budget is explicit; o200k_base is exact for every current OpenAI model.
        if counter is None or isinstance(counter, str):
            return None, counter_for("gpt-4o", counter="approximate" if counter == "approximate" else None)
        return None, counter
    try:
        info: ModelInfo | None = lookup_model(model)
    except KeyError:
        if counter is None:
            raise
        info = None
    if counter is None or isinstance(counter, str):
        return info, counter_for(model, counter=counter)  # type: ignore[arg-type]
    return info, counter
