"""What ``Memory`` and ``AsyncMemory`` share: configuration, and the API that does no I/O.

The twins differ only in how they perform I/O (:mod:`convmem.memory`); every
decision lives in the core (:mod:`convmem.memory._core`), the eviction flow
(:mod:`convmem.memory._flows`) and this base. The configuration a memory was made with
is saved with its state, so ``Memory.open(session_id, store=...)`` without
options reproduces the same budget and strategy (and so the same context).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ..errors import ConfigurationError, ContextOverflowError, SessionNotFoundError
from ..limits import Limits
from ..longterm.blocks.base import Block, Turn
from ..policy.assembly import BlockText, Overflow
from ..policy.context import Context
from ..policy.strategies import Plan, Strategy
from ..policy.units import Unit
from ..session import LoadedSession, MessageStatus, SessionState, status_of
from ..tokens import Calibration, ModelInfo, TokenCounter, cost, lookup_model
from ..usage import ModelUsage, Stats, Usage, parse_usage
from ._core import MemoryCore
from ._intake import MessageLike

__all__ = ["CONFIG_KEY", "InputLike", "MemoryBase", "initial_state", "keep_config", "open_options", "stored_config"]

InputLike = MessageLike | str | Sequence[MessageLike] | None
CONFIG_KEY = "config"
CALIBRATION_KEY = "calibration"  # what a calibrated counter learned, saved with the session's stats
UNFOLDED_LIMIT = 10_000  # archived-but-unfolded rows a folding memory re-reads on open (a failed summary's queue)
_STRATEGY_ATTRIBUTES = ("max_tokens", "keep_recent_tokens", "max_messages", "keep_turns", "low_watermark")


class MemoryBase:
    """Configuration and the pure read-only API shared by both twins."""

    def __init__(
        self,
        model: str | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        max_tokens: int | None = None,
        max_output_tokens: int | None = None,
        counter: TokenCounter | str | None = None,
        strategy: str | Strategy = "token_budget",
        strategy_options: Mapping[str, Any] | None = None,
        summarizer: Any = None,
        on_overflow: Overflow = "truncate",
        summary_max_tokens: int | None = None,
        blocks: Sequence[Block] = (),
        pinned_context: Callable[[], str] | None = None,
        block_template: Callable[[Sequence[BlockText]], str] | None = None,
        sinks: Sequence[Any] = (),
        format: str = "openai",
        limits: Limits | None = None,
        cache_breakpoints: bool = True,
    ) -> None:
        _check_options(format, strategy, strategy_options, max_tokens, max_output_tokens, summary_max_tokens)
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigurationError(f"limits must be a convmem.limits.Limits, got {type(limits).__name__}")
        options = dict(strategy_options or {})
        default_summarizer = None
        if isinstance(strategy, str) and strategy in ("summary_buffer", "compaction"):
            if summarizer is None:
                # Offline and pure (it imports only the model layer): the documented extractive default.
                from ..llm.extractive import ExtractiveSummarizer

                summarizer = default_summarizer = ExtractiveSummarizer()
            options["summarizer"] = summarizer
        elif summarizer is not None:
            raise ConfigurationError("a summarizer is only used by the summary_buffer and compaction strategies")
        self._core = MemoryCore(
            model=model,
            max_tokens=max_tokens,
            max_output_tokens=max_output_tokens,
            counter=counter,
            strategy=strategy,
            strategy_options=options,
            on_overflow=on_overflow,
            summary_max_tokens=summary_max_tokens,
            blocks=blocks,
            pinned_context=pinned_context,
            block_template=block_template,
            limits=limits,
        )
        self._core.cache_breakpoints = bool(cache_breakpoints)
        if default_summarizer is not None:
            default_summarizer.bind(self._core.counter.count_text)
        self._core.counts[CONFIG_KEY] = _config(
            max_tokens=max_tokens,
            max_output_tokens=max_output_tokens,
            strategy=strategy,
            strategy_options=strategy_options,
            on_overflow=on_overflow,
            summary_max_tokens=summary_max_tokens,
            format=format,
        )
        self.session_id = session_id or uuid.uuid4().hex
        self.user_id = user_id
        self.model = model
        self.format = format
        self._sinks = list(sinks)
        self._prediction: tuple[int, float] | None = None
        calibration = getattr(self._core.counter, "calibration", None)
        self._calibration = calibration if isinstance(calibration, Calibration) else None

    @property
    def budget(self) -> int:
        return self._core.budget

    @property
    def reserved_output(self) -> int:
        return self._core.reserve

    @property
    def counter(self) -> TokenCounter:
        return self._core.counter

    @property
    def strategy(self) -> Strategy:
        return self._core.strategy

    def stats(self) -> Stats:
        """Tokens in context, archived and summarized counts, summaries made, tokens saved, usage, warnings.

        ``context_tokens`` is what ``context().tokens`` reports for this state when no input is given
        and no blocks are set: pinned, summary and window as they fit the budget, plus the reply
        priming (and, in the Anthropic format, the continuation placeholder). Blocks are left out
        because rendering them may search a store; ``context().account.blocks`` has their share.
        """
        core = self._core
        stats = core.stats()
        try:
            tokens = core.context([], self.format, []).tokens
        except ContextOverflowError:  # on_overflow="raise" and the irreducible part does not fit
            tokens = stats.context_tokens + core.counter.reply_priming
        return replace(stats, context_tokens=tokens)

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of the newest assistant message's calls that still await results, in call order."""
        pending = self._core.window.pending
        if pending is None:
            return []
        return [call.id for call in pending.entries[0].message.tool_calls if call.id in pending.pending]

    def _context(self, input: InputLike, format: str | None) -> Context:
        core = self._core
        inputs = core.inputs(input) if input is not None else []
        if not core.blocks:
            return self._noted(core.context(inputs, format or self.format, [], track=True))
        query = inputs[-1][0].text if inputs else _last_user_text(core)
        turn = Turn(query, self.session_id, self.user_id, core.window_start, datetime.now(timezone.utc))
        return self._noted(core.context(inputs, format or self.format, core.block_texts(query, turn), track=True))

    def _noted(self, context: Context) -> Context:
        """Keep the context's warnings in the stats, and what a calibrated counter predicted for it."""
        for warning in context.warnings:
            self._core.warn(warning, once=True)
        if self._calibration is not None:
            self._prediction = (context.tokens, self._calibration.factor)
        return context

    def _learn(self, parsed: Usage) -> None:
        """Teach a calibrated counter the prompt tokens reported for the last context (once per context)."""
        prediction, self._prediction = self._prediction, None
        calibration = self._calibration
        if prediction is None or calibration is None or not parsed.input_tokens:
            return
        if calibration.observe(prediction[0], prediction[1], parsed.input_tokens):
            self._core.counts[CALIBRATION_KEY] = calibration.snapshot()

    def _usage(self, usage: Any, model: str | None = None) -> Usage:
        parsed = parse_usage(usage)
        if model is None:
            self._learn(parsed)
        self._add_usage(parsed, model)
        return parsed

    def _add_usage(self, parsed: Usage, model: str | None = None) -> list[Unit]:
        """Count ``parsed`` in the stats; evicts nothing (the shape :func:`convmem.memory._flows.save` expects)."""
        counts = self._core.counts
        counts["input_tokens"] += parsed.input_tokens
        counts["output_tokens"] += parsed.output_tokens
        counts["cached_input_tokens"] += parsed.cached_input_tokens
        counts["cache_write_tokens"] = counts.get("cache_write_tokens", 0) + parsed.cache_write_input_tokens
        info = self._core.info if model is None else _priced(model)
        if info is not None and info.input_price_per_mtok is not None:  # open-weight models have no list price
            tokens = (parsed.input_tokens, parsed.output_tokens)
            billed = cost(info, *tokens, parsed.cached_input_tokens, parsed.cache_write_input_tokens)
            counts["cost_usd"] += billed
            counts["cache_savings_usd"] = counts.get("cache_savings_usd", 0.0) + cost(info, *tokens) - billed
        return []

    def _charge(self, outcome: object) -> object:
        """Add the usage a summarizer reports on its result or its error (``.usage``: ModelUsage items)."""
        for item in getattr(outcome, "usage", None) or ():
            if isinstance(item, ModelUsage):
                self._usage(item.usage, item.model)
        return outcome

    def _exact(self, value: Any) -> Any:
        """``value``, unless it is another session than this memory's (a store resolves id prefixes)."""
        if isinstance(value, LoadedSession) and value.info.id != self.session_id:
            raise SessionNotFoundError(self.session_id)
        return value

    def _restore(self, loaded: LoadedSession) -> None:
        keep_config(self._core, loaded)
        snapshot = self._core.counts.get(CALIBRATION_KEY)
        if self._calibration is not None and isinstance(snapshot, Mapping):
            self._calibration.adopt(snapshot)  # only when this process has learned nothing yet for the model

    def _clear(self, keep_system: bool) -> list[Unit]:
        """Archive the whole window (and unpin system messages unless ``keep_system``); returns the units."""
        core = self._core
        if not keep_system:
            last = core.counts["last_seq"]
            core.window.pinned.clear()
            core.window.pinned_tokens = 0
            core.state = _with(core.state, pinned_start=(last + 1) if last is not None else 0)
        return core.evict(Plan(evict=len(core.window.units), fold=False, reason="clear"))

    def _filter(self, status: MessageStatus | Iterable[MessageStatus] | None) -> Callable[[Any], bool]:
        wanted = None if status is None else ({status} if isinstance(status, str) else set(status))
        state = self._core.state
        return lambda stored: wanted is None or status_of(stored, state) in wanted


def keep_config(core: MemoryCore, loaded: LoadedSession) -> None:
    """``core.restore(loaded)``, keeping the options the session was created with as the ones it saves.

    A memory opened with other options uses them, but never replaces the session's own: a later
    ``Memory.open`` without options gets what the session was created with. A session saved before
    options were kept takes this memory's.
    """
    own, learned = core.counts[CONFIG_KEY], core.counts.get(CALIBRATION_KEY)
    core.restore(loaded)
    if not isinstance(core.counts.get(CONFIG_KEY), Mapping):
        core.counts[CONFIG_KEY] = own
    if learned is not None:  # what this process's counter learned is newer than what a catch-up read
        core.counts[CALIBRATION_KEY] = learned


def _config(*, strategy: str | Strategy, strategy_options: Mapping[str, Any] | None, **plain: Any) -> dict[str, Any]:
    """The JSON-able options that decide the context; a summarizer or counter object cannot be saved."""
    config = {key: value for key, value in plain.items() if value is not None}
    if isinstance(strategy, str):
        options = {k: v for k, v in (strategy_options or {}).items() if _jsonable(v)}
        config.update(strategy=strategy, strategy_options=options)
    else:
        attributes = {a: getattr(strategy, a) for a in _STRATEGY_ATTRIBUTES if hasattr(strategy, a)}
        config.update(strategy=strategy.name, strategy_options={k: v for k, v in attributes.items() if _jsonable(v)})
    return config


def _check_options(format: Any, strategy: Any, strategy_options: Any, *numbers: Any) -> None:
    """Options of the wrong type are a ConfigurationError, whether passed or read from a stored config."""
    if format not in ("openai", "anthropic", "responses"):
        raise ConfigurationError(f"format must be 'openai', 'anthropic' or 'responses', got {format!r}")
    if not isinstance(strategy, str) and not hasattr(strategy, "plan"):
        raise ConfigurationError(f"strategy must be a name or a Strategy, got {type(strategy).__name__}")
    if strategy_options is not None and not isinstance(strategy_options, Mapping):
        raise ConfigurationError(f"strategy_options must be a mapping, got {type(strategy_options).__name__}")
    for number in numbers:
        if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 0):
            raise ConfigurationError(f"token counts and budgets must be non-negative integers, got {number!r}")


def _jsonable(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def stored_config(state: SessionState) -> dict[str, Any]:
    """The options a session was saved with (empty for sessions saved before configs were kept)."""
    config = state.stats.get(CONFIG_KEY)
    if not isinstance(config, Mapping):
        return {}
    known = inspect.signature(MemoryBase.__init__).parameters
    return {k: v for k, v in config.items() if k in known and k != "self"}  # a foreign key is no option


def initial_state(memory: MemoryBase) -> SessionState:
    """The state a new, empty session is saved with: the memory's options, so that opening it reuses them."""
    return SessionState(stats={CONFIG_KEY: dict(memory._core.counts[CONFIG_KEY])})


def open_options(state: SessionState, options: Mapping[str, Any], model: str | None) -> tuple[dict[str, Any], int]:
    """Options for reopening: the stored config, overridden by ``options``; and how many unfolded rows to read."""
    merged = stored_config(state)
    if "strategy" in options and "strategy_options" not in options:
        merged.pop("strategy_options", None)  # options of another strategy would not apply
    merged.update(options)
    merged.setdefault("model", model)
    strategy = merged.get("strategy", "token_budget")
    folds = strategy in ("summary_buffer", "compaction") or getattr(strategy, "summarizer", None) is not None
    return merged, UNFOLDED_LIMIT if folds else 0


def _priced(model: str) -> ModelInfo | None:
    try:
        return lookup_model(model)
    except KeyError:  # a local or unlisted summarizer model: its tokens count, its cost is unknown
        return None


def _last_user_text(core: MemoryCore) -> str | None:
    for unit in reversed(core.window.units):
        if unit.kind == "user":
            return unit.entries[0].message.text
    return None


def _with(state: SessionState, **changes: Any) -> SessionState:
    return replace(state, **changes)
