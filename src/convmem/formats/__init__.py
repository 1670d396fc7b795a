"""Provider formats: OpenAI Chat Completions, Anthropic Messages and OpenAI Responses.

Each format module converts both ways without loss (see its docstring for the exact
round-trip guarantees and for what raises). This package adds format detection
and one entry point per direction::

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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, get_args

from ..errors import ConfigurationError, InvalidMessageError
from ..messages import PINNED_ROLES, Message
from ._replies import parse_reply
from ._sdk import is_sdk_object, sdk_dict
from ._sent import sent_extras
from .anthropic._parse import from_anthropic as _anthropic_messages
from .anthropic._render import AnthropicRequest, from_anthropic, to_anthropic
from .openai import from_openai, from_openai_messages, to_openai_messages
from .responses import from_responses, to_responses

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
    "sent_extras",
]

Format: TypeAlias = Literal["openai", "anthropic", "responses"]
FORMATS: tuple[Format, ...] = get_args(Format)

_ALL: frozenset[str] = frozenset(FORMATS)
_OPENAI = frozenset({"openai"})
_NOT_ANTHROPIC = frozenset({"openai", "responses"})
_OPENAI_KEYS = ("tool_calls", "tool_call_id", "name", "refusal", "audio", "function_call")
_PART_FORMATS: dict[str, frozenset[str]] = {
    "text": frozenset({"openai", "anthropic"}),
    "image_url": _OPENAI,
    "file": _OPENAI,
    "input_audio": _NOT_ANTHROPIC,
    "refusal": _NOT_ANTHROPIC,
    **dict.fromkeys(("input_text", "output_text", "input_image", "input_file"), frozenset({"responses"})),
    **dict.fromkeys(
        ("image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"), frozenset({"anthropic"})
    ),
}


def _candidates(item: Mapping[str, Any], *, pinned_any: bool = False) -> frozenset[str]:
    """The formats ``item`` can belong to, judged by the markers it carries."""
    if not isinstance(item, Mapping):
        raise InvalidMessageError(
            f"must be a dict, a Message or an SDK message object (with model_dump), got {type(item).__name__}",
            field="message",
        )
    kind = item.get("type")
    if kind is not None and kind != "message":
        return frozenset({"responses"})
    found = _ALL if kind is None else frozenset({"anthropic", "responses"})
    role = item.get("role")
    if role == "tool":
        found &= _OPENAI
    elif role in PINNED_ROLES and not pinned_any:
        found &= _NOT_ANTHROPIC
    if any(key in item for key in _OPENAI_KEYS):
        found &= _OPENAI
    content = item.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                found &= _PART_FORMATS.get(part.get("type"), _ALL)  # type: ignore[arg-type]
    if kind == "message" and "responses" in found:
        # Anthropic only writes "type": "message" on response objects, whose blocks give them away.
        return frozenset({"responses"})
    return found


def _first(found: Iterable[str]) -> Format:
    return next((fmt for fmt in FORMATS if fmt in found), "openai")


def detect_format(item: Mapping[str, Any]) -> Format | None:
    """Return the only format ``item`` can belong to, or None when several (or none) fit.

    Raises:
        InvalidMessageError: ``item`` is not a mapping.
    """
    found = _candidates(item)
    return _first(found) if len(found) == 1 else None


def as_message(value: Message | Mapping[str, Any], *, index: int | None = None) -> Message:
    """A Message as given, or one built from a provider dict (OpenAI, Anthropic or Responses, detected).

    Raises:
        InvalidMessageError: naming the field, and ``index`` when given.
    """
    if isinstance(value, Message):
        return value
    try:
        return parse_message(sdk_dict(value) if is_sdk_object(value) else value)
    except InvalidMessageError as exc:
        raise exc.at(index) if index is not None else exc from None


def parse_message(d: Mapping[str, Any]) -> Message:
    """Parse one provider dict that stands for exactly one Message (format detected).

    Raises:
        InvalidMessageError: the dict is invalid, or it expands to several messages
            (e.g. an Anthropic user message with two ``tool_result`` blocks).
    """
    fmt = _first(_candidates(d))
    if fmt == "openai" and _anthropic_system(d):
        return _anthropic_messages([], d["content"])[0]
    if fmt == "openai":
        return from_openai(d)
    messages = from_anthropic([d]) if fmt == "anthropic" else from_responses([d])
    if len(messages) != 1:
        raise InvalidMessageError(
            f"this {fmt} dict expands to {len(messages)} messages; use parse_messages / add_many",
            field="content",
        )
    return messages[0]


def _anthropic_system(d: Mapping[str, Any]) -> bool:
    """A system prompt given as Anthropic text blocks (``cache_control`` says so): kept as Anthropic's."""
    content = d.get("content")
    return (
        d.get("role") in PINNED_ROLES
        and isinstance(content, list)
        and all(isinstance(b, Mapping) and b.get("type") == "text" for b in content)
        and any("cache_control" in b for b in content)
    )


_RESPONSES_ONLY = frozenset({"responses"})


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
        d = sdk_dict(item) if is_sdk_object(item) else item
        try:
            found = _candidates(d)
        except InvalidMessageError as exc:
            raise exc.at(i) from None
        if found == _RESPONSES_ONLY:
            group = [d]
            while i + len(group) < n and _responses_item(items[i + len(group)]):
                nxt = items[i + len(group)]
                group.append(sdk_dict(nxt) if is_sdk_object(nxt) else nxt)
            try:
                out += from_responses(group)
            except InvalidMessageError as exc:
                raise exc.at(i + (exc.index or 0)) from None
            i += len(group)
            continue
        if _first(found) == "anthropic" and d.get("role") == "user":
            try:
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
    d: Any = sdk_dict(item) if is_sdk_object(item) else item
    try:
        return _candidates(d) == _RESPONSES_ONLY
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
    items = [sdk_dict(item) if is_sdk_object(item) else item for item in items]
    if format is None:
        found = _ALL
        for i, item in enumerate(items):
            try:
                narrowed = found & _candidates(item, pinned_any=True)
            except InvalidMessageError as exc:
                raise exc.at(i) from None
            if not narrowed:
                raise InvalidMessageError(
                    f"items mix formats: this one is not {' or '.join(sorted(found))}; pass format= to choose",
                    index=i,
                )
            found = narrowed
        format = _first(found)
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
        if item is not None and not (isinstance(item, Mapping) and item.get("role") in PINNED_ROLES):
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
