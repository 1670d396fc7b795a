"""Eviction strategies: pure policies that read the window and return a plan.

A strategy never does I/O and never calls a model. It answers one question:
*how many of the oldest units leave the window, and are they folded into the
running summary or only archived?* The memory facade carries the plan out
(and calls the summarizer, if the plan folds). With ``provider`` the provider
compacts: the memory adopts the compaction it returns as the summary.

Every strategy also honours ``limit``, the hard token ceiling the memory
derives from its budget, so invariant 3 holds whatever the strategy's own
threshold. Every plan keeps the newest unit (it is irreducible), and moves the
window start forward to a user message whenever one remains.

Example::

    strategy = make_strategy("summary_buffer", max_tokens=4000, keep_recent_tokens=1500)
    plan = strategy.plan(window, limit=6000)
    # Plan(evict=7, fold=True, reason="summary_buffer: 4210 > 4000 tokens")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigurationError
from ..messages import Message
from .units import Window

__all__ = [
    "STRATEGIES",
    "AsyncSummarizer",
    "Compaction",
    "Plan",
    "ProviderCompaction",
    "SlidingWindow",
    "Strategy",
    "Summarizer",
    "SummaryBuffer",
    "TokenBudget",
    "make_strategy",
]


@runtime_checkable
class Summarizer(Protocol):
    """Folds newly evicted messages into the previous running summary.

    It receives only the previous summary and the new messages, never the whole
    history, so a summary covering N evictions costs N small calls.
    It must return the new summary text; raising or returning empty text makes
    the memory archive instead and retry at the next eviction.
    """

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str: ...


@runtime_checkable
class AsyncSummarizer(Protocol):
    """The async twin of :class:`Summarizer`."""

    async def asummarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str: ...


@dataclass(frozen=True, slots=True)
class Plan:
    """Evict the ``evict`` oldest units; fold them into the summary if ``fold``."""

    evict: int = 0
    fold: bool = False
    reason: str = ""


KEEP = Plan()


def _evict_count(window: Window, fits: Callable[[int, int], bool]) -> int:
    """How many oldest units to evict until ``fits(tokens, messages)`` holds.

    Walks only the units it evicts (O(evicted)), never evicts the newest unit,
    and then advances to a user message when one remains in the window.
    """
    tokens, messages, users = window.tokens, window.messages, window.user_units
    if fits(tokens, messages):
        return 0
    count = 0
    last_index = len(window.units) - 1
    iterator = iter(window.units)
    for unit in iterator:
        if count == last_index or fits(tokens, messages):
            break
        tokens -= unit.tokens
        messages -= len(unit.entries)
        users -= unit.kind == "user"
        count += 1
    else:
        return count
    # `unit` is the first kept one: skip forward to a user message if one is left.
    while unit.kind != "user" and users > 0 and count < last_index:
        count += 1
        unit = next(iterator)
    return count


class Strategy(Protocol):
    """A pure eviction policy."""

    name: str

    @property
    def summarizer(self) -> Summarizer | AsyncSummarizer | None: ...

    def plan(self, window: Window, limit: int) -> Plan: ...


class TokenBudget:
    """Keep the newest units whose tokens fit ``max_tokens`` (default: the whole budget).

    Past the ceiling it evicts down to ``low_watermark`` of it, not just below
    it: evicting in chunks keeps the request's prefix identical for many turns,
    which keeps provider prompt caches warm (and makes evictions rare). Set
    ``low_watermark=1.0`` to evict one unit at a time. A memory with a block that
    changes every turn (recall) defaults to 0.6 instead (see ``bench/cache.py --sweep``).
    """

    name = "token_budget"
    summarizer = None

    def __init__(self, max_tokens: int | None = None, low_watermark: float = 0.8) -> None:
        _positive("max_tokens", max_tokens)
        if not 0.0 < low_watermark <= 1.0:
            raise ConfigurationError(f"low_watermark must be in (0, 1], got {low_watermark!r}")
        self.max_tokens = max_tokens
        self.low_watermark = low_watermark

    def plan(self, window: Window, limit: int) -> Plan:
        ceiling = limit if self.max_tokens is None else min(limit, self.max_tokens)
        if window.tokens <= ceiling:
            return KEEP
        target = int(ceiling * self.low_watermark)
        count = _evict_count(window, lambda tokens, _: tokens <= target)
        return Plan(count, False, f"token_budget: {window.tokens} > {ceiling} tokens") if count else KEEP


class ProviderCompaction(TokenBudget):
    """The provider compacts; convmem keeps the archive, the budget and the account.

    For Anthropic's server compaction and the Responses API's ``context_management`` (or
    ``responses.compact``): the provider returns a compaction block or item when its own threshold is
    reached, and the memory adopts it as the running summary (archiving what it stands for, see
    ``MemoryCore.compact``). Until then this strategy evicts only what would not fit the budget, one
    unit at a time, so the provider sees, and compacts, all it can.
    """

    name = "provider"

    def __init__(self, max_tokens: int | None = None) -> None:
        super().__init__(max_tokens, low_watermark=1.0)


class SlidingWindow:
    """Keep at most ``max_messages`` messages (whole units; the newest unit always stays)."""

    name = "sliding_window"
    summarizer = None

    def __init__(self, max_messages: int) -> None:
        _positive("max_messages", max_messages)
        self.max_messages = max_messages

    def plan(self, window: Window, limit: int) -> Plan:
        most = self.max_messages
        count = _evict_count(window, lambda tokens, messages: messages <= most and tokens <= limit)
        return Plan(count, False, f"sliding_window: {window.messages} > {most} messages") if count else KEEP


class _Folding:
    """What the folding strategies share: a summarizer, and a ceiling of their own below the hard limit."""

    max_tokens: int | None
    _summarizer: Summarizer | AsyncSummarizer | None

    @property
    def summarizer(self) -> Summarizer | AsyncSummarizer | None:
        return self._summarizer

    def ceiling(self, limit: int) -> int:
        return limit if self.max_tokens is None else min(limit, self.max_tokens)


class SummaryBuffer(_Folding):
    """A running summary: past ``max_tokens``, fold the oldest units until ``keep_recent_tokens`` remain."""

    name = "summary_buffer"

    def __init__(
        self,
        max_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
        summarizer: Summarizer | AsyncSummarizer | None = None,
    ) -> None:
        _positive("max_tokens", max_tokens)
        _positive("keep_recent_tokens", keep_recent_tokens)
        if max_tokens is not None and keep_recent_tokens is not None and keep_recent_tokens > max_tokens:
            raise ConfigurationError(
                f"keep_recent_tokens ({keep_recent_tokens}) must not exceed max_tokens ({max_tokens})"
            )
        self.max_tokens = max_tokens
        self.keep_recent_tokens = keep_recent_tokens
        self._summarizer = summarizer

    def plan(self, window: Window, limit: int) -> Plan:
        ceiling = self.ceiling(limit)
        if window.tokens <= ceiling:
            return KEEP
        keep = self.keep_recent_tokens if self.keep_recent_tokens is not None else ceiling // 2
        target = min(keep, ceiling)
        count = _evict_count(window, lambda tokens, _: tokens <= target)
        return Plan(count, True, f"summary_buffer: {window.tokens} > {ceiling} tokens") if count else KEEP


class Compaction(_Folding):
    """When the window is full, fold everything but the newest ``keep_turns`` user turns into the summary."""

    name = "compaction"

    def __init__(
        self,
        max_tokens: int | None = None,
        keep_turns: int = 1,
        summarizer: Summarizer | AsyncSummarizer | None = None,
    ) -> None:
        _positive("max_tokens", max_tokens)
        _positive("keep_turns", keep_turns)
        self.max_tokens = max_tokens
        self.keep_turns = keep_turns
        self._summarizer = summarizer

    def plan(self, window: Window, limit: int) -> Plan:
        ceiling = self.ceiling(limit)
        if window.tokens <= ceiling:
            return KEEP
        # Find where the newest `keep_turns` user turns start, walking from the newest end.
        kept_units, turns = 0, 0
        for unit in reversed(window.units):
            kept_units += 1
            if unit.kind == "user":
                turns += 1
                if turns == self.keep_turns:
                    break
        by_turns = len(window.units) - kept_units
        by_budget = _evict_count(window, lambda tokens, _: tokens <= ceiling)
        count = max(by_turns, by_budget)
        return Plan(count, True, f"compaction: {window.tokens} > {ceiling} tokens") if count else KEEP


STRATEGIES: dict[str, type[Any]] = {
    "token_budget": TokenBudget,
    "sliding_window": SlidingWindow,
    "summary_buffer": SummaryBuffer,
    "compaction": Compaction,
    "provider": ProviderCompaction,
}


def make_strategy(name: str, **options: Any) -> Strategy:
    """Build a strategy by name: token_budget, sliding_window, summary_buffer, compaction or provider."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ConfigurationError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}") from None
    try:
        strategy: Strategy = cls(**options)
    except TypeError as exc:
        raise ConfigurationError(f"strategy {name!r}: {_plain(exc)}") from None
    return strategy


def _plain(exc: TypeError) -> str:
    """A constructor's complaint in the caller's words (a ``X.__init__()`` message names internals)."""
    text = str(exc)
    unknown = re.search(r"unexpected keyword argument '([^']+)'", text)
    if unknown:
        return f"no option {unknown.group(1)!r}"
    missing = re.search(r"missing \d+ required (?:keyword-only |positional )?arguments?: (.+)", text)
    if missing:
        return f"needs {missing.group(1)}"
    return re.sub(r"\b\w+\.__init__\(\) ", "", text)


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
