"""Tool-call ids mapped to a provider's id pattern, reversibly.

Anthropic requires ``tool_use`` ids (and so ``tool_use_id``) to match
``^[a-zA-Z0-9_-]+$``; OpenAI-compatible servers emit ids such as
``functions.get_weather:0``. :func:`to_anthropic_id` leaves a valid id as it is
and spells any other one as ``cmx_`` + an escape of it (``_`` + two hex digits
per byte that is not a letter, digit or ``-``); a valid id that itself starts
with ``cmx_`` is escaped too, so :func:`from_anthropic_id` inverts every id
exactly::

    to_anthropic_id("functions.get_weather:0")  # 'cmx_functions_2eget_5fweather_3a0'
    from_anthropic_id('cmx_functions_2eget_5fweather_3a0')  # 'functions.get_weather:0'
"""

from __future__ import annotations

import re

__all__ = ["from_anthropic_id", "to_anthropic_id"]

_VALID = re.compile(r"[a-zA-Z0-9_-]+")
_PLAIN = re.compile(r"[a-zA-Z0-9-]")
_ESCAPED = re.compile(r"cmx_(?:[a-zA-Z0-9-]|_[0-9a-f]{2})+")
_PREFIX = "cmx_"


def to_anthropic_id(call_id: str) -> str:
    """``call_id`` if Anthropic accepts it as is, else its reversible escape."""
    if _VALID.fullmatch(call_id) and not call_id.startswith(_PREFIX):
        return call_id
    out = [_PREFIX]
    for char in call_id:
        if _PLAIN.fullmatch(char):
            out.append(char)
        else:
            out += [f"_{byte:02x}" for byte in char.encode("utf-8")]
    return "".join(out)


def from_anthropic_id(call_id: str) -> str:
    """The id :func:`to_anthropic_id` was given for ``call_id`` (other ids come back unchanged)."""
    if not _ESCAPED.fullmatch(call_id):
        return call_id
    raw = bytearray()
    body = call_id[len(_PREFIX) :]
    i = 0
    while i < len(body):
        if body[i] == "_":
            raw.append(int(body[i + 1 : i + 3], 16))
            i += 3
        else:
            raw += body[i].encode()
            i += 1
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:  # not one of ours: an id that merely looks escaped
        return call_id
    return decoded if to_anthropic_id(decoded) == call_id else call_id
