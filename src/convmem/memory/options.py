"""``Options``: what a memory is configured with, checked once, and the part saved with its session.

What comes in: the keyword options of ``Memory(...)`` / ``AsyncMemory(...)``,
or a config read back from a session's state. What happens: :class:`Options`
checks each value's type and range (a ``ConfigurationError`` names the option
and what it takes); :func:`budget` and :func:`build_strategy` resolve what
they imply against the model's registry entry. What goes out: a frozen value
the core plans with (``memory.options``), and :meth:`Options.config`, the
JSON-able part saved with the session's first message, so that
``Memory.open(session_id, store=...)`` without options plans exactly as the
memory that created it::

    Memory(model, **options) -> Options(...) checked -> MemoryCore(options): budget, strategy
                                     `-> config() -> state.stats["config"] (with the first append)
    Memory.open(id, **given) -> open_options(the stored state, given, model): the saved config, given ones win
                             -> Memory(model, **merged)

Saved are the plain options of :data:`SAVED`, and the strategy by name with
its plain options; objects (a summarizer, a counter, blocks, sinks) cannot be
saved, and a strategy object is saved by its name and plain attributes. The
:class:`~convmem.limits.Limits` are saved as an object (and an import checks the
session's messages against them), and so is ``cache_breakpoints`` (a session that
turned them off stays off). The tools and the other cache options are the app's,
as its blocks are: ``Memory.open`` takes them again.
Saving another option is a change of :data:`SAVED` (plus a codec in
:meth:`Options.config` and :func:`stored_config` if its value is not plain).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal

from ..errors import ConfigurationError
from ..formats import FORMATS, Format
from ..formats.tool_definitions import ToolDefinition, parse_tools
from ..limits import Limits, limits_config, saved_limits
from ..longterm.blocks.base import Block
from ..policy.assembly import BlockText, Overflow
from ..policy.blockfit import PER_TURN_LOW_WATERMARK, any_per_turn
from ..policy.controls import CacheControls
from ..policy.strategies import AsyncSummarizer, Strategy, Summarizer, make_strategy
from ..session import SessionState
from ..tokens import ModelInfo, TokenCounter
from .sinks import AsyncEvictionSink, EvictionSink

__all__ = [
    "CONFIG_KEY",
    "FOLDING",
    "SAVED",
    "UNFOLDED_LIMIT",
    "Options",
    "budget",
    "build_strategy",
    "cache_controls",
    "initial_state",
    "open_options",
    "stored_config",
]

CONFIG_KEY = "config"  # where the saved options live in a session's state (``state.stats``)
#: The options saved as they are (plain JSON values), in the order they are saved; the strategy follows them.
SAVED: tuple[str, ...] = (
    "max_tokens",
    "max_output_tokens",
    "on_overflow",
    "summary_max_tokens",
    "format",
    "cache_breakpoints",
)
FOLDING = ("summary_buffer", "compaction")  # the strategies that fold evictions into a summary
UNFOLDED_LIMIT = 10_000  # archived-but-unfolded rows a folding memory re-reads on open (a failed summary's queue)
_STRATEGY_ATTRIBUTES = ("max_tokens", "keep_recent_tokens", "max_messages", "keep_turns", "low_watermark")
_COUNTERS = ("approximate", "calibrated")


@dataclass(frozen=True, slots=True)
class Options:
    """Every option of a memory, checked when made; ``Memory(model, **options)`` builds one (``memory.options``).

    Attributes:
        model: the model the context is for (e.g. ``"gpt-4o"``): its registry entry gives the budget,
            the output allowance, the prices and the exact counter. None needs ``max_tokens``.
        max_tokens: the budget, in tokens, of a request and its reply (default: the model's context window).
        max_output_tokens: tokens kept free for the reply (default: the model's output allowance, at
            most a quarter of its window, when ``max_tokens`` is not given; otherwise 0).
        counter: a :class:`~convmem.tokens.TokenCounter`, ``"calibrated"`` (any model, learns from the
            provider's usage) or ``"approximate"`` (default: the model's exact counter, else calibrated).
        strategy: ``"token_budget"``, ``"sliding_window"``, ``"summary_buffer"``, ``"compaction"``, ``"provider"``
            (the provider compacts; its compaction becomes the summary), or a
            :class:`~convmem.policy.strategies.Strategy` object.
        strategy_options: keyword options of a named strategy (e.g. ``{"max_messages": 20}``).
        summarizer: folds evicted messages into the running summary; only for ``summary_buffer`` and
            ``compaction`` (default there: the offline extractive summarizer).
        on_overflow: what ``context()`` does when what cannot be cut exceeds the budget: ``"truncate"``
            the newest messages' text, or ``"raise"`` ``ContextOverflowError``.
        summary_max_tokens: the running summary's cap (default: a tenth of the input budget, 64 to 2,000).
        blocks: blocks of context rendered into every request (facts, recall, working, static, callable).
        pinned_context: a callable whose text is sent every turn as a block of priority 0 (never cut).
        block_template: joins the blocks' texts into the text sent (default:
            :func:`~convmem.policy.assembly.default_block_template`).
        sinks: eviction sinks (:mod:`convmem.memory.sinks`) that get every unit the memory evicts.
        format: the format ``context()`` renders when none is given: ``"openai"``, ``"anthropic"`` or
            ``"responses"``.
        limits: what a message may hold at the door (default: :class:`~convmem.limits.Limits`).
        cache_breakpoints: whether convmem marks where the stable prefix ends: Anthropic
            ``cache_control`` (at most 4 with the caller's own, the tools' included), and OpenAI
            ``prompt_cache_breakpoint`` parts for the models that take them (GPT-5.6 and later);
            ``"automatic"`` also sends Anthropic's top-level ``cache_control``.
        cache_ttl: the lifetime of convmem's Anthropic marks, ``"5m"`` or ``"1h"`` (None: the API's
            default, 5 minutes); shortened where the caller's own marks need it.
        prompt_cache_key: OpenAI's ``prompt_cache_key``, sent with every Chat and Responses request.
        prompt_cache_options: OpenAI's ``prompt_cache_options`` (``mode``: ``"implicit"`` or
            ``"explicit"``; ``ttl``: ``"30m"``, or ``"12h"`` in Responses), sent with every Chat and
            Responses request; it also makes convmem place explicit breakpoints.
        tools: the tool definitions of every request (:mod:`convmem.formats.tool_definitions`: Chat,
            Responses or Anthropic shapes, a provider's own tools), counted in the budget and sent in
            ``request()``; ``context(tools=...)`` replaces them for one request.

    Raises:
        ConfigurationError: an option of the wrong type or out of range (named, with what it takes).
    """

    model: str | None = None
    max_tokens: int | None = None
    max_output_tokens: int | None = None
    counter: TokenCounter | Literal["approximate", "calibrated"] | None = None
    strategy: str | Strategy = "token_budget"
    strategy_options: Mapping[str, Any] | None = None
    summarizer: Summarizer | AsyncSummarizer | None = None
    on_overflow: Overflow = "truncate"
    summary_max_tokens: int | None = None
    blocks: Sequence[Block] = ()
    pinned_context: Callable[[], str] | None = None
    block_template: Callable[[Sequence[BlockText]], str] | None = None
    sinks: Sequence[EvictionSink | AsyncEvictionSink] = ()
    format: Format = "openai"
    limits: Limits | None = None
    cache_breakpoints: bool | Literal["automatic"] = True
    cache_ttl: Literal["5m", "1h"] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: Mapping[str, Any] | None = None
    tools: Sequence[Mapping[str, Any] | ToolDefinition] = ()

    def __post_init__(self) -> None:
        # Options read back from a stored config are checked like the ones passed: a stored value of the
        # wrong type is a ConfigurationError, never a TypeError deep in the core.
        if self.format not in FORMATS:
            raise ConfigurationError(f"format must be 'openai', 'anthropic' or 'responses', got {self.format!r}")
        if not isinstance(self.strategy, str) and not hasattr(self.strategy, "plan"):
            raise ConfigurationError(f"strategy must be a name or a Strategy, got {type(self.strategy).__name__}")
        if self.strategy_options is not None and not isinstance(self.strategy_options, Mapping):
            raise ConfigurationError(f"strategy_options must be a mapping, got {type(self.strategy_options).__name__}")
        for number in (self.max_tokens, self.max_output_tokens, self.summary_max_tokens):
            if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 0):
                raise ConfigurationError(f"token counts and budgets must be non-negative integers, got {number!r}")
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise ConfigurationError(f"limits must be a convmem.limits.Limits, got {type(self.limits).__name__}")
        if self.on_overflow not in ("truncate", "raise"):
            raise ConfigurationError(f"on_overflow must be 'truncate' or 'raise', got {self.on_overflow!r}")
        if isinstance(self.counter, str) and self.counter not in _COUNTERS:
            raise ConfigurationError(
                f"counter must be a TokenCounter, 'calibrated' or 'approximate', got {self.counter!r}"
            )
        self._check_summarizer()
        self._check_cache()
        for index, sink in enumerate(self.sinks):
            if not isinstance(sink, (EvictionSink, AsyncEvictionSink)):
                raise ConfigurationError(
                    f"sinks[{index}] must have absorb() or aabsorb() (convmem.memory.EvictionSink), "
                    f"got {type(sink).__name__}"
                )
        # Frozen all the way down: a caller's list or dict changed later does not change these options.
        object.__setattr__(self, "strategy_options", MappingProxyType(dict(self.strategy_options or {})))
        object.__setattr__(self, "blocks", tuple(self.blocks))
        object.__setattr__(self, "sinks", tuple(self.sinks))
        if self.cache_breakpoints != "automatic":
            object.__setattr__(self, "cache_breakpoints", bool(self.cache_breakpoints))
        if self.prompt_cache_options is not None:
            object.__setattr__(self, "prompt_cache_options", MappingProxyType(dict(self.prompt_cache_options)))
        object.__setattr__(self, "tools", parse_tools(self.tools))

    def _check_cache(self) -> None:
        if isinstance(self.cache_breakpoints, str) and self.cache_breakpoints != "automatic":
            raise ConfigurationError(
                f"cache_breakpoints must be True, False or 'automatic', got {self.cache_breakpoints!r}"
            )
        if self.cache_ttl not in (None, "5m", "1h"):
            raise ConfigurationError(f"cache_ttl must be '5m', '1h' or None, got {self.cache_ttl!r}")
        if self.prompt_cache_key is not None and not isinstance(self.prompt_cache_key, str):
            raise ConfigurationError(f"prompt_cache_key must be a string, got {type(self.prompt_cache_key).__name__}")
        options = self.prompt_cache_options
        if options is None:
            return
        if not isinstance(options, Mapping):
            raise ConfigurationError(f"prompt_cache_options must be a mapping, got {type(options).__name__}")
        for key, allowed in (("mode", ("implicit", "explicit")), ("ttl", ("30m", "12h"))):
            if key in options and options[key] not in allowed:
                raise ConfigurationError(
                    f"prompt_cache_options.{key} must be {' or '.join(map(repr, allowed))}, got {options[key]!r}"
                )
        stray = sorted(set(options) - {"mode", "ttl"})
        if stray:
            raise ConfigurationError(f"prompt_cache_options takes 'mode' and 'ttl', got {stray[0]!r}")

    def _check_summarizer(self) -> None:
        summarizer = self.summarizer
        if summarizer is None:
            return
        if not (isinstance(self.strategy, str) and self.strategy in FOLDING):
            raise ConfigurationError("a summarizer is only used by the summary_buffer and compaction strategies")
        if not isinstance(summarizer, (Summarizer, AsyncSummarizer)):
            raise ConfigurationError(
                f"summarizer must have summarize() or asummarize(), got {type(summarizer).__name__}"
            )

    def config(self) -> dict[str, Any]:
        """The JSON-able options saved with the session: :data:`SAVED` and the strategy with its plain options."""
        config = {name: getattr(self, name) for name in SAVED if getattr(self, name) is not None}
        if self.limits is not None:
            config["limits"] = limits_config(self.limits)
        strategy = self.strategy
        if isinstance(strategy, str):
            plain = {k: v for k, v in (self.strategy_options or {}).items() if _jsonable(v)}
            config.update(strategy=strategy, strategy_options=plain)
        else:
            attributes = {a: getattr(strategy, a) for a in _STRATEGY_ATTRIBUTES if hasattr(strategy, a)}
            config.update(
                strategy=strategy.name, strategy_options={k: v for k, v in attributes.items() if _jsonable(v)}
            )
        return config


_NAMES = frozenset(f.name for f in fields(Options))


def budget(options: Options, info: ModelInfo | None) -> tuple[int, int]:
    """The budget and the reserved output tokens ``options`` give with the model's registry entry ``info``.

    Raises:
        ConfigurationError: no budget is known, it exceeds the model's window, or the reserve fills it.
    """
    max_tokens, max_output_tokens = options.max_tokens, options.max_output_tokens
    if max_tokens is None and info is None:
        raise ConfigurationError("give a known model or an explicit max_tokens so the budget is known")
    if max_tokens is not None and info is not None and max_tokens > info.context_window:
        raise ConfigurationError(
            f"max_tokens={max_tokens:,} exceeds the context window of {info.name} "
            f"({info.context_window:,} tokens); pass at most {info.context_window:,}"
        )
    total = max_tokens if max_tokens is not None else info.context_window  # type: ignore[union-attr]
    if max_output_tokens is not None:
        reserve = max_output_tokens
    elif max_tokens is None and info is not None:
        # The model's full output allowance, capped so it never takes more than a quarter of the window
        # (gpt-4 allows 8,192 output tokens of an 8,192 window).
        reserve = min(info.max_output_tokens, info.context_window // 4)
    else:
        reserve = 0
    if total <= reserve:
        raise ConfigurationError(f"budget {total} leaves no room after reserving {reserve} output tokens")
    return total, reserve


def cache_controls(options: Options, info: ModelInfo | None) -> CacheControls:
    """The cache controls of ``options`` for the model ``info`` (whether it takes OpenAI's explicit breakpoints)."""
    explicit = info is not None and info.explicit_cache_breakpoints
    return CacheControls(
        options.cache_breakpoints,
        options.cache_ttl,
        explicit,
        options.prompt_cache_key,
        options.prompt_cache_options,
    )


def build_strategy(options: Options) -> Strategy:
    """The strategy ``options`` name (or give), with the summarizer a folding one uses.

    A ``token_budget`` memory with a block that changes every turn evicts to a lower watermark
    (``PER_TURN_LOW_WATERMARK``) unless one is given.

    Raises:
        ConfigurationError: an unknown strategy, or options it does not take (from a stored config too).
    """
    strategy = options.strategy
    if not isinstance(strategy, str):
        return strategy
    keywords = dict(options.strategy_options or {})
    if strategy in FOLDING:
        keywords["summarizer"] = options.summarizer
    if strategy == "token_budget" and "low_watermark" not in keywords and any_per_turn(options.blocks):
        keywords["low_watermark"] = PER_TURN_LOW_WATERMARK
    try:
        return make_strategy(strategy, **keywords)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"strategy {strategy!r}: {exc}") from None


def stored_config(state: SessionState) -> dict[str, Any]:
    """The options a session was saved with (empty for sessions saved before configs were kept)."""
    config = state.stats.get(CONFIG_KEY)
    if not isinstance(config, Mapping):
        return {}
    saved = {k: v for k, v in config.items() if k in _NAMES}  # a foreign key is no option
    if "limits" in saved:
        saved["limits"] = saved_limits(saved["limits"])
    return saved


def initial_state(options: Options) -> SessionState:
    """The state a new, empty session is saved with: its options, so that opening it reuses them."""
    return SessionState(stats={CONFIG_KEY: options.config()})


def open_options(state: SessionState, given: Mapping[str, Any], model: str | None) -> tuple[dict[str, Any], int]:
    """Options for reopening a session: its saved config, ``given`` ones winning; and how many unfolded rows to read.

    Options of another strategy would not apply: giving ``strategy`` without ``strategy_options``
    drops the saved ones. ``model`` (the session's) is used unless one is given.
    """
    merged = stored_config(state)
    if "strategy" in given and "strategy_options" not in given:
        merged.pop("strategy_options", None)
    merged.update(given)
    merged.setdefault("model", model)
    strategy = merged.get("strategy", "token_budget")
    folds = strategy in FOLDING or getattr(strategy, "summarizer", None) is not None
    return merged, UNFOLDED_LIMIT if folds else 0


def _jsonable(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))
