"""Telemetry, opt-in: OpenTelemetry spans and metrics of a memory's operations, and a Prometheus registry.

``Memory(..., telemetry=Telemetry())`` (or :func:`set_default` for every memory made afterwards) traces
each add (``upsert_memory``), the eviction inside it (``update_memory``), each context and recall search
(``search_memory``), each summary, sink and store call, and records the metrics of :data:`METRICS`. A memory
without telemetry imports nothing of OpenTelemetry and pays one ``None`` check per operation. No span,
attribute or metric holds message text unless ``Telemetry(capture_content=True)`` (the recall query only).
:data:`SPANS`, :data:`ATTRIBUTES` and :data:`METRICS` list everything emitted; the docs list the same.

Example::

    from opentelemetry.sdk.trace import TracerProvider
    from convmem import Memory
    from convmem.telemetry import Telemetry

    memory = Memory(model="gpt-4o", telemetry=Telemetry(tracer_provider=TracerProvider()))
"""

from __future__ import annotations

from ._core import Span, Telemetry
from ._names import ATTRIBUTES, HTTP_METRICS, METRICS, SPANS, Metric
from .prometheus import CONTENT_TYPE, MetricsRegistry

__all__ = [
    "ATTRIBUTES",
    "CONTENT_TYPE",
    "HTTP_METRICS",
    "METRICS",
    "SPANS",
    "Metric",
    "MetricsRegistry",
    "Span",
    "Telemetry",
    "default",
    "set_default",
]

_default: Telemetry | None = None


def set_default(telemetry: Telemetry | None) -> Telemetry | None:
    """Give every memory made from now on without ``telemetry=`` this one (None: none); returns the previous."""
    global _default
    previous, _default = _default, telemetry
    return previous


def default() -> Telemetry | None:
    """The telemetry of memories made without ``telemetry=`` (:func:`set_default`), or None."""
    return _default
