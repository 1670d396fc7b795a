"""The message model: immutable, validated on construction, format-neutral.

A :class:`Message` is what every layer of convmem works on. The provider
formats (``convmem.formats``) convert to and from it losslessly. Fields a
format has but the model does not describe are kept verbatim in ``extra``
(namespaced by format) so that a round trip gives back the exact input.

Example::

    from convmem import Message, ToolCall

    call = Message(role="assistant", tool_calls=(ToolCall("c1", "get_time", "{}"),))
    result = Message(role="tool", tool_call_id="c1", content="12:00")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, get_args

from .errors import InvalidMessageError
from .limits import as_utc, check_json, check_text, json_text_depth

__all__ = [
    "ROLES",
    "AudioPart",
    "Content",
    "FilePart",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "StoredMessage",
    "TextPart",
    "ToolCall",
    "content_text",
    "same_message",
]

Role: TypeAlias = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(get_args(Role))
PINNED_ROLES: frozenset[str] = frozenset({"system", "developer"})
ImageDetail: TypeAlias = Literal["auto", "low", "high", "original"]
_DETAILS = frozenset(get_args(ImageDetail))
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen_mapping(value: Mapping[str, Any] | None, field_name: str) -> Mapping[str, Any]:
    if not value:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise InvalidMessageError(f"must be a mapping, got {type(value).__name__}", field=field_name)
    for key in value:
        if not isinstance(key, str):
            raise InvalidMessageError(f"keys must be strings, got {key!r}", field=field_name)
    copy = dict(value)  # json.dumps rejects a MappingProxyType, e.g. another message's extra
    check_json(copy, field_name)  # iteratively: depth, lone surrogates, NaN, integers a store keeps exactly
    return MappingProxyType(copy)


def _check_str(value: object, field_name: str, *, optional: bool = True, nonempty: bool = False) -> None:
    if value is None:
        if not optional:
            raise InvalidMessageError("is required", field=field_name)
        return
    if not isinstance(value, str):
        raise InvalidMessageError(f"must be a string, got {type(value).__name__}", field=field_name)
    if nonempty and not value:
        raise InvalidMessageError("must not be empty", field=field_name)
    check_text(value, field_name)


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    type = "text"

    def __post_init__(self) -> None:
        _check_str(self.text, "text", optional=False)
        object.__setattr__(self, "extra", _frozen_mapping(self.extra, "extra"))


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image given by exactly one of ``url``, ``path`` or base64 ``data``.

    ``width`` and ``height`` (pixels), when known, let the token counter apply
    OpenAI's tile formula instead of an estimate.
    """

    url: str | None = None
    path: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: ImageDetail | None = None
    width: int | None = None
    height: int | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    type = "image"

    def __post_init__(self) -> None:
        sources = [name for name in ("url", "path", "data") if getattr(self, name) is not None]
        if len(sources) != 1:
            raise InvalidMessageError(
                f"an image needs exactly one of url, path or data (got {sources or 'none'})", field="image"
            )
        for name in ("url", "path", "data", "media_type"):
            _check_str(getattr(self, name), name, nonempty=name != "media_type")
        if self.detail is not None and self.detail not in _DETAILS:
            raise InvalidMessageError(f"must be one of {sorted(_DETAILS)}, got {self.detail!r}", field="detail")
        for name in ("width", "height"):
            size = getattr(self, name)
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
                raise InvalidMessageError(f"must be a positive integer, got {size!r}", field=name)
        object.__setattr__(self, "extra", _frozen_mapping(self.extra, "extra"))


@dataclass(frozen=True, slots=True)
class AudioPart:
    """Audio as base64 ``data`` in ``format`` (e.g. ``wav``, ``mp3``)."""

    data: str
    format: str
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    type = "audio"

    def __post_init__(self) -> None:
        _check_str(self.data, "data", optional=False, nonempty=True)
        _check_str(self.format, "format", optional=False, nonempty=True)
        object.__setattr__(self, "extra", _frozen_mapping(self.extra, "extra"))


@dataclass(frozen=True, slots=True)
class FilePart:
    """A file (e.g. a PDF) given by base64 ``data``, a provider ``file_id`` or a ``url``."""

    data: str | None = None
    file_id: str | None = None
    url: str | None = None
    filename: str | None = None
    media_type: str | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    type = "file"

    def __post_init__(self) -> None:
        if self.data is None and self.file_id is None and self.url is None:
            raise InvalidMessageError("a file needs one of data, file_id or url", field="file")
        for name in ("data", "file_id", "url", "filename", "media_type"):
            _check_str(getattr(self, name), name)
        object.__setattr__(self, "extra", _frozen_mapping(self.extra, "extra"))


Part: TypeAlias = TextPart | ImagePart | AudioPart | FilePart
_PART_TYPES = (TextPart, ImagePart, AudioPart, FilePart)
Content: TypeAlias = str | tuple[Part, ...] | None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the assistant; ``arguments`` is a JSON string."""

    id: str
    name: str
    arguments: str = "{}"
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        _check_str(self.id, "id", optional=False, nonempty=True)
        _check_str(self.name, "name", optional=False, nonempty=True)
        _check_str(self.arguments, "arguments", optional=False)
        json_text_depth(self.arguments, "arguments")  # before parsing: json.loads recurses
        try:
            json.loads(self.arguments, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise InvalidMessageError(f"is not valid JSON ({exc})", field="arguments") from None
        object.__setattr__(self, "extra", _frozen_mapping(self.extra, "extra"))


def _prefix(exc: InvalidMessageError, prefix: str) -> InvalidMessageError:
    inner = f".{exc.field}" if exc.field else ""
    return InvalidMessageError(exc.reason, field=f"{prefix}{inner}", index=exc.index)


@dataclass(frozen=True, slots=True)
class Message:
    """One immutable chat message.

    Attributes:
        role: system, developer, user, assistant or tool.
        content: a string, a tuple of parts, or None (an assistant message that only calls tools).
        tool_calls: calls requested by an assistant message.
        tool_call_id: for a tool message, the id of the call it answers.
        name: optional participant name (counts one extra token on OpenAI).
        metadata: JSON-serializable application data; never sent to the model.
        created_at: when the message was created; assigned on ``add`` if missing.
        id: a unique id; assigned on ``add`` if missing.
        extra: format-specific fields kept verbatim for lossless round trips.
    """

    role: Role
    content: Content = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    created_at: datetime | None = None
    id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        role = self.role
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidMessageError(f"unknown role {role!r}; expected one of {sorted(ROLES)}", field="role")
        self._check_content()
        self._check_tool_fields()
        _check_str(self.name, "name", nonempty=True)
        _check_str(self.id, "id", nonempty=True)
        if self.created_at is not None:
            if not isinstance(self.created_at, datetime):
                raise InvalidMessageError("must be a datetime", field="created_at")
            object.__setattr__(self, "created_at", as_utc(self.created_at))  # naive is UTC (convmem.limits)
        # An empty mapping is replaced too: keeping the caller's (mutable) dict would let
        # it change the "immutable" message later.
        if self.metadata is not _EMPTY:
            object.__setattr__(self, "metadata", _frozen_mapping(self.metadata, "metadata"))
        if self.extra is not _EMPTY:
            object.__setattr__(self, "extra", _frozen_mapping(self.extra, "extra"))

    def _check_content(self) -> None:
        content = self.content
        if content is None or isinstance(content, str):
            if content is None and self.role != "assistant":
                raise InvalidMessageError(f"is required for a {self.role} message", field="content")
            if content:
                check_text(content, "content")
            return
        raw: Any = content
        if isinstance(raw, list):  # lists are accepted at run time and frozen into tuples
            content = tuple(raw)
            object.__setattr__(self, "content", content)
        if not isinstance(content, tuple):
            raise InvalidMessageError(
                f"must be a string or a sequence of parts, got {type(content).__name__}", field="content"
            )
        for i, part in enumerate(content):
            if not isinstance(part, _PART_TYPES):
                raise InvalidMessageError(f"unknown part type {type(part).__name__}", field=f"content[{i}]")
            # A tool result may return images and files (Anthropic, Responses); system text only.
            text_only = self.role in ("system", "developer") or (
                self.role == "tool" and not isinstance(part, (ImagePart, FilePart))
            )
            if text_only and not isinstance(part, TextPart):
                raise InvalidMessageError(
                    f"a {self.role} message may not hold a {part.type} part", field=f"content[{i}]"
                )

    def _check_tool_fields(self) -> None:
        calls = self.tool_calls
        if calls:
            raw: Any = calls
            if isinstance(raw, list):  # lists are accepted at run time and frozen into tuples
                calls = tuple(raw)
                object.__setattr__(self, "tool_calls", calls)
            if self.role != "assistant":
                raise InvalidMessageError(
                    f"only assistant messages may call tools, not {self.role}", field="tool_calls"
                )
            seen: set[str] = set()
            for i, call in enumerate(calls):
                if not isinstance(call, ToolCall):
                    raise InvalidMessageError(
                        f"must be a ToolCall, got {type(call).__name__}", field=f"tool_calls[{i}]"
                    )
                if call.id in seen:
                    raise InvalidMessageError(f"duplicate tool call id {call.id!r}", field=f"tool_calls[{i}].id")
                seen.add(call.id)
        if self.role == "tool":
            if not self.tool_call_id:
                raise InvalidMessageError("a tool message must name the call it answers", field="tool_call_id")
            _check_str(self.tool_call_id, "tool_call_id", nonempty=True)
        elif self.tool_call_id is not None:
            raise InvalidMessageError(f"only tool messages carry a tool_call_id, not {self.role}", field="tool_call_id")

    @property
    def pinned(self) -> bool:
        """System and developer messages are pinned: always in context, never evicted."""
        return self.role in PINNED_ROLES

    @property
    def text(self) -> str:
        """The text of the message: its string content, or its text parts joined by newlines."""
        return content_text(self.content)

    def with_identity(self, id: str, created_at: datetime) -> Message:
        """Return a copy with ``id`` and ``created_at`` set (validation is not repeated)."""
        clone = object.__new__(Message)
        for name in Message.__slots__:
            object.__setattr__(clone, name, getattr(self, name))
        object.__setattr__(clone, "id", id)
        object.__setattr__(clone, "created_at", as_utc(created_at))
        return clone

    @classmethod
    def trusted(cls, role: Role, content: str, id: str, created_at: datetime) -> Message:
        """A plain text message built without re-validation; callers guarantee a valid role and str content."""
        message = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(message, "role", role)
        setattr_(message, "content", content)
        setattr_(message, "tool_calls", ())
        setattr_(message, "tool_call_id", None)
        setattr_(message, "name", None)
        setattr_(message, "metadata", _EMPTY)
        setattr_(message, "created_at", created_at if created_at.tzinfo is not None else as_utc(created_at))
        setattr_(message, "id", id)
        setattr_(message, "extra", _EMPTY)
        return message

    def replace(self, **changes: Any) -> Message:
        """Return a validated copy with ``changes`` applied."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored: its per-session ``seq`` and its token count (counted once, on add).

    Stores return it; long-term memory receives evicted units as lists of it.
    """

    seq: int
    message: Message
    tokens: int


def content_text(content: Content | Sequence[Part]) -> str:
    """Join the text of ``content``; non-text parts contribute nothing."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if isinstance(part, TextPart))


def same_message(a: Message, b: Message) -> bool:
    """The same message for a retry: every field equal except ``created_at`` (a retry may stamp it anew).

    The stores decide with it whether a batch is a retry; the memory, whether a batch its window holds
    already is that retry (both must agree, so it lives here, below both).
    """
    return a == b or replace(a, created_at=None) == replace(b, created_at=None)


def located(exc: InvalidMessageError, prefix: str) -> InvalidMessageError:
    """Prefix the field of ``exc`` with ``prefix`` (e.g. ``tool_calls[2]``)."""
    return _prefix(exc, prefix)
