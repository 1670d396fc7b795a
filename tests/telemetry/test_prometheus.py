"""``MetricsRegistry.render`` is the Prometheus text exposition of what was recorded, for any labels and values."""

from __future__ import annotations

import math
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import ConfigurationError
from convmem.telemetry import Metric, MetricsRegistry

HISTOGRAM = Metric("t.latency", "histogram", "s", "a latency\nwith a second line", (0.01, 0.1, 1.0))
COUNTER = Metric("t.items", "counter", "{item}", "items")
SAMPLE = re.compile(r'^([a-z_]+)(?:\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.rstrip("\n").split("\n"):  # the format separates lines by \n only
        if line.startswith("#"):
            assert re.match(r"^# (HELP [a-z_]+ [^\n]*|TYPE [a-z_]+ (counter|histogram))$", line), line
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = frozenset((k, unescape(v)) for k, v in LABEL.findall(match.group(2) or ""))
        key = (match.group(1), labels)
        assert key not in out, f"a repeated sample: {line}"
        out[key] = float(match.group(3))
    return out


labels = st.dictionaries(st.sampled_from(["route", "store.kind"]), st.text(max_size=8), max_size=2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(labels, st.floats(0, 5, allow_nan=False)), max_size=30), st.lists(labels, max_size=10))
def test_the_exposition_holds_every_observation_under_its_labels(
    observations: list[tuple[dict[str, str], float]], counted: list[dict[str, str]]
) -> None:
    registry = MetricsRegistry([HISTOGRAM, COUNTER])
    for attributes, value in observations:
        registry.observe("t.latency", value, attributes)
    for attributes in counted:
        registry.add("t.items", 2, attributes)
    samples = parse(registry.render())
    series = {frozenset((k.replace(".", "_"), v) for k, v in a.items()) for a, _ in observations}
    for labelset in series:
        values = [v for a, v in observations if frozenset((k.replace(".", "_"), x) for k, x in a.items()) == labelset]
        assert samples[("t_latency_seconds_count", labelset)] == len(values)
        assert samples[("t_latency_seconds_sum", labelset)] == pytest.approx(math.fsum(values))
        buckets = [
            samples[("t_latency_seconds_bucket", labelset | {("le", le)})] for le in ("0.01", "0.1", "1", "+Inf")
        ]
        assert buckets == sorted(buckets)  # cumulative
        assert buckets == [sum(v <= bound for v in values) for bound in (0.01, 0.1, 1.0, math.inf)]
    for labelset in {frozenset((k.replace(".", "_"), v) for k, v in a.items()) for a in counted}:
        expected = 2 * sum(frozenset((k.replace(".", "_"), v) for k, v in a.items()) == labelset for a in counted)
        assert samples[("t_items_total", labelset)] == expected
    assert registry.value("t.items") == 2 * len(counted)
    assert registry.value("t.latency") == len(observations)


def test_help_and_types_come_first_even_without_samples() -> None:
    text = MetricsRegistry([HISTOGRAM, COUNTER]).render()
    assert text.splitlines() == [
        "# HELP t_items_total items",
        "# TYPE t_items_total counter",
        "# HELP t_latency_seconds a latency\\nwith a second line",
        "# TYPE t_latency_seconds histogram",
    ]


def test_a_counter_only_grows_and_a_kind_is_one_of_two() -> None:
    registry = MetricsRegistry([COUNTER])
    with pytest.raises(ConfigurationError, match="only grows"):
        registry.add("t.items", -1, {})
    with pytest.raises(ConfigurationError, match="counter' or 'histogram"):
        registry.define(Metric("t.gauge", "gauge", "1", "no"))


def test_threads_lose_no_count() -> None:
    registry = MetricsRegistry([COUNTER, HISTOGRAM])

    def work() -> None:
        for _ in range(2000):
            registry.add("t.items", 1, {"route": "/x"})
            registry.observe("t.latency", 0.05, {})

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert registry.value("t.items") == 8000
    assert registry.value("t.latency") == 8000
