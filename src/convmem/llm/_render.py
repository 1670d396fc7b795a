"""Messages as transcript lines for an LLM prompt, and the pieces a line is split into (internal).

Every message becomes one line, ``role: text``, with tool calls spelled out
(``called get_weather({"city": "Paris"}) [call c1]``) and tool results tied
to their call, so the model can attribute values to the tool that returned
them. Non-text parts become placeholders (``[image]``); their bytes never go
to the summarizer. Nothing is shortened here: a line too long for a request
is *split* by :func:`split_to_fit`, never cut.

Example::

    render(Message(role="tool", tool_call_id="c1", content="21 C"))   # 'tool result [call c1]: 21 C'
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..messages import AudioPart, FilePart, ImagePart, Message, TextPart

__all__ = ["CONTINUED", "render", "split_to_fit"]

CONTINUED = "(continued) "
_SPACE = re.compile(r"\s")


def render(message: Message, *, with_id: bool = False) -> str:
    """One transcript line for ``message``; ``with_id`` prefixes ``[id time]`` for provenance."""
    if message.role == "tool":
        who = f"tool result [call {message.tool_call_id}]"
    else:
        who = message.role if message.name is None else f"{message.role} ({message.name})"
    pieces = [_content(message)] if message.content is not None else []
    pieces += [f"called {c.name}({c.arguments}) [call {c.id}]" for c in message.tool_calls]
    head = ""
    if with_id:
        when = message.created_at.isoformat(timespec="seconds") if message.created_at is not None else "?"
        head = f"[{message.id} {when}] "
    return f"{head}{who}: {' '.join(p for p in pieces if p)}"


def _content(message: Message) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out = []
    for part in content:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ImagePart):
            out.append("[image]")
        elif isinstance(part, AudioPart):
            out.append("[audio]")
        elif isinstance(part, FilePart):
            out.append("[file]")
    return " ".join(out)


def split_to_fit(count: Callable[[str], int], text: str, max_tokens: int) -> tuple[str, str]:
    """Split ``text`` into the longest head of at most ``max_tokens`` tokens and the rest.

    The split falls on whitespace when there is some in the head's second
    half, so words stay whole. The head is never empty (at least one
    character), so a caller that keeps splitting always makes progress.
    """
    if count(text) <= max_tokens:
        return text, ""
    lo, hi, best = 1, len(text) - 1, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= max_tokens:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    cut = best
    for match in _SPACE.finditer(text, best // 2, best):
        cut = match.end()
    return text[:cut], text[cut:]
