"""The model registry: context windows, prices, and which counter is exact.

:func:`lookup_model` resolves the names people actually pass -- dated
snapshots (``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-20241022``), aliases
(``claude-3-5-sonnet-latest``), provider prefixes (``openai/gpt-4o``,
``anthropic/claude-3.5-sonnet``, ``models/gemini-1.5-pro``), Bedrock and
Vertex ids, OpenAI fine-tunes (``ft:gpt-4o-mini-2024-07-18:org::id``) and
Hugging Face repo names (``meta-llama/Llama-3.1-8B-Instruct``) -- to one
:class:`ModelInfo`. An unknown name raises
:class:`~convmem.errors.UnknownModelError` with the closest known names.

:func:`counter_for` is the one place that decides how a model is counted, and
it never approximates silently:

* OpenAI models get the exact :class:`~convmem.tokens.TiktokenCounter` for
  their vocabulary (shared per process);
* models without an exact offline tokenizer (Claude, Gemini, and open-weight
  models until the user supplies ``tokenizer.json``) get the
  :class:`~convmem.tokens.CalibratedCounter`: ``o200k_base`` times a factor
  learned from the provider's reported usage (``exact=False``, and named so);
* ``counter="calibrated"`` gives that counter to a name the registry does not
  know; ``counter="approximate"`` opts in to the fixed
  :class:`~convmem.tokens.ApproximateCounter`;
* a :class:`~convmem.tokens.TokenCounter` instance is used as given.

Example::

    from convmem.tokens import cost, counter_for, lookup_model

    info = lookup_model("openai/gpt-4o-2024-08-06")   # ModelInfo(name='gpt-4o', ...)
    counter = counter_for("gpt-4o")                  # TiktokenCounter('o200k_base')
    counter_for("claude-sonnet-4-5").name
    # 'calibrated(o200k_base x1.200, 0 usages)'
    cost(info, input_tokens=10_000, output_tokens=500)  # 0.03 (USD)
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigurationError, InvalidMessageError, UnknownModelError
from ._catalog import MODELS
from ._modelinfo import ModelInfo
from .calibrated import calibrated_counter
from .counter import ApproximateCounter, TokenCounter, shared_tiktoken

__all__ = ["ModelInfo", "cost", "counter_for", "known_models", "lookup_model"]


# Suffixes a provider appends to a model name for a snapshot or channel, in the
# forms OpenAI (-2024-08-06, -0613), Anthropic (-20241022, -latest, -v2 on
# Vertex/Bedrock), Google (-001, -preview-05-06, -exp-0827) and Mistral (-2411) use.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|\d{3}|latest|preview(?:-\d{2}-\d{2})?|exp(?:-\d{4})?|v\d+)$")
# Bedrock prefixes the vendor, optionally behind a region: us.anthropic.claude-...
_VENDOR_PREFIX = re.compile(r"^(?:[a-z]{2,4}\.)?(?:anthropic|meta|mistral|deepseek|qwen)\.")


@dataclass(frozen=True, slots=True)
class _Index:
    exact: dict[str, ModelInfo]
    patterns: tuple[tuple[str, ModelInfo], ...]  # longest pattern first


@functools.cache
def _index() -> _Index:
    exact: dict[str, ModelInfo] = {}
    patterns: list[tuple[str, ModelInfo]] = []
    for info in MODELS:
        for key in (info.name, *info.aliases):
            if "*" in key:
                patterns.append((key, info))
            else:
                exact.setdefault(key, info)
    patterns.sort(key=lambda item: len(item[0]), reverse=True)
    return _Index(exact, tuple(patterns))


def known_models() -> tuple[ModelInfo, ...]:
    """Return every model in the registry."""
    return MODELS


def _normalize(model: str) -> str:
    name = model.strip().lower()
    if name.startswith("ft:"):  # ft:<base model>:<org>:<suffix>:<id>
        name = name.split(":")[1]
    name = name.rsplit("/", 1)[-1]  # openai/gpt-4o, meta-llama/Llama-3.1-8B, models/gemini-...
    name = name.split("@", 1)[0]  # Vertex: claude-3-5-sonnet-v2@20241022
    name = name.split(":", 1)[0]  # Ollama tags (llama3.1:8b), Bedrock versions (-v2:0)
    name = _VENDOR_PREFIX.sub("", name)
    if name.startswith("claude"):  # OpenRouter and Vercel spell versions with dots
        name = name.replace(".", "-")
    return name


def _resolve(name: str) -> ModelInfo | None:
    index = _index()
    candidates = [name]
    while (stripped := _SNAPSHOT.sub("", candidates[-1])) != candidates[-1]:
        candidates.append(stripped)
    for candidate in candidates:
        if candidate in index.exact:
            return index.exact[candidate]
    for candidate in candidates:
        for pattern, info in index.patterns:
            if fnmatch.fnmatchcase(candidate, pattern):
                return info
    return None


def lookup_model(model: str) -> ModelInfo:
    """Return the registry entry for ``model``.

    Args:
        model: a model name as any provider or gateway spells it.

    Raises:
        UnknownModelError: no entry matches; ``suggestions`` lists close names.
    """
    name = _normalize(model)
    info = _resolve(name)
    if info is None:
        names = [key for key in _index().exact if "*" not in key]
        raise UnknownModelError(model, difflib.get_close_matches(name, names, n=3, cutoff=0.6))
    return info


def counter_for(
    model: str,
    *,
    counter: TokenCounter | Literal["approximate", "calibrated"] | None = None,
) -> TokenCounter:
    """Return the token counter to use for ``model``.

    Args:
        model: the model name (resolved with :func:`lookup_model`).
        counter: None for the model's default: its exact counter when one exists offline, else
            the :class:`~convmem.tokens.CalibratedCounter` that learns from the provider's reported
            usage; ``"calibrated"`` for that counter for any name, known or not; ``"approximate"``
            for the fixed :class:`~convmem.tokens.ApproximateCounter`; or a counter to use as is.

    Raises:
        UnknownModelError: ``counter`` is None and the model is unknown.
        ConfigurationError: ``counter`` is neither None, ``"approximate"``, ``"calibrated"`` nor a
            TokenCounter.
    """
    if counter is None:
        info = lookup_model(model)
        if info.tokenizer is not None:
            return shared_tiktoken(info.tokenizer)
        return calibrated_counter(info)
    if isinstance(counter, str):
        if counter == "approximate":
            return ApproximateCounter()
        if counter == "calibrated":
            try:
                known: ModelInfo | None = lookup_model(model)
            except UnknownModelError:
                known = None
            return calibrated_counter(known, model)
        raise ConfigurationError(_BAD_COUNTER.format(counter=repr(counter)))
    if isinstance(counter, TokenCounter):
        return counter
    raise ConfigurationError(_BAD_COUNTER.format(counter=type(counter).__name__))


_BAD_COUNTER = "counter must be None, 'calibrated', 'approximate' or a TokenCounter, got {counter}"


def cost(
    model: ModelInfo | str,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int = 0,
    cache_write_input_tokens: int = 0,
    cache_write_1h_input_tokens: int = 0,
) -> float:
    """Return the list price in USD of one request.

    ``input_tokens`` counts *all* prompt tokens, cached ones included (as OpenAI's
    ``prompt_tokens`` and Gemini's ``promptTokenCount`` do; for Anthropic add
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` to ``input_tokens``).
    Cache reads bill at ``cached_input_price_per_mtok``, cache writes at
    ``cache_write_price_per_mtok`` (each the input price when None: OpenAI's models
    before GPT-5.6 write for free), and the part of the writes made to Anthropic's
    1-hour cache at ``cache_write_1h_price_per_mtok`` (the write price when None).
    Batch discounts and tool fees are not modelled. Prompts above
    ``long_context_threshold`` are billed entirely at the long-context prices.

    Args:
        model: a :class:`ModelInfo` or a model name.
        input_tokens: prompt tokens, cached ones included.
        output_tokens: completion tokens, reasoning tokens included.
        cached_input_tokens: the part of ``input_tokens`` served from the prompt cache.
        cache_write_input_tokens: the part of ``input_tokens`` written to the prompt cache.
        cache_write_1h_input_tokens: the part of ``cache_write_input_tokens`` written to Anthropic's
            1-hour cache.

    Raises:
        InvalidMessageError: a negative count, more cached than input tokens, or more 1-hour writes
            than writes (a ValueError too).
        ConfigurationError: the model has no list price (open weights).
        UnknownModelError: ``model`` is a name the registry does not know.
    """
    info = lookup_model(model) if isinstance(model, str) else model
    if min(input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens, cache_write_1h_input_tokens) < 0:
        raise InvalidMessageError("token counts must not be negative", field="usage")
    if cache_write_1h_input_tokens > cache_write_input_tokens:
        raise InvalidMessageError(
            f"cache_write_1h_input_tokens ({cache_write_1h_input_tokens}) exceeds cache_write_input_tokens "
            f"({cache_write_input_tokens})",
            field="usage",
        )
    if cached_input_tokens + cache_write_input_tokens > input_tokens:
        raise InvalidMessageError(
            f"cached_input_tokens ({cached_input_tokens}) plus cache_write_input_tokens "
            f"({cache_write_input_tokens}) exceeds input_tokens ({input_tokens})",
            field="usage",
        )
    price_in, price_out = info.input_price_per_mtok, info.output_price_per_mtok
    if price_in is None or price_out is None:
        raise ConfigurationError(
            f"{info.name} has no list price (each host prices it); pass a ModelInfo with your prices"
        )
    price_cached = info.cached_input_price_per_mtok if info.cached_input_price_per_mtok is not None else price_in
    price_write = info.cache_write_price_per_mtok if info.cache_write_price_per_mtok is not None else price_in
    price_1h = info.cache_write_1h_price_per_mtok if info.cache_write_1h_price_per_mtok is not None else price_write
    threshold = info.long_context_threshold
    if threshold is not None and input_tokens > threshold:
        scale = (info.long_input_price_per_mtok or price_in) / price_in if price_in else 1.0
        price_in, price_cached = price_in * scale, price_cached * scale
        price_write, price_1h = price_write * scale, price_1h * scale
        price_out = info.long_output_price_per_mtok or price_out
    fresh = input_tokens - cached_input_tokens - cache_write_input_tokens
    writes_5m = cache_write_input_tokens - cache_write_1h_input_tokens
    billed_in = fresh * price_in + cached_input_tokens * price_cached
    billed_in += writes_5m * price_write + cache_write_1h_input_tokens * price_1h
    return (billed_in + output_tokens * price_out) / 1_000_000
