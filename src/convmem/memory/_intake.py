"""What ``add`` and ``context`` take, turned into messages ready to count: ids, fast parsing, the counter.

What comes in: what a caller passes (a ``Message``, an OpenAI, Anthropic or Responses
dict: :data:`MessageLike`; for a context also plain text: :data:`InputLike`) and a
model name. What happens: a plain ``{"role", "content"}`` dict skips the general
parser; anything else goes through :func:`convmem.formats.parse_items`; a dict's own
``id`` key (in any of the three formats) becomes the message's id, its idempotency
key (:func:`keyed_by_id`); messages without an id get one (a per-process random prefix
and a counter); the model's
registry entry picks the counter. What goes out: messages the core validates and
counts once. Kept apart from the core because it is the one place that deals with
the outside world's shapes rather than convmem's own state.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from ..errors import InvalidMessageError
from ..formats import parse_items
from ..formats._carry import changes
from ..formats.openai import moved_images, to_openai
from ..limits import check_text
from ..messages import Message, Role
from ..tokens import ModelInfo, TokenCounter, counter_for, lookup_model

__all__ = ["InputLike", "MessageLike", "keyed_by_id", "new_id", "parse_all", "rendered_alone", "resolve_counter"]

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
    given = {id(item) for item in batch if isinstance(item, Message)}  # a Message keeps the id it has
    out = []
    for message in parse_items(batch):
        keyed = None if message.id is not None or id(message) in given else keyed_by_id(message)
        out.append(message if keyed is None else keyed.with_identity(keyed.id or "", message.created_at or now))
    return out


# The OpenAI Agents SDK's stand-in for an item id it has no id for (chat-completions models): it is on
# every such item, so it names none of them.
_PLACEHOLDER_IDS = frozenset({"__fake_id__"})
# In these formats a message has no id of its own: an ``id`` key is the caller's, moved out of ``extra``.
_CALLERS_KEY = ("openai", "anthropic")


def keyed_by_id(message: Message) -> Message | None:
    """The message with the ``id`` key of the dict it was parsed from as its id (its idempotency key),
    or None when that dict had none.

    The formats keep a dict's unmodelled keys in ``extra``. A Chat or Anthropic message has no id
    field, so its ``id`` key moves from ``extra`` to the message (a dict with an ``id`` is then
    stored as the ``Message`` with that id would be). A Responses item id is the API's own and stays
    in ``extra`` too, to go back to the API; a message made of several items (reasoning, a message,
    parallel calls) takes its message item's id, else the first item id it has.
    """
    for fmt, extra in (message.extra or {}).items():
        if not isinstance(extra, Mapping):
            continue
        key = extra.get("id")
        if key is None:
            layout = extra.get("$layout")
            items = layout if isinstance(layout, list) else ()
            key = next((item["id"] for item in items if isinstance(item, Mapping) and "id" in item), None)
        if not isinstance(key, str) or not key or key in _PLACEHOLDER_IDS:
            continue
        if fmt not in _CALLERS_KEY:
            return replace(message, id=key)
        rest = {k: v for k, v in extra.items() if k != "id"}
        others = {k: v for k, v in message.extra.items() if k != fmt}
        return replace(message, id=key, extra=others | ({fmt: rest} if rest else {}))
    return None


def _fast(item: MessageLike, index: int, now: datetime) -> Message | None:
    """A plain ``{"role", "content": str}`` dict, the most common input, without the general parser."""
    if type(item) is dict and item.keys() == _PLAIN_KEYS:
        role, content = item["role"], item["content"]
        if type(role) is str and role in _PLAIN_ROLES and type(content) is str:  # a list role does not hash
            if not content.isascii():  # lone surrogates are the only text the limits refuse
                try:
                    check_text(content, "content")
                except InvalidMessageError as exc:
                    raise exc.at(index) from None
            return Message.trusted(cast(Role, role), content, new_id(), now)
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
