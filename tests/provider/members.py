"""The members of the installed SDKs' content unions, and a minimal valid instance of each, built from their types.

Nothing here is written by hand per member: :func:`members` walks a union (``Union``, ``Annotated``,
``Required`` ...) down to its TypedDicts (request side) or pydantic models (reply side), and
:func:`minimal` builds the smallest instance the type admits: its required keys only, each literal
as its first value, each nested TypedDict or model built the same way, each list with one element.
A member a future SDK adds is found, and built, without a change here; the tests that use this
keep an explicit table of the members they handle, so a new one fails them until it is handled.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from typing_extensions import is_typeddict

from .strict import _hints, _required

__all__ = ["members", "minimal", "minimal_model", "name_of"]

_WRAPPERS = {typing.Required, typing.NotRequired, typing.Annotated}
_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence}
_DEPTH = 12


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) in _WRAPPERS or _typing_extensions_wrapper(tp):
        tp = get_args(tp)[0]
    return tp


def _typing_extensions_wrapper(tp: Any) -> bool:
    import typing_extensions

    return get_origin(tp) in (typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly)


def _alternatives(tp: Any) -> list[Any]:
    tp = _unwrap(tp)
    if get_origin(tp) in (Union, types.UnionType):
        return [a for alt in get_args(tp) for a in _alternatives(alt)]
    return [tp]


def _is_model(tp: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(tp, type) and issubclass(tp, BaseModel)


def members(union: Any, *, models: bool = False) -> list[Any]:
    """The TypedDicts of ``union`` (with ``models``: its pydantic models instead), in declaration order."""
    wanted = _is_model if models else is_typeddict
    return [alt for alt in _alternatives(union) if wanted(alt)]


def name_of(member: Any) -> str:
    """A member's name, qualified by its module where two modules use the same class name."""
    return f"{member.__module__.rsplit('.', 1)[-1]}.{member.__name__}"


def _value(tp: Any, depth: int, *, models: bool) -> Any:
    tp = _unwrap(tp)
    origin = get_origin(tp)
    if origin is Literal:
        return get_args(tp)[0]
    if origin in (Union, types.UnionType):
        alternatives = [a for a in get_args(tp) if a is not type(None)]
        # A request alternative first (a TypedDict or a plain value), a response model only on the reply side.
        ordered = [a for a in alternatives if models or not _is_model(_unwrap(a))]
        return _value(ordered[0], depth, models=models)
    if tp is str:
        return "x"
    if tp is bool:
        return True
    if tp is int:
        return 1
    if tp is float:
        return 1.0
    if tp is object or tp is Any:
        return {}
    if tp is type(None):
        return None
    if is_typeddict(tp):
        return minimal(tp, depth + 1)
    if _is_model(tp):
        return minimal_model(tp, depth + 1)
    if origin in _SEQUENCES or getattr(origin, "__name__", "") == "SequenceNotStr" or tp is list:
        (item,) = get_args(tp)[:1] or (str,)
        return [] if depth > _DEPTH else [_value(item, depth + 1, models=models)]
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        return {}
    raise TypeError(f"cannot build a value of {tp!r}")


def minimal(td: Any, depth: int = 0) -> dict[str, Any]:
    """The smallest instance of the TypedDict ``td``: its required keys, each built from its type."""
    hints = _hints(td)
    return {key: _value(hints[key], depth, models=False) for key in hints if key in _required(td)}


def minimal_model(model: Any, depth: int = 0) -> dict[str, Any]:
    """The smallest instance of the pydantic model ``model``, as the dict its API sends (required fields only)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.is_required():
            out[field.alias or name] = _value(field.annotation, depth, models=True)
    return out
