"""``MetricsRegistry``: counters and histograms kept in the process, written in Prometheus' text format.

The service's ``/metrics`` endpoint serves :meth:`MetricsRegistry.render`; it needs no package (the text
exposition format 0.0.4 is a few lines per sample). Labels are the metrics' attributes with dots turned to
underscores; they are low-cardinality by construction (store kind, operation, model, format, route, status),
never a session, user or tenant.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Mapping

from ..errors import ConfigurationError
from ._names import Metric

__all__ = ["CONTENT_TYPE", "MetricsRegistry"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Labels = tuple[tuple[str, str], ...]


class MetricsRegistry:
    """Thread-safe in-process metrics: ``add`` to a counter, ``observe`` into a histogram, ``render`` them all."""

    def __init__(self, metrics: Iterable[Metric] = ()) -> None:
        self._lock = threading.Lock()
        self._metrics: dict[str, Metric] = {}
        self._counters: dict[str, dict[Labels, float]] = {}
        # per label set: the bucket counts (not cumulative), the sum and the count
        self._histograms: dict[str, dict[Labels, tuple[list[int], float, int]]] = {}
        self._labels: dict[tuple[tuple[str, object], ...], Labels] = {}  # attributes -> labels: a turn's are few
        for metric in metrics:
            self.define(metric)

    def define(self, metric: Metric) -> None:
        """Declare ``metric`` (rendered with its HELP and TYPE even before its first sample); idempotent."""
        if metric.kind not in ("counter", "histogram"):
            raise ConfigurationError(f"metric kind must be 'counter' or 'histogram', got {metric.kind!r}")
        with self._lock:
            if metric.name in self._metrics:
                return
            self._metrics[metric.name] = metric
            if metric.kind == "counter":
                self._counters[metric.name] = {}
            else:
                self._histograms[metric.name] = {}

    def add(self, name: str, value: float, attributes: Mapping[str, object]) -> None:
        """Add ``value`` (>= 0) to the counter ``name`` under ``attributes``."""
        if value < 0:
            raise ConfigurationError(f"a counter only grows: {name} got {value}")
        labels = self._labelled(attributes)
        with self._lock:
            series = self._counters[name]
            series[labels] = series.get(labels, 0.0) + value

    def observe(self, name: str, value: float, attributes: Mapping[str, object]) -> None:
        """Count ``value`` into the histogram ``name`` under ``attributes``."""
        labels = self._labelled(attributes)
        buckets = self._metrics[name].buckets
        index = bisect.bisect_left(buckets, value)  # the first bound >= value (len(buckets): +Inf)
        with self._lock:
            series = self._histograms[name]
            counts, total, count = series.get(labels) or ([0] * (len(buckets) + 1), 0.0, 0)
            counts[index] += 1
            series[labels] = (counts, total + value, count + 1)

    def _labelled(self, attributes: Mapping[str, object]) -> Labels:
        key = tuple(attributes.items())
        labels = self._labels.get(key)
        if labels is None:
            labels = _labels(attributes)
            if len(self._labels) < 4096:  # label sets are few by construction; never an unbounded cache
                self._labels[key] = labels
        return labels

    def value(self, name: str, attributes: Mapping[str, object] | None = None) -> float:
        """A counter's value, or a histogram's count, summed over the label sets that hold ``attributes``."""
        wanted = set(_labels(attributes or {}))
        with self._lock:
            if name in self._counters:
                return sum(v for labels, v in self._counters[name].items() if wanted <= set(labels))
            return float(sum(c for labels, (_, _, c) in self._histograms[name].items() if wanted <= set(labels)))

    def render(self) -> str:
        """Every metric in the Prometheus text exposition format (``# HELP``, ``# TYPE``, the samples)."""
        lines: list[str] = []
        with self._lock:
            for name, metric in sorted(self._metrics.items()):
                family = metric.prometheus
                lines.append(f"# HELP {family} {_help(metric.description)}")
                lines.append(f"# TYPE {family} {metric.kind}")
                if metric.kind == "counter":
                    for labels, value in sorted(self._counters[name].items()):
                        lines.append(f"{family}{_render_labels(labels)} {_number(value)}")
                    continue
                for labels, (counts, total, count) in sorted(self._histograms[name].items()):
                    running = 0
                    for bound, n in zip((*metric.buckets, math.inf), counts, strict=True):
                        running += n
                        le = (("le", "+Inf" if bound == math.inf else _number(bound)),)
                        lines.append(f"{family}_bucket{_render_labels(labels + le)} {running}")
                    lines.append(f"{family}_sum{_render_labels(labels)} {_number(total)}")
                    lines.append(f"{family}_count{_render_labels(labels)} {count}")
        return "\n".join(lines) + "\n"


def _labels(attributes: Mapping[str, object]) -> Labels:
    return tuple(sorted((key.replace(".", "_"), _text(value)) for key, value in attributes.items()))


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _render_labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))
