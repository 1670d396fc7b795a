"""Reading a provider's usage object, whatever its shape.

OpenAI Chat Completions reports ``prompt_tokens`` / ``completion_tokens`` and
``prompt_tokens_details.cached_tokens`` (reads) and ``.cache_write_tokens``
(writes, which the GPT-5.6 family and later bill); the Responses API
``input_tokens`` / ``output_tokens`` and the same two under
``input_tokens_details``; both include reads and writes in the prompt's tokens.
Anthropic reports ``input_tokens`` / ``output_tokens`` plus
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` (which it does
*not* include in ``input_tokens``), the writes split by lifetime in
``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``
(the 1-hour ones bill at twice the input price), and with server compaction
``iterations``, whose ``compaction`` entries the top-level counts leave out (they
are added: the compaction is billed). SDK objects and plain dicts are both accepted.

Example::

    usage = parse_usage(response.usage)
    usage.input_tokens, usage.output_tokens, usage.cached_input_tokens
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidMessageError
from .limits import MAX_INT, check_int

__all__ = ["USAGE_KEYS", "ModelUsage", "Stats", "Usage", "fresh_counts", "parse_usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call; ``input_tokens`` includes cached ones and cache writes.

    ``cached_input_tokens`` were read from the prompt cache (billed at the cached price);
    ``cache_write_input_tokens`` were written to it (Anthropic and OpenAI's GPT-5.6 family and later
    bill them above the input price), ``cache_write_1h_input_tokens`` of them to Anthropic's
    1-hour cache (billed higher still).
    """

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    cache_write_1h_input_tokens: int = 0


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _int(obj: Any, key: str) -> int:
    value = _get(obj, key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = type(value).__name__ if isinstance(value, int | float) and abs(value) > MAX_INT else repr(value)
        raise InvalidMessageError(f"must be a non-negative integer, got {shown}", field=f"usage.{key}")
    return check_int(value, f"usage.{key}")  # within what every store and JSON reader keeps exactly


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """The usage of one call convmem made itself (a summary, an extraction), with the model that served it.

    Summarizers and extractors report these on their result (and on the
    ``LLMError`` they raise) as ``.usage``; the memory adds them to its stats and
    prices them with ``model``'s list price when the registry knows one.
    """

    model: str
    usage: Usage


def parse_usage(usage: Any) -> Usage:
    """Normalize an OpenAI, Responses or Anthropic usage object (or dict, or a response holding one)."""
    if usage is None:
        raise InvalidMessageError("no usage given", field="usage")
    if isinstance(usage, Usage):
        return usage
    nested = _get(usage, "usage")
    if nested is not None:
        usage = nested
    if _get(usage, "prompt_tokens") is not None:
        return _openai(usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
    if _get(usage, "input_tokens") is None:
        raise InvalidMessageError("has neither prompt_tokens nor input_tokens", field="usage")
    compacted = _compaction_usage(usage)
    cache_read = _int(usage, "cache_read_input_tokens") + compacted.cached_input_tokens
    split = _get(usage, "cache_creation")
    short = _int(split, "ephemeral_5m_input_tokens") if split is not None else 0
    long = _int(split, "ephemeral_1h_input_tokens") if split is not None else 0
    cache_write = _int(usage, "cache_creation_input_tokens") or short + long
    if long > cache_write:
        raise InvalidMessageError(
            f"{long} 1-hour cache writes of {cache_write} cache writes", field="usage.cache_creation"
        )
    cache_write += compacted.cache_write_input_tokens
    if cache_read or cache_write or compacted.input_tokens:  # Anthropic: cache tokens come on top of input_tokens
        total = _int(usage, "input_tokens") + compacted.input_tokens + cache_read + cache_write
        output = _int(usage, "output_tokens") + compacted.output_tokens
        return Usage(total, output, cache_read, cache_write, long)
    return _openai(usage, "input_tokens", "output_tokens", "input_tokens_details")


def _openai(usage: Any, prompt: str, completion: str, details_key: str) -> Usage:
    """Chat and Responses usage: reads and writes are parts of the prompt's tokens."""
    details = _get(usage, details_key)
    cached = _int(details, "cached_tokens") if details is not None else 0
    written = _int(details, "cache_write_tokens") if details is not None else 0
    total = _int(usage, prompt)
    if cached + written > total:
        raise InvalidMessageError(
            f"{cached} cached and {written} cache-write tokens exceed the {total} prompt tokens",
            field=f"usage.{details_key}",
        )
    return Usage(total, _int(usage, completion), cached, written)


def _compaction_usage(usage: Any) -> Usage:
    """What Anthropic's compaction ``iterations`` used beyond the top-level counts (which leave them out)."""
    iterations = _get(usage, "iterations")
    if not isinstance(iterations, list):
        return Usage(0, 0)
    compactions = [it for it in iterations if _get(it, "type") == "compaction"]
    return Usage(
        sum(_int(it, "input_tokens") for it in compactions),
        sum(_int(it, "output_tokens") for it in compactions),
        sum(_int(it, "cache_read_input_tokens") for it in compactions),
        sum(_int(it, "cache_creation_input_tokens") for it in compactions),
    )


@dataclass(frozen=True, slots=True)
class Stats:
    """Running figures of a memory (see ``Memory.stats``)."""

    messages: int
    window_messages: int
    context_tokens: int  # what context().tokens reports with no input and no blocks (see Memory.stats)
    archived: int
    summarized: int
    summaries: int
    summary_failures: int
    tokens_saved: int
    evicted_tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    warnings: tuple[str, ...] = field(default=())
    cached_input_tokens: int = 0  # input tokens the provider read from its prompt cache
    cache_write_tokens: int = 0  # input tokens written to the prompt cache (Anthropic, OpenAI's GPT-5.6 and later)
    cache_savings_usd: float = 0.0  # the cost at full input price minus the cost billed (writes may cost)
    cache_write_1h_tokens: int = 0  # the part of cache_write_tokens written to Anthropic's 1-hour cache


#: The running counts that come from providers' usage (a memory keeps what it has not saved yet apart).
USAGE_KEYS: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "cost_usd",
    "cache_savings_usd",
)


def fresh_counts() -> dict[str, Any]:
    """The running counts of a new session (what ``Stats`` is built from, saved with the state)."""
    return {
        "messages": 0,
        "evicted_messages": 0,
        "evicted_tokens": 0,
        "summarized_messages": 0,
        "summarized_tokens": 0,
        "summaries": 0,
        "summary_failures": 0,
        "first_evicted": None,
        "last_seq": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cache_write_tokens": 0,
        "cache_write_1h_tokens": 0,
        "cost_usd": 0.0,
        "cache_savings_usd": 0.0,
        "warnings": [],
    }
