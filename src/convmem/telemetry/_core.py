"""``Telemetry``: where a memory's spans and metrics go (OpenTelemetry, an in-process registry, or both).

OpenTelemetry is imported here only when a ``Telemetry`` that uses it is made: a memory without telemetry
imports nothing of it and pays one ``None`` check per operation. Spans are never given an exception's
message (it may quote a message), only its class name (``error.type``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigurationError
from ._names import ERROR_TYPE, METRICS
from .prometheus import MetricsRegistry

__all__ = ["Span", "Telemetry"]

Attributes = Mapping[str, Any]


class Span:
    """One span of convmem's, or nothing when no tracer is configured (metrics only)."""

    __slots__ = ("_span", "_trace")

    def __init__(self, span: Any, trace: Any) -> None:
        self._span, self._trace = span, trace

    def set(self, attributes: Attributes) -> None:
        if self._span is not None:
            self._span.set_attributes(dict(attributes))

    def fail(self, error: BaseException) -> None:
        """Mark the span failed with the error's class name only (its text may quote content)."""
        if self._span is not None:
            self._span.set_attribute(ERROR_TYPE, type(error).__name__)
            self._span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))

    def end(self, end_time: int | None = None) -> None:
        if self._span is not None:
            self._span.end(end_time=end_time)

    def context(self) -> Any:
        """An OpenTelemetry context whose current span is this one (the parent of spans started in it)."""
        return self._trace.set_span_in_context(self._span) if self._span is not None else None

    @contextmanager
    def current(self) -> Iterator[None]:
        """This span as the current one while the block runs, so other instrumentation nests under it."""
        if self._span is None:
            yield
            return
        with self._trace.use_span(self._span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield


class Telemetry:
    """The spans and metrics of the memories given it (``Memory(..., telemetry=Telemetry())``).

    Args:
        tracer_provider: the OpenTelemetry ``TracerProvider`` (default: the global one).
        meter_provider: the OpenTelemetry ``MeterProvider`` (default: the global one).
        otel: send spans and metrics to OpenTelemetry (needs ``pip install 'convmem[otel]'``); False with a
            ``registry`` keeps the metrics in the process only.
        registry: a :class:`MetricsRegistry` that also receives every metric (the service's ``/metrics``).
        capture_content: put the recall query on its span (``gen_ai.memory.query.text``). Off by default:
            no span, attribute or metric then holds any text a user or a model wrote.

    Raises:
        ConfigurationError: OpenTelemetry is not installed, or neither ``otel`` nor a ``registry`` is asked for.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        otel: bool = True,
        registry: MetricsRegistry | None = None,
        capture_content: bool = False,
    ) -> None:
        if not otel and registry is None:
            raise ConfigurationError("Telemetry(otel=False) needs a registry: otherwise it records nothing")
        self.capture_content = bool(capture_content)
        self.registry = registry
        self._tracer: Any = None
        self._trace: Any = None
        self._instruments: dict[str, Any] = {}
        if registry is not None:
            for metric in METRICS:
                registry.define(metric)
        if not otel:
            return
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            raise ConfigurationError("telemetry needs OpenTelemetry: pip install 'convmem[otel]'") from None
        self._trace = trace
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("convmem")
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("convmem")
        for metric in METRICS:
            if metric.kind == "counter":
                self._instruments[metric.name] = meter.create_counter(metric.name, metric.unit, metric.description)
            else:
                self._instruments[metric.name] = meter.create_histogram(
                    metric.name, metric.unit, metric.description, explicit_bucket_boundaries_advisory=metric.buckets
                )

    def __repr__(self) -> str:
        return f"Telemetry(otel={self._tracer is not None}, registry={self.registry is not None})"

    def start(self, name: str, attributes: Attributes, *, parent: Span | None = None, client: bool = False,
              start_time: int | None = None) -> Span:  # fmt: skip
        """Start a span (a child of ``parent``, else of the current span); ``client``: another process serves it."""
        if self._tracer is None:
            return Span(None, None)
        trace = self._trace
        span = self._tracer.start_span(
            name,
            context=parent.context() if parent is not None else None,
            kind=trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL,
            attributes=dict(attributes),
            start_time=start_time,
            record_exception=False,
            set_status_on_exception=False,
        )
        return Span(span, trace)

    def count(self, name: str, value: float, attributes: Attributes) -> None:
        """Add ``value`` to the counter ``name`` (OpenTelemetry and the registry)."""
        if not value:
            return
        instrument = self._instruments.get(name)
        if instrument is not None:
            instrument.add(value, dict(attributes))
        if self.registry is not None:
            self.registry.add(name, value, attributes)

    def observe(self, name: str, value: float, attributes: Attributes) -> None:
        """Record ``value`` in the histogram ``name`` (OpenTelemetry and the registry)."""
        instrument = self._instruments.get(name)
        if instrument is not None:
            instrument.record(value, dict(attributes))
        if self.registry is not None:
            self.registry.observe(name, value, attributes)
