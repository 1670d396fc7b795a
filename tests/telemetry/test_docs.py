"""The docs list every span, attribute and metric the telemetry emits (read from its one table)."""

from __future__ import annotations

import re
from pathlib import Path

from convmem.telemetry import ATTRIBUTES, HTTP_METRICS, METRICS, SPANS

ROOT = Path(__file__).resolve().parents[2]
DESIGN = (ROOT / "docs" / "design.md").read_text()
README = (ROOT / "README.md").read_text()
SERVICE = (ROOT / "docs" / "service.md").read_text()


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"^#{2,3} ", text[start + len(heading) :], re.M)
    return text[start : start + len(heading) + following.start()] if following else text[start:]


def test_the_design_doc_lists_every_span_attribute_and_metric_with_its_prometheus_name() -> None:
    telemetry = section(DESIGN, "## 14. Telemetry")
    for name in (*SPANS, *ATTRIBUTES):
        assert f"| `{name}` |" in telemetry, name
    for metric in (*METRICS, *HTTP_METRICS):
        assert f"| `{metric.name}` | `{metric.prometheus}` |" in telemetry, metric.name


def test_the_readme_and_the_service_doc_list_every_span_and_metric() -> None:
    readme = section(README, "### Telemetry")
    service = section(SERVICE, "## Observability")
    spans = list(SPANS)
    for name in spans:
        assert f"`{name}`" in readme, name
        assert f"`{name}`" in service, name
    for metric in METRICS:
        assert f"`{metric.name}`" in readme, metric.name
        assert f"`{metric.name}`" in service, metric.name
        assert f"`{metric.prometheus}" in service, metric.prometheus
    for metric in HTTP_METRICS:
        assert f"`{metric.name}`" in readme, metric.name
        assert f"`{metric.prometheus}`" in service, metric.prometheus
