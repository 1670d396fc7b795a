"""The provider SDKs' own request types, made strict: no key they do not declare is accepted.

The SDKs describe requests as TypedDicts. Validated by pydantic they ignore unknown keys, and
some unions also admit the SDK's *response* models (pydantic models that allow extra fields), so
a stray ``annotations`` or ``id`` would pass. :func:`check` walks a value against the request
type itself, with every TypedDict closed (``extra="forbid"``): each key must be declared, each
required key present, every value of its declared type, and a union matches only through one of
its request (TypedDict or plain) alternatives, never a response model.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from typing_extensions import NotRequired, ReadOnly, Required, is_typeddict

__all__ = ["StrictError", "anthropic_messages", "anthropic_system", "chat_messages", "check", "responses_items"]

_WRAPPERS = {Required, NotRequired, ReadOnly, typing.Required, typing.NotRequired}
_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence, list, typing.Iterable}


class StrictError(AssertionError):
    pass


@functools.cache
def _hints(tp: Any) -> dict[str, Any]:
    return get_type_hints(tp, include_extras=True)


@functools.cache
def _required(tp: Any) -> frozenset[str]:
    """Required keys, read from the hints: the SDKs' string annotations hide ``Required`` from the class."""
    out = set()
    for key, hint in _hints(tp).items():
        origin = get_origin(hint)
        if origin in (Required, typing.Required) or (tp.__total__ and origin not in (NotRequired, typing.NotRequired)):
            out.add(key)
    return frozenset(out)


def _errors(tp: Any, value: Any, path: str) -> list[str]:
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return []
    if origin in _WRAPPERS or origin is typing.Annotated:
        return _errors(get_args(tp)[0], value, path)
    if origin is Union or origin is types.UnionType:
        best: list[str] | None = None
        for alternative in get_args(tp):
            errors = _errors(alternative, value, path)
            if not errors:
                return []
            if best is None or len(errors) < len(best):
                best = errors
        return best or [f"{path}: no alternative"]
    if origin is Literal:
        return [] if value in get_args(tp) else [f"{path}: {value!r} not in {get_args(tp)}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if tp in (str, int, float, bool):
        ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
        ok = ok or (tp is float and isinstance(value, int) and not isinstance(value, bool))
        return [] if ok else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    if is_typeddict(tp):
        if not isinstance(value, Mapping):
            return [f"{path}: expected object {tp.__name__}"]
        hints = _hints(tp)
        errors = [f"{path}.{key}: not declared by {tp.__name__}" for key in value if key not in hints]
        errors += [f"{path}.{key}: required by {tp.__name__}" for key in _required(tp) if key not in value]
        for key, item in value.items():
            if key in hints:
                errors += _errors(hints[key], item, f"{path}.{key}")
        return errors
    if origin in _SEQUENCES or getattr(origin, "__name__", "") == "SequenceNotStr" or tp is list:
        if not isinstance(value, (list, tuple)):
            return [f"{path}: expected a list"]
        (item_type,) = get_args(tp)[:1] or (Any,)
        return [e for i, item in enumerate(value) for e in _errors(item_type, item, f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping, dict) or tp is dict:
        if not isinstance(value, Mapping):
            return [f"{path}: expected a mapping"]
        args = get_args(tp)
        return [e for k, v in value.items() for e in _errors(args[1] if args else Any, v, f"{path}[{k!r}]")]
    return [f"{path}: {tp!r} is not a request type"]  # a response model, IO, ...


def check(tp: Any, value: Any, where: str = "") -> None:
    """Raise StrictError naming every stray, missing or mistyped field of ``value`` as a ``tp``."""
    errors = _errors(tp, value, where or "$")
    if errors:
        raise StrictError("; ".join(errors[:5]))


def chat_messages(messages: list[dict[str, Any]]) -> None:
    from openai.types.chat import ChatCompletionMessageParam

    for i, message in enumerate(messages):
        check(ChatCompletionMessageParam, message, f"messages[{i}]")


def responses_items(items: list[dict[str, Any]]) -> None:
    from openai.types.responses import ResponseInputItemParam

    for i, item in enumerate(items):
        check(ResponseInputItemParam, item, f"input[{i}]")


def anthropic_messages(messages: list[dict[str, Any]]) -> None:
    from anthropic.types import MessageParam

    for i, message in enumerate(messages):
        check(MessageParam, message, f"messages[{i}]")


def anthropic_system(system: Any) -> None:
    from anthropic.types import TextBlockParam

    if system is None or isinstance(system, str):
        return
    for i, block in enumerate(system):
        check(TextBlockParam, block, f"system[{i}]")
