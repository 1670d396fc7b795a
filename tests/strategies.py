"""Hypothesis strategies for convmem messages, shared by every test package.

``messages()`` draws one valid Message; every option narrows what it may contain,
so a test can ask for exactly the messages a format can express::

    @given(messages(roles=("user", "assistant"), kinds=("text", "image")))
    def test_something(m): ...

``conversations()`` draws a valid conversation: optional system/developer messages
first, then user turns, and assistant turns that either answer in text or call 1-3
tools followed by exactly their results (in call order), with unique call ids.
"""

from __future__ import annotations

import functools
import json
import string
from collections.abc import Callable, Collection
from datetime import datetime, timezone
from typing import Any

from hypothesis import strategies as st

from convmem.messages import ROLES, AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall

__all__ = [
    "KINDS",
    "audio_parts",
    "conversations",
    "file_parts",
    "image_parts",
    "json_objects",
    "json_values",
    "messages",
    "parts",
    "text_parts",
    "texts",
    "tool_calls",
    "with_unknown_keys",
    "without_unknown_keys",
]

KINDS = ("text", "image", "audio", "file")
_B64 = string.ascii_letters + string.digits + "+/"

#: Short text, including non-ASCII and whitespace, sometimes empty.
texts = st.text(st.characters(codec="utf-8"), max_size=24)
_names = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)
_ids = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=16)
_base64 = st.text(_B64, min_size=4, max_size=24).map(lambda s: s + "=" * (-len(s) % 4))
_urls = st.builds("https://example.com/{}.{}".format, _names, st.sampled_from(["png", "jpg", "pdf", "x"]))
_media_types = st.sampled_from(["image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"])

_scalars = st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | texts
#: Any JSON value (no floats, so equality after a JSON round trip is exact).
json_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3), max_leaves=8
)
#: A JSON object with string keys.
json_objects = st.dictionaries(_names, json_values, max_size=4)


def text_parts() -> st.SearchStrategy[TextPart]:
    return st.builds(TextPart, texts)


def image_parts(
    *, sources: Collection[str] = ("url", "data", "path"), sizes: bool = True
) -> st.SearchStrategy[ImagePart]:
    """Images from one of ``sources``; ``sizes`` also draws width and height."""
    source = st.sampled_from(sorted(sources)).flatmap(
        lambda name: {"url": _urls, "data": _base64, "path": _names.map("/tmp/{}.png".format)}[name].map(
            lambda v: {name: v}
        )
    )
    size = st.integers(1, 4096) | st.none() if sizes else st.none()

    @st.composite
    def build(draw: st.DrawFn) -> ImagePart:
        kwargs: dict[str, Any] = draw(source)
        if "data" in kwargs:
            kwargs["media_type"] = draw(_media_types.filter(lambda t: t.startswith("image/")))
        detail: Any = draw(st.none() | st.sampled_from(["auto", "low", "high"]))
        return ImagePart(detail=detail, width=draw(size), height=draw(size), **kwargs)

    return build()


def audio_parts() -> st.SearchStrategy[AudioPart]:
    return st.builds(AudioPart, _base64, st.sampled_from(["wav", "mp3"]))


def file_parts(
    *, sources: Collection[str] = ("data", "file_id", "url"), single: bool = False, typed: bool = False
) -> st.SearchStrategy[FilePart]:
    """Files from a non-empty subset of ``sources`` (exactly one when ``single``).

    ``typed`` always gives base64 data a media type (Anthropic needs one).
    """

    @st.composite
    def build(draw: st.DrawFn) -> FilePart:
        names = sorted(sources)
        chosen = (
            [draw(st.sampled_from(names))]
            if single
            else draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        )
        kwargs: dict[str, Any] = {}
        if "data" in chosen:
            kwargs["data"] = draw(_base64)
            kwargs["media_type"] = draw(_media_types if typed else _media_types | st.none())
        if "file_id" in chosen:
            kwargs["file_id"] = "file-" + draw(_ids)
        if "url" in chosen:
            kwargs["url"] = draw(_urls)
        return FilePart(filename=draw(st.none() | _names.map(lambda n: n + ".pdf")), **kwargs)

    return build()


def parts(kinds: Collection[str] = KINDS, **options: Any) -> st.SearchStrategy[Part]:
    """One part of one of ``kinds``; ``options`` go to image_parts / file_parts."""
    return _parts(tuple(k for k in KINDS if k in kinds), tuple(sorted(options.items())))


@functools.cache
def _parts(kinds: tuple[str, ...], options: tuple[tuple[str, Any], ...]) -> st.SearchStrategy[Part]:
    # Cached: building strategies on every draw makes conversations() several times slower.
    opts = dict(options)
    image_opts = {k: v for k, v in opts.items() if k in ("sources", "sizes")}
    file_opts = {
        ("sources" if k == "file_sources" else k): v
        for k, v in opts.items()
        if k in ("file_sources", "single", "typed")
    }
    pool: dict[str, Callable[[], st.SearchStrategy[Any]]] = {
        "text": text_parts,
        "image": lambda: image_parts(**image_opts),
        "audio": audio_parts,
        "file": lambda: file_parts(**file_opts),
    }
    return st.one_of(*(pool[k]() for k in kinds))


def tool_calls(ids: st.SearchStrategy[str] = _ids) -> st.SearchStrategy[ToolCall]:
    """A function call whose arguments are a JSON object (as every provider accepts)."""
    return st.builds(ToolCall, ids, _names, _arguments)


_arguments = json_objects.map(lambda o: json.dumps(o, ensure_ascii=False))
_call_lists = st.lists(tool_calls(), min_size=1, max_size=3, unique_by=lambda c: c.id).map(tuple)
_metadata: st.SearchStrategy[dict[str, Any]] = st.just({}) | json_objects
_one_call = tool_calls()
_timestamps = st.datetimes(timezones=st.just(timezone.utc), min_value=datetime(2000, 1, 1))


def _allowed_kinds(role: str, kinds: Collection[str]) -> tuple[str, ...]:
    if role in ("system", "developer"):
        return ("text",)
    if role == "tool":
        return tuple(k for k in ("text", "image") if k in kinds)
    return tuple(k for k in KINDS if k in kinds)


@functools.cache
def _contents(
    role: str, kinds: tuple[str, ...], max_parts: int, string_content: bool, calls: bool, options: tuple[Any, ...]
) -> st.SearchStrategy[Any]:
    allowed = _allowed_kinds(role, kinds)
    options_: list[st.SearchStrategy[Any]] = []
    if string_content:
        options_.append(texts)
    if allowed:
        options_.append(st.lists(_parts(allowed, options), max_size=max_parts).map(tuple))
    if role == "assistant" and calls:
        options_.append(st.none())  # only with tool calls: no empty assistant messages
    return st.one_of(*options_)


@st.composite
def messages(
    draw: st.DrawFn,
    /,
    roles: Collection[str] = ROLES,
    *,
    kinds: Collection[str] = KINDS,
    max_parts: int = 3,
    string_content: bool = True,
    calls: bool = True,
    names: bool = True,
    metadata: bool = True,
    identity: bool = False,
    tool_call_id: str | None = None,
    **part_options: Any,
) -> Message:
    """Draw one valid Message.

    Args:
        roles: the roles to draw from.
        kinds: part kinds allowed (each role further limits them, as Message does).
        max_parts: the most parts a list content may hold.
        string_content: also draw plain string contents.
        calls: let assistant messages carry 1-3 tool calls (unique ids).
        names: sometimes set ``name``.
        metadata: sometimes set ``metadata``.
        identity: sometimes set ``id`` and ``created_at``.
        tool_call_id: the id a tool message answers (drawn when None).
        **part_options: ``sources``/``sizes`` for images, ``file_sources``/``single``/``typed`` for files.
    """
    role = draw(st.sampled_from(sorted(roles)))
    kinds_ = tuple(k for k in KINDS if k in kinds)
    options = tuple(sorted(part_options.items()))
    content = draw(_contents(role, kinds_, max_parts, string_content, calls, options))
    kwargs: dict[str, Any] = {}
    if role == "assistant" and calls and (content is None or draw(st.booleans())):
        kwargs["tool_calls"] = draw(_call_lists)
    if role == "tool":
        kwargs["tool_call_id"] = tool_call_id or draw(_ids)
    if names:
        kwargs["name"] = draw(st.none() | _names)
    if metadata:
        kwargs["metadata"] = draw(_metadata)
    if identity and draw(st.booleans()):
        kwargs["id"] = draw(_ids)
        kwargs["created_at"] = draw(_timestamps)
    return Message(role=role, content=content, **kwargs)  # type: ignore[arg-type]


@st.composite
def conversations(
    draw: st.DrawFn,
    /,
    *,
    min_turns: int = 1,
    max_turns: int = 6,
    system: bool = True,
    **message_options: Any,
) -> list[Message]:
    """Draw a valid conversation (see the module docstring).

    Args:
        min_turns: the fewest user/assistant turns.
        max_turns: the most user/assistant turns.
        system: sometimes start with system/developer messages.
        **message_options: passed to :func:`messages` (``kinds``, ``names`` ...).
    """
    out: list[Message] = []
    if system:
        out += draw(st.lists(messages(("system", "developer"), **message_options), max_size=2))
    counter = 0
    for _ in range(draw(st.integers(min_turns, max_turns))):
        out.append(draw(messages(("user",), **message_options)))
        while draw(st.booleans()):
            n = draw(st.integers(1, 3))
            ids = [f"call_{counter + k}" for k in range(n)]
            counter += n
            reply = draw(messages(("assistant",), calls=False, **message_options))
            content = None if draw(st.booleans()) else reply.content
            drawn = [draw(_one_call) for _ in ids]
            reply = reply.replace(
                content=content,
                tool_calls=tuple(ToolCall(i, c.name, c.arguments) for i, c in zip(ids, drawn, strict=True)),
            )
            out.append(reply)
            out += [draw(messages(("tool",), tool_call_id=i, **message_options)) for i in ids]
        if draw(st.booleans()):
            out.append(draw(messages(("assistant",), calls=False, **message_options)))
    return out


@st.composite
def with_unknown_keys(draw: st.DrawFn, /, value: Any, skip: Callable[[dict[str, Any]], bool] = lambda d: False) -> Any:
    """Copy the JSON ``value``, adding random ``x_*`` keys to its objects (except where ``skip``).

    Lossless converters must carry such keys through a round trip unchanged.
    """
    return _decorate(draw, value, skip)


_unknown_keys = st.dictionaries(_names.map("x_{}".format), _scalars | st.lists(_scalars, max_size=2), max_size=2)


def _decorate(draw: st.DrawFn, value: Any, skip: Callable[[dict[str, Any]], bool]) -> Any:
    if isinstance(value, list):
        return [_decorate(draw, v, skip) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _decorate(draw, v, skip) for k, v in value.items()}
    if not skip(value):
        out.update(draw(_unknown_keys))
    return out


def without_unknown_keys(value: Any) -> Any:
    """``value`` without the ``x_*`` keys :func:`with_unknown_keys` adds: what a request renders of it.

    Keys a provider's request schema does not take are kept in ``extra`` (export is lossless) but
    never sent.
    """
    if isinstance(value, list):
        return [without_unknown_keys(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: v if k == "input" else without_unknown_keys(v)  # a tool call's input is the caller's JSON
        for k, v in value.items()
        if not k.startswith("x_")
    }
