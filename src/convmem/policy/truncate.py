"""Cutting oversized text to an exact token count, with a visible marker.

Used only off the hot path: when the irreducible part of a context (pinned
messages, the newest unit, the input) does not fit and the user chose
``on_overflow="truncate"``, and when a block must shrink. The stored message is
never changed; only the copy that goes into this context is cut. The head and
the tail of the text are kept, because instructions tend to sit at the start
and conclusions (or the latest log lines) at the end.

Example::

    short = truncate_text(counter.count_text, log_output, max_tokens=500)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ..messages import Message, TextPart
from ..tokens import TokenCounter

__all__ = ["MARKER", "cut_to_fit", "truncate_message", "truncate_text"]

MARKER = "\n[... truncated by convmem to fit the context budget ...]\n"


def truncate_text(count: Callable[[str], int], text: str, max_tokens: int) -> str | None:
    """The longest head + marker + tail of ``text`` that counts at most ``max_tokens``.

    Returns ``text`` itself when it fits, and None when not even the marker fits.
    The result is verified with ``count``, so the bound is exact even where
    the search is not monotone.
    """
    if count(text) <= max_tokens:
        return text
    if count(MARKER) > max_tokens:
        return None
    best = MARKER
    lo, hi = 0, len(text) // 2
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = text[:mid] + MARKER + text[len(text) - mid :]
        if count(candidate) <= max_tokens:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


# A message too large for the budget stays in the window turn after turn, and cutting it means counting
# megabytes: the cut and its count are kept, keyed by the message object, the counter and the target.
# Messages are immutable, and each entry holds both objects, so their ids cannot be reused while it lives.
_CUTS: OrderedDict[tuple[int, int, int], tuple[Message, object, Message | None, int]] = OrderedDict()
_CUTS_MAX = 8  # each entry keeps its (huge) message alive: a few are enough for the live windows
_CUTS_LOCK = threading.Lock()


def cut_to_fit(counter: TokenCounter, message: Message, max_tokens: int) -> tuple[Message | None, int]:
    """``truncate_message`` with the counter's own counts, and the cut's count; remembered per message.

    A huge message costs its cut once. A calibrated counter (one with a ``calibration``) may count
    the remembered cut otherwise after it learns: its cut is recounted, and made anew if it changed.
    """
    key = (id(message), id(counter), max_tokens)
    with _CUTS_LOCK:
        hit = _CUTS.get(key)
        if hit is not None and hit[0] is message and hit[1] is counter:
            _CUTS.move_to_end(key)
    if hit is not None and hit[0] is message and hit[1] is counter:
        cut, tokens = hit[2], hit[3]
        learns = getattr(counter, "calibration", None) is not None
        if cut is None or not learns or counter.count_message(cut) == tokens:
            return cut, tokens
    cut = truncate_message(counter.count_message, counter.count_text, message, max_tokens)
    tokens = 0 if cut is None else counter.count_message(cut)
    with _CUTS_LOCK:
        _CUTS[key] = (message, counter, cut, tokens)
        while len(_CUTS) > _CUTS_MAX:
            _CUTS.popitem(last=False)
    return cut, tokens


def truncate_message(
    count_message: Callable[[Message], int], count_text: Callable[[str], int], message: Message, max_tokens: int
) -> Message | None:
    """A copy of ``message`` whose largest text is cut so the whole message counts at most ``max_tokens``.

    Tool-call arguments are never cut (they would stop being JSON). When
    ``max_tokens`` is below the cost of the marker alone, the marker-only copy
    is returned (the caller re-counts and cuts elsewhere); None means the
    message has no text that could be cut.
    """
    content = message.content
    if isinstance(content, str):
        texts = [content]
    elif content:
        texts = [part.text for part in content if isinstance(part, TextPart)]
    else:
        return None
    if not texts:
        return None
    largest = max(range(len(texts)), key=lambda i: len(texts[i]))
    smallest = _with_text(message, largest, MARKER)
    if count_message(smallest) >= max_tokens:
        # Below what the marker alone costs: the smallest visible cut is the best this message can do.
        return smallest if count_message(smallest) < count_message(message) else None
    fixed = count_message(message) - count_text(texts[largest])
    allowance = max_tokens - fixed
    # Token counts are not exactly additive across a splice; shrink until the whole message fits.
    for _ in range(8):
        cut = truncate_text(count_text, texts[largest], allowance)
        if cut is None:
            return None
        candidate = _with_text(message, largest, cut)
        if count_message(candidate) <= max_tokens:
            return candidate
        allowance -= max(1, count_message(candidate) - max_tokens)
    return None


def _with_text(message: Message, index: int, text: str) -> Message:
    content = message.content
    if isinstance(content, str):
        return message.replace(content=text)
    assert content is not None
    parts = list(content)
    text_positions = [i for i, part in enumerate(parts) if isinstance(part, TextPart)]
    position = text_positions[index]
    old = parts[position]
    assert isinstance(old, TextPart)
    parts[position] = TextPart(text, extra=old.extra)
    return message.replace(content=tuple(parts))
