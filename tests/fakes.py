"""Deterministic summarizers and counters for the engine tests."""

from __future__ import annotations

from collections.abc import Sequence

from convmem import Message


class RecordingSummarizer:
    """Summarizes by counting: 'covers N messages; last: <text>'. Records every call's input."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[str]]] = []

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        self.calls.append((previous, [m.id or "" for m in messages]))
        before = int(previous.split()[1]) if previous else 0
        return f"covers {before + len(messages)} messages; last: {messages[-1].text[:40]}"


class AsyncRecordingSummarizer(RecordingSummarizer):
    async def asummarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        return self.summarize(previous, messages, max_tokens)


class FlakySummarizer(RecordingSummarizer):
    """Fails (raises, or returns empty text) on the calls whose numbers are in ``failing``."""

    def __init__(self, failing: set[int], mode: str = "raise") -> None:
        super().__init__()
        self.failing = failing
        self.mode = mode
        self.attempts = 0

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        self.attempts += 1
        if self.attempts in self.failing:
            self.calls.append((previous, [m.id or "" for m in messages]))
            if self.mode == "raise":
                raise RuntimeError("HTTP 503: upstream overloaded")
            return "   "
        return super().summarize(previous, messages, max_tokens)


class SpyCounter:
    """Wraps a counter and counts the calls of count_message per message id."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.calls: dict[str | None, int] = {}
        self.name = inner.name  # type: ignore[attr-defined]
        self.exact = inner.exact  # type: ignore[attr-defined]
        self.reply_priming = inner.reply_priming  # type: ignore[attr-defined]

    def count_text(self, text: str) -> int:
        return self.inner.count_text(text)  # type: ignore[attr-defined,no-any-return]

    def count_message(self, message: Message) -> int:
        self.calls[message.id] = self.calls.get(message.id, 0) + 1
        return self.inner.count_message(message)  # type: ignore[attr-defined,no-any-return]
