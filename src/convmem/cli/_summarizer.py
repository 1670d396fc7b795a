"""The deterministic, offline summarizer ``convmem replay`` uses when no LLM is configured.

It is *extractive*: it keeps the first sentence of each evicted message, and it
is labelled as such wherever replay reports on it, so nobody mistakes its output
for an LLM summary. It honours the running-summary contract of
:class:`convmem.policy.strategies.Summarizer`: the new summary is the previous
one plus lines for the newly evicted messages, trimmed from the oldest lines to
fit ``max_tokens``.

Example::

    summarizer = make_summarizer()
    summarizer.bind(memory.counter.count_text)    # exact caps with the model's counter
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

from ..messages import Message

__all__ = ["HEADER", "FirstSentenceSummarizer", "make_summarizer"]

HEADER = "[extractive summary: the first sentence of each earlier message, no LLM]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_SPACE = re.compile(r"\s+")


class FirstSentenceSummarizer:
    """Previous summary + the first sentence of each evicted message, capped to ``max_tokens``."""

    label = "extractive, built-in: first sentence of each evicted message (no LLM)"

    def __init__(self, count_text: Callable[[str], int] | None = None, *, sentence_chars: int = 160) -> None:
        self._count = count_text
        self.sentence_chars = sentence_chars

    def bind(self, count_text: Callable[[str], int]) -> None:
        """Count with the memory's own counter, so the cap is exact and the core never truncates."""
        self._count = count_text

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        lines = [line for line in (previous or "").splitlines() if line and line != HEADER]
        lines += [self._line(m) for m in messages]
        return self._fit(lines, max_tokens)

    def _line(self, message: Message) -> str:
        if message.tool_calls:
            calls = ", ".join(f"{c.name}({_clip(_flat(c.arguments), 60)})" for c in message.tool_calls)
            said = self._first(message.text)
            return f"- assistant called {calls}" + (f"; said: {said}" if said else "")
        text = self._first(message.text) or "[no text: image or file]"
        if message.role == "tool":
            return f"- tool result {message.tool_call_id}: {text}"
        return f"- {message.role}: {text}"

    def _first(self, text: str) -> str:
        text = _flat(text)
        return _clip(_SENTENCE_END.split(text, maxsplit=1)[0], self.sentence_chars)

    def _fit(self, lines: list[str], max_tokens: int) -> str:
        count = self._count or _rough_count
        # Per-line counts (+1 for the newline) decide how many of the oldest lines to drop
        # without recounting the whole text each time; the exact check below settles it.
        costs = [count(line) + 1 for line in lines]
        total = count(HEADER) + sum(costs)
        start = 0
        while start < len(lines) - 1 and total > max_tokens:
            total -= costs[start]
            start += 1
        text = "\n".join([HEADER, *lines[start:]])
        while start < len(lines) - 1 and count(text) > max_tokens:
            start += 1
            text = "\n".join([HEADER, *lines[start:]])
        return text


def make_summarizer() -> tuple[Any, str]:
    """Return ``(summarizer, label)``: ``convmem.llm.ExtractiveSummarizer`` if present, else the built-in one."""
    try:
        cls = import_module("convmem.llm").ExtractiveSummarizer
        summarizer = cls()
    except (ImportError, AttributeError, TypeError):
        builtin = FirstSentenceSummarizer()
        return builtin, builtin.label
    return summarizer, "extractive: convmem.llm.ExtractiveSummarizer (no LLM)"


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _rough_count(text: str) -> int:
    # Only used before bind(); never undercounts ordinary text by much, and the core
    # truncates (with a warning) if it ever does.
    return len(text) // 2 + 1
