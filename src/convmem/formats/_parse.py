"""Provider dicts (and SDK objects) -> Messages, in the format they are detected in.

What comes in: one dict that stands for one Message (:func:`parse_message`, :func:`as_message`),
what ``add_many`` takes as it comes from a provider (:func:`parse_items`: Messages, dicts and SDK
objects mixed), or a batch in one format (:func:`parse_messages`). What happens: each dict's format
is detected (:mod:`._detect`) unless given, and it is parsed by that format's module; a run of
Responses items is parsed together (parallel calls and reasoning join their assistant message),
an Anthropic user message with several ``tool_result`` blocks expands to one tool Message each,
and system dicts in an Anthropic batch become system Messages in place. What goes out: Messages,
or an InvalidMessageError whose ``index`` is the offending item's position.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigurationError, InvalidMessageError
from ..messages import PINNED_ROLES, Message
from ._detect import ALL, FORMATS, RESPONSES_ONLY, Format, candidates, first
from ._sdk import plain
from .anthropic import from_anthropic
from .openai import from_openai, from_openai_messages
from .responses import from_responses

__all__ = ["as_message", "parse_items", "parse_message", "parse_messages"]


def as_message(value: Message | Mapping[str, Any], *, index: int | None = None) -> Message:
    """A Message as given, or one built from a provider dict (OpenAI, Anthropic or Responses, detected).

    Raises:
        InvalidMessageError: naming the field, and ``index`` when given.
    """
    if isinstance(value, Message):
        return value
    try:
        return parse_message(plain(value))
    except InvalidMessageError as exc:
        raise exc.at(index) if index is not None else exc from None


def parse_message(d: Mapping[str, Any]) -> Message:
    """Parse one provider dict that stands for exactly one Message (format detected).

    Raises:
        InvalidMessageError: the dict is invalid, or it expands to several messages
            (e.g. an Anthropic user message with two ``tool_result`` blocks).
    """
    fmt = first(candidates(d))
    if fmt == "openai" and _anthropic_system(d):
        return from_anthropic([], d["content"])[0]
    if fmt == "openai":
        return from_openai(d)
    messages = from_anthropic([d]) if fmt == "anthropic" else from_responses([d])
    if len(messages) != 1:
        raise InvalidMessageError(
            f"this {fmt} dict expands to {len(messages)} messages; use parse_messages / add_many",
            field="content",
        )
    return messages[0]


def _pinned(role: object) -> bool:
    return isinstance(role, str) and role in PINNED_ROLES


def _anthropic_system(d: Mapping[str, Any]) -> bool:
    """A system prompt given as Anthropic text blocks (``cache_control`` says so): kept as Anthropic's."""
    content = d.get("content")
    return (
        isinstance(d.get("role"), str)  # a list or dict role does not hash; the parser names it
        and d.get("role") in PINNED_ROLES
        and isinstance(content, list)
        and all(isinstance(b, Mapping) and b.get("type") == "text" for b in content)
        and any("cache_control" in b for b in content)
    )


def parse_items(items: Sequence[Message | Mapping[str, Any] | Any]) -> list[Message]:
    """What ``add_many`` takes, as it comes from a provider, parsed into Messages.

    Messages stay as given; each dict (or SDK object) is parsed in its detected format, except that
    a run of Responses items (``function_call``, ``reasoning``, ``function_call_output``, output
    messages) is parsed together, so parallel calls and reasoning items join their assistant
    message, and an Anthropic user message with several ``tool_result`` blocks expands to one tool
    Message each (and a user Message for its other blocks).

    Raises:
        InvalidMessageError: ``index`` is the position of the offending item.
    """
    out: list[Message] = []
    i, n = 0, len(items)
    while i < n:
        item = items[i]
        if isinstance(item, Message):
            out.append(item)
            i += 1
            continue
        d = plain(item)
        try:
            found = candidates(d)
        except InvalidMessageError as exc:
            raise exc.at(i) from None
        if found == RESPONSES_ONLY:
            group = [d]
            while i + len(group) < n and _responses_item(items[i + len(group)]):
                nxt = items[i + len(group)]
                group.append(plain(nxt))
            try:
                out += from_responses(group)
            except InvalidMessageError as exc:
                raise exc.at(i + (exc.index or 0)) from None
            i += len(group)
            continue
        if first(found) == "anthropic" and d.get("role") in ("user", "assistant"):
            try:  # several tool results expand to a Message each; a compaction stands alone
                out += from_anthropic([d])
            except InvalidMessageError as exc:
                raise exc.at(i) from None
        else:
            out.append(as_message(d, index=i))
        i += 1
    return out


def _responses_item(item: object) -> bool:
    if isinstance(item, Message):
        return False
    d: Any = plain(item)
    try:
        return candidates(d) == RESPONSES_ONLY
    except InvalidMessageError:
        return False


def parse_messages(items: Iterable[Mapping[str, Any]], format: Format | None = None) -> list[Message]:
    """Parse a batch of provider dicts in one format (detected from the batch when None).

    Anthropic batches may also hold ``{"role": "system", ...}`` dicts, which become
    system Messages in place.

    Raises:
        InvalidMessageError: an item is invalid or the items mix formats; ``index``
            is the item's position.
        ConfigurationError: ``format`` is not one of :data:`FORMATS`.
    """
    items = [plain(item) for item in items]
    if format is None:
        found = ALL
        for i, item in enumerate(items):
            try:
                narrowed = found & candidates(item, pinned_any=True)
            except InvalidMessageError as exc:
                raise exc.at(i) from None
            if not narrowed:
                raise InvalidMessageError(
                    f"items mix formats: this one is not {' or '.join(sorted(found))}; pass format= to choose",
                    index=i,
                )
            found = narrowed
        format = first(found)
    if format == "openai":
        return from_openai_messages(items)
    if format == "responses":
        return from_responses(items)
    if format == "anthropic":
        return _anthropic_batch(items)
    raise ConfigurationError(f"unknown format {format!r}; expected one of {FORMATS}")


def _anthropic_batch(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    out: list[Message] = []
    start = 0
    for i, item in enumerate([*items, None]):
        if item is not None and not (isinstance(item, Mapping) and _pinned(item.get("role"))):
            continue
        try:
            out += from_anthropic(items[start:i])
        except InvalidMessageError as exc:
            raise exc.at(start + (exc.index or 0)) from None
        if item is not None:
            try:
                out.append(from_openai(item))
            except InvalidMessageError as exc:
                raise exc.at(i) from None
        start = i + 1
    return out
