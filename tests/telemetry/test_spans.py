"""The spans and metrics of a memory, received by OpenTelemetry's in-memory exporter and reader.

A scripted conversation (a summary_buffer memory with recall, so it evicts, folds and searches) gives the
documented spans, parented as documented, with the documented attributes; no span, attribute or metric
holds a canary that every message, the summary and the query carry, unless ``capture_content`` asks for
the query; failures are spans in error with the class name only; a memory without telemetry imports nothing
of OpenTelemetry.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from convmem import AsyncMemory, Memory, Message
from convmem.errors import ConfigurationError, StoreError
from convmem.stores.memory import MemoryStore
from convmem.telemetry import ATTRIBUTES, METRICS, SPANS, MetricsRegistry, Telemetry, default, set_default

CANARY = "zq-canary-7731"
SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass
class Otel:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self) -> dict[str, list[Any]]:
        """Every metric's data points, by name."""
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out

    def total(self, name: str, **wanted: Any) -> float:
        """A counter's sum, or a histogram's count, over the points whose attributes hold ``wanted``."""
        found = 0.0
        for point in self.points().get(name, []):
            if all(point.attributes.get(k) == v for k, v in wanted.items()):
                found += point.value if hasattr(point, "value") else point.count
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(exporter, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def conversation(memory: Memory, turns: int = 24) -> None:
    for i in range(turns):
        memory.add({"role": "user", "content": f"{CANARY} question {i} about zebras and their stripes, lions too"})
        memory.add({"role": "assistant", "content": f"{CANARY} answer {i}: zebras graze, lions hunt at dusk"})


def a_memory(telemetry: Telemetry, **options: Any) -> Memory:
    settings: dict[str, Any] = {
        "model": "gpt-4o",
        "max_tokens": 700,
        "max_output_tokens": 100,
        "strategy": "summary_buffer",
        "recall": True,
        "telemetry": telemetry,
    }
    return Memory(**{**settings, **options})


def by_id(spans: Sequence[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in spans}


def parent_of(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return spans.get(span.parent.span_id) if span.parent is not None else None


def documented(name: str) -> bool:
    return name in SPANS or (name.startswith("convmem.store.") and "convmem.store.<operation>" in SPANS)


def test_a_scripted_conversation_gives_the_documented_spans_and_attributes(otel: Otel) -> None:
    memory = a_memory(otel.telemetry())
    conversation(memory)
    context = memory.context(f"{CANARY} what did we say about zebras?")
    again = memory.context(f"{CANARY} what did we say about zebras?")  # the recall block reuses its search
    spans = otel.finished()
    ids = by_id(spans)
    names = {span.name for span in spans}
    assert all(documented(name) for name in names), names
    # every documented span is emitted by this conversation (the store spans by their operation)
    assert {"upsert_memory", "update_memory", "search_memory", "convmem.summarize", "convmem.absorb"} <= names
    assert {"convmem.store.append", "convmem.store.save_state"} <= names
    for span in spans:
        assert set(span.attributes or {}) <= set(ATTRIBUTES), span.name

    adds = [s for s in spans if s.name == "upsert_memory"]
    assert len(adds) == 48
    assert all(s.attributes["gen_ai.operation.name"] == "upsert_memory" for s in adds)
    assert all(s.attributes["gen_ai.conversation.id"] == memory.session_id for s in adds)
    assert all(s.attributes["convmem.store.kind"] == "memory" for s in adds)
    assert all(s.attributes["gen_ai.memory.record.count"] == 1 for s in adds)

    evictions = [s for s in spans if s.name == "update_memory"]
    assert evictions
    for eviction in evictions:
        parent = parent_of(eviction, ids)
        assert parent is not None
        assert parent.name == "upsert_memory"
        assert eviction.attributes["convmem.operation"] == "evict"
        assert eviction.attributes["gen_ai.memory.record.count"] == eviction.attributes["convmem.evicted.messages"] > 0
        assert parent.attributes["convmem.evicted.tokens"] == eviction.attributes["convmem.evicted.tokens"] > 0
    # what the spans say was evicted is what the memory counts
    stats = memory.stats()
    assert sum(s.attributes["convmem.evicted.messages"] for s in adds) == stats.archived + stats.summarized
    assert sum(s.attributes["convmem.evicted.tokens"] for s in adds) == stats.evicted_tokens

    summaries = [s for s in spans if s.name == "convmem.summarize"]
    assert len(summaries) == stats.summaries
    assert all(parent_of(s, ids).name == "update_memory" for s in summaries)  # type: ignore[union-attr]
    sinks = [s for s in spans if s.name == "convmem.absorb"]
    assert {s.attributes["convmem.sink"] for s in sinks} == {"RecallIndex"}
    appends = [s for s in spans if s.name == "convmem.store.append"]
    # an append that stores an eviction is the eviction's; the others are the add's
    assert {parent_of(s, ids).name for s in appends} == {"upsert_memory", "update_memory"}  # type: ignore[union-attr]
    assert all(parent_of(s, ids).attributes["gen_ai.conversation.id"] == memory.session_id for s in appends)  # type: ignore[union-attr]
    assert all(s.kind is SpanKind.INTERNAL for s in appends)  # the in-process store

    contexts = [s for s in spans if s.name == "search_memory" and s.attributes["convmem.operation"] == "context"]
    recalls = [s for s in spans if s.name == "search_memory" and s.attributes["convmem.operation"] == "recall"]
    assert len(contexts) == len(recalls) == 2
    first, second = contexts
    account = context.account
    assert first.attributes["convmem.tokens.total"] == context.tokens
    assert first.attributes["convmem.tokens.window"] == account.window
    assert first.attributes["convmem.tokens.summary"] == account.summary > 0
    assert first.attributes["convmem.tokens.blocks"] == sum(account.blocks.values()) > 0
    assert first.attributes["convmem.tokens.budget"] == 700
    assert first.attributes["convmem.left_out.tokens"] == sum(e.tokens for e in context.left_out) > 0
    assert first.attributes["gen_ai.memory.record.count"] == len(context.messages)
    assert second.attributes["convmem.tokens.reused"] == again.account.reused > 0  # the prompt cache's reuse
    for recall, ctx in zip(recalls, contexts, strict=True):
        assert parent_of(recall, ids) is ctx
        assert recall.attributes["gen_ai.memory.store.id"] == "recall"
        assert recall.attributes["gen_ai.memory.record.count"] == len(memory._core.blocks[0].last_hits) > 0
    assert [r.attributes["convmem.recall.reused"] for r in recalls] == [False, True]

    assert otel.total("convmem.evictions") == stats.archived + stats.summarized
    assert otel.total("convmem.evicted.tokens") == stats.evicted_tokens
    assert otel.total("convmem.context.tokens", **{"convmem.format": "openai", "gen_ai.request.model": "gpt-4o"}) == 2
    assert otel.total("convmem.recall.duration") == 1  # the reused render searched nothing
    assert otel.total("convmem.store.duration", **{"convmem.store.operation": "append"}) == 48
    assert otel.total("gen_ai.client.operation.duration", **{"gen_ai.operation.name": "upsert_memory"}) == 48
    assert otel.total("convmem.summary.failures") == 0


def strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def everything_said(otel: Otel) -> list[str]:
    """Every text the exporter and the reader received: names, attribute values, events, statuses."""
    out: list[str] = []
    for span in otel.finished():
        out.append(span.name)
        for key, value in (span.attributes or {}).items():
            out += [key, *strings(value)]
        for event in span.events:
            out += [event.name, *(v for value in (event.attributes or {}).values() for v in strings(value))]
        out.append(span.status.description or "")
    for name, points in otel.points().items():
        out.append(name)
        for point in points:
            out += [v for value in point.attributes.values() for v in strings(value)]
    return out


def test_no_span_or_metric_holds_message_text_by_default(otel: Otel) -> None:
    memory = a_memory(otel.telemetry())
    conversation(memory)
    memory.context(f"{CANARY} zebras?")
    assert memory._core.summary is not None
    assert CANARY in memory._core.summary.text  # the canary was summarized
    said = everything_said(otel)
    assert len(said) > 500
    assert not [text for text in said if CANARY in text]


def test_capture_content_puts_the_recall_query_on_its_span_and_nothing_else(otel: Otel) -> None:
    memory = a_memory(otel.telemetry(capture_content=True))
    conversation(memory, turns=12)
    memory.context(f"{CANARY} zebras?")
    holding = [
        (span.name, key)
        for span in otel.finished()
        for key, value in (span.attributes or {}).items()
        if CANARY in str(value)
    ]
    assert holding == [("search_memory", "gen_ai.memory.query.text")]


class FailingSummarizer:
    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        raise RuntimeError(f"the model refused: {CANARY} {messages[0].text}")


def test_a_failed_summary_is_a_span_in_error_and_a_counted_failure(otel: Otel) -> None:
    memory = a_memory(otel.telemetry(), summarizer=FailingSummarizer(), recall=False)
    conversation(memory)
    failures = memory.stats().summary_failures
    assert failures > 0
    summaries = [s for s in otel.finished() if s.name == "convmem.summarize"]
    assert len(summaries) == failures
    assert all(s.status.status_code is StatusCode.ERROR for s in summaries)
    assert all(s.attributes["error.type"] == "RuntimeError" for s in summaries)
    assert otel.total("convmem.summary.failures") == failures
    adds = [s for s in otel.finished() if s.name == "upsert_memory"]
    assert sum(s.attributes["convmem.summary.failures"] for s in adds) == failures
    assert all(s.status.status_code is not StatusCode.ERROR for s in adds)  # the add itself succeeded
    assert not [text for text in everything_said(otel) if CANARY in text]


class RefusingStore(MemoryStore):
    def append(self, request: Any) -> Any:
        raise StoreError(f"disk full while writing {CANARY}")


def test_a_failed_store_call_fails_its_span_and_the_add_with_the_class_name_only(otel: Otel) -> None:
    memory = a_memory(otel.telemetry(), store=RefusingStore(), recall=False)
    with pytest.raises(StoreError):
        memory.add({"role": "user", "content": f"{CANARY} hello"})
    spans = {s.name: s for s in otel.finished()}
    for name in ("convmem.store.append", "upsert_memory"):
        assert spans[name].status.status_code is StatusCode.ERROR
        assert spans[name].attributes["error.type"] == "StoreError"
    assert otel.total("convmem.store.duration", **{"error.type": "StoreError"}) == 1
    assert otel.total("gen_ai.client.operation.duration", **{"error.type": "StoreError"}) == 1
    assert not [text for text in everything_said(otel) if CANARY in text]


async def test_the_async_twin_gives_the_same_spans(otel: Otel) -> None:
    sync = a_memory(otel.telemetry(), recall=False)
    conversation(sync, turns=10)
    sync.context("zebras?")
    expected = sorted(s.name for s in otel.finished())
    otel.spans.clear()
    memory = AsyncMemory(
        model="gpt-4o", max_tokens=700, max_output_tokens=100, strategy="summary_buffer", telemetry=otel.telemetry()
    )
    for i in range(10):
        await memory.add(
            {"role": "user", "content": f"{CANARY} question {i} about zebras and their stripes, lions too"}
        )
        await memory.add({"role": "assistant", "content": f"{CANARY} answer {i}: zebras graze, lions hunt at dusk"})
    await memory.context("zebras?")
    assert sorted(s.name for s in otel.finished()) == expected
    ids = by_id(otel.finished())
    assert all(parent_of(s, ids).name == "update_memory" for s in otel.finished() if s.name == "convmem.summarize")  # type: ignore[union-attr]


def test_the_process_default_goes_to_memories_made_after_it(otel: Otel) -> None:
    telemetry = otel.telemetry()
    before = Memory(model="gpt-4o")
    previous = set_default(telemetry)
    try:
        assert default() is telemetry
        after = Memory(model="gpt-4o")
        own = Memory(model="gpt-4o", telemetry=otel.telemetry())
    finally:
        set_default(previous)
    before.add({"role": "user", "content": "not traced"})
    assert otel.finished() == []
    after.add({"role": "user", "content": "traced"})
    own.add({"role": "user", "content": "traced too"})
    assert [s.name for s in otel.finished()].count("upsert_memory") == 2


def test_metrics_only_telemetry_fills_a_registry_and_needs_one() -> None:
    with pytest.raises(ConfigurationError, match="needs a registry"):
        Telemetry(otel=False)
    registry = MetricsRegistry()
    memory = a_memory(Telemetry(otel=False, registry=registry), recall=False)
    conversation(memory)
    memory.context()
    stats = memory.stats()
    assert registry.value("convmem.evictions") == stats.archived + stats.summarized > 0
    assert registry.value("convmem.context.tokens") == 1
    assert registry.value("convmem.store.duration", {"convmem.store.operation": "append"}) == 48
    assert {m.prometheus for m in METRICS} <= {
        line.split()[2] for line in registry.render().splitlines() if "# TYPE" in line
    }


def test_without_telemetry_nothing_of_opentelemetry_is_imported() -> None:
    script = textwrap.dedent(
        """
        import sys
        from convmem import Memory
        from convmem.telemetry import MetricsRegistry, Telemetry
        memory = Memory(model="gpt-4o", max_tokens=400, max_output_tokens=50, strategy="summary_buffer", recall=True)
        for i in range(30):
            memory.add({"role": "user", "content": f"message {i} " * 10})
        memory.context("message 3")
        quiet = Memory(model="gpt-4o", telemetry=Telemetry(otel=False, registry=MetricsRegistry()))
        quiet.add({"role": "user", "content": "hello"})
        quiet.context()
        assert memory._telemetry is None
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={"PYTHONPATH": str(SRC)}, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("kind", ["sqlite", "files", "postgres", "redis"])
def test_store_spans_name_the_backend_and_a_server_is_a_client_span(otel: Otel, kind: str, tmp_path: Path) -> None:
    from ..stores._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

    if kind == "sqlite":
        store: Any = f"sqlite:///{tmp_path / 'data.db'}"
    elif kind == "files":
        store = f"files://{tmp_path / 'files'}"
    elif kind == "postgres":
        from convmem.stores.postgres import PostgresStore

        store = PostgresStore(PG_URL, schema=schema_for(tmp_path), max_size=2)
    else:
        from convmem.stores.redis import RedisStore

        store = RedisStore(REDIS_URL, prefix=prefix_for(tmp_path))
    try:
        memory = a_memory(otel.telemetry(), store=store, recall=False)
        conversation(memory, turns=14)
        memory.close()
    finally:
        if not isinstance(store, str):
            store.close()
        if kind == "postgres":
            drop_schemas({schema_for(tmp_path)})
        elif kind == "redis":
            drop_prefixes({prefix_for(tmp_path)})
    stored = [s for s in otel.finished() if s.name.startswith("convmem.store.")]
    assert {s.attributes["convmem.store.kind"] for s in stored} == {kind}
    assert {s.kind for s in stored} == {SpanKind.CLIENT if kind in ("postgres", "redis") else SpanKind.INTERNAL}
    assert otel.total("convmem.store.duration", **{"convmem.store.kind": kind}) == len(stored) >= 28
