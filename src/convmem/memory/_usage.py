"""What a memory's provider calls cost: usage into the counts, priced, and what a calibrated counter learns.

What comes in: a parsed :class:`~convmem.usage.Usage` (``record_usage``,
``add_response``), a summarizer's result or error carrying ``.usage``
(``ModelUsage`` items, :func:`charge`), and each context built (:func:`noted`).
What happens: the tokens go into the core's counts; the cost is priced at the
registry's list prices (cached reads and cache writes at their own, the
1-hour cache writes at theirs), and the
saving against the uncached price is kept; a calibrated counter learns the
prompt tokens reported for the last context, once per context. What goes out:
nothing is written here; the counts are saved with the next state write
(:func:`convmem.memory._flows.save`), the calibration's snapshot with them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..policy.context import Context
from ..policy.units import Unit
from ..tokens import ModelInfo, cost, lookup_model
from ..usage import ModelUsage, Usage, parse_usage
from ._core import MemoryCore

__all__ = ["CALIBRATION_KEY", "add_usage", "adopt", "charge", "learn", "noted"]

CALIBRATION_KEY = "calibration"  # what a calibrated counter learned, saved with the session's stats


def noted(core: MemoryCore, context: Context) -> Context:
    """Keep the context's warnings in the stats, and what a calibrated counter predicted for it."""
    for warning in context.warnings:
        core.warn(warning, once=True)
    if core.calibration is not None:
        core.prediction = (context.tokens, core.calibration.factor)
    return context


def learn(core: MemoryCore, parsed: Usage) -> None:
    """Teach a calibrated counter the prompt tokens reported for the last context (once per context)."""
    prediction, core.prediction = core.prediction, None
    calibration = core.calibration
    if prediction is None or calibration is None or not parsed.input_tokens:
        return
    if calibration.observe(prediction[0], prediction[1], parsed.input_tokens):
        core.counts[CALIBRATION_KEY] = calibration.snapshot()


def add_usage(core: MemoryCore, parsed: Usage, model: str | None = None) -> list[Unit]:
    """Count ``parsed`` in the stats; evicts nothing (the shape :func:`convmem.memory._flows.save` expects).

    ``model`` is the model that served the call when it is not the memory's (a summarizer's).
    """
    counts = core.counts
    counts["input_tokens"] += parsed.input_tokens
    counts["output_tokens"] += parsed.output_tokens
    counts["cached_input_tokens"] += parsed.cached_input_tokens
    counts["cache_write_tokens"] = counts.get("cache_write_tokens", 0) + parsed.cache_write_input_tokens
    counts["cache_write_1h_tokens"] = counts.get("cache_write_1h_tokens", 0) + parsed.cache_write_1h_input_tokens
    info = core.info if model is None else _priced(model)
    if info is not None and info.input_price_per_mtok is not None:  # open-weight models have no list price
        tokens = (parsed.input_tokens, parsed.output_tokens)
        writes = (parsed.cache_write_input_tokens, parsed.cache_write_1h_input_tokens)
        billed = cost(info, *tokens, parsed.cached_input_tokens, *writes)
        counts["cost_usd"] += billed
        counts["cache_savings_usd"] = counts.get("cache_savings_usd", 0.0) + cost(info, *tokens) - billed
    return []


def charge(core: MemoryCore, outcome: object) -> None:
    """Add the usage a summarizer reports on its result or its error (``.usage``: ModelUsage items)."""
    for item in getattr(outcome, "usage", None) or ():
        if isinstance(item, ModelUsage):  # priced as its own model's; it teaches the memory's counter nothing
            add_usage(core, parse_usage(item.usage), item.model)


def adopt(core: MemoryCore) -> None:
    """After opening a session: a calibrated counter that has learned nothing yet takes what the session saved."""
    snapshot = core.counts.get(CALIBRATION_KEY)
    if core.calibration is not None and isinstance(snapshot, Mapping):
        core.calibration.adopt(snapshot)


def _priced(model: str) -> ModelInfo | None:
    try:
        return lookup_model(model)
    except KeyError:  # a local or unlisted summarizer model: its tokens count, its cost is unknown
        return None
