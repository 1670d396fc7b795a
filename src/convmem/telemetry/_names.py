"""Every span, attribute and metric convmem's telemetry emits: the one table the code, the docs and the tests read.

The memory spans follow OpenTelemetry's GenAI memory conventions (the ``gen_ai.memory.client`` span of
``open-telemetry/semantic-conventions-genai``, ``docs/gen-ai/gen-ai-spans.md``, "Memory": span name
``{gen_ai.operation.name}``, ``gen_ai.operation.name`` one of ``search_memory``, ``update_memory``,
``upsert_memory``, ``delete_memory``...; ``gen_ai.memory.store.id``, ``gen_ai.memory.record.count``; the
query text ``gen_ai.memory.query.text`` only on opt-in). What the conventions do not name (tokens kept and
left out, cache reuse, the store's kind) is under ``convmem.*``. No attribute holds message text, a user id
or a key; the one that may hold text (the recall query) is set only with ``capture_content=True``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ATTRIBUTES", "METRICS", "SPANS", "Metric"]

# gen_ai.operation.name values (semantic-conventions-genai, gen-ai-spans.md, "Memory").
UPSERT = "upsert_memory"  # add: may create records, evict and fold others, "without the caller choosing which"
SEARCH = "search_memory"  # context and the recall search inside it
UPDATE = "update_memory"  # an eviction: known records move from the window to the archive (and the summary)

OPERATION = "gen_ai.operation.name"
CONVERSATION = "gen_ai.conversation.id"
MODEL = "gen_ai.request.model"
STORE_ID = "gen_ai.memory.store.id"
RECORD_COUNT = "gen_ai.memory.record.count"
QUERY_TEXT = "gen_ai.memory.query.text"
ERROR_TYPE = "error.type"

SPANS: dict[str, str] = {
    "upsert_memory": "Memory.add / add_many / add_response (convmem.operation=add): the whole add, store write, "
    "eviction, summary and sinks included",
    "update_memory": "an eviction inside an add (convmem.operation=evict): from the store write that records it "
    "to the end of the add; that write, the summary, the sinks and the state save are its children",
    "search_memory": "Memory.context (convmem.operation=context), and the recall search of a RecallBlock inside "
    "it (convmem.operation=recall)",
    "convmem.summarize": "the summarizer folding archived messages into the running summary",
    "convmem.absorb": "one eviction sink (a RecallIndex, Facts) taking the evicted units",
    "convmem.store.<operation>": "one store call of a memory: append, load, read, delete, find, save_state",
}

ATTRIBUTES: dict[str, str] = {
    OPERATION: "upsert_memory, search_memory or update_memory on the memory spans (GenAI memory conventions)",
    CONVERSATION: "the session id (every memory span)",
    MODEL: "the memory's model (add, context)",
    STORE_ID: "which memory a span reads or writes: session (the conversation) or recall (the archive search)",
    RECORD_COUNT: "messages added (add), evicted (evict), sent (context), recall hits kept (recall), "
    "messages written or read (store calls)",
    QUERY_TEXT: "the recall query; only with Telemetry(capture_content=True)",
    ERROR_TYPE: "the exception's class name when the operation failed (never its message)",
    "convmem.operation": "add, context, evict or recall: which convmem operation a GenAI memory span is",
    "convmem.store.kind": "the session store's backend: memory, sqlite, files, postgres, redis (or its class name)",
    "convmem.store.operation": "append, load, read, delete, find or save_state (store spans)",
    "convmem.store.state": "whether an append also wrote the session's state (store.append)",
    "convmem.evicted.messages": "messages the add evicted (add, evict)",
    "convmem.evicted.tokens": "tokens the add evicted (add, evict)",
    "convmem.summary.failures": "summaries that failed during the add (add)",
    "convmem.window.messages": "messages in the window after the add (add, evict)",
    "convmem.window.tokens": "tokens in the window after the add (add, evict)",
    "convmem.format": "the context's format: openai, anthropic or responses (context)",
    "convmem.tokens.total": "the tokens the context sends (context)",
    "convmem.tokens.budget": "the budget of request and reply (context)",
    "convmem.tokens.reserved_output": "the tokens kept for the reply (context)",
    "convmem.tokens.pinned": "pinned system messages' tokens (context)",
    "convmem.tokens.summary": "the running summary's tokens (context)",
    "convmem.tokens.blocks": "all blocks' tokens (context)",
    "convmem.tokens.window": "the window's tokens kept (context)",
    "convmem.tokens.input": "the input's tokens (context)",
    "convmem.tokens.tools": "the tool definitions' tokens (context)",
    "convmem.tokens.reused": "prefix tokens shared with the previous context: the provider's cache reuse (context)",
    "convmem.tokens.exact": "whether the counts are the model's own tokenizer's (context)",
    "convmem.tools_changed": "the tools differ from the previous context's, so no prefix is reused (context)",
    "convmem.left_out.count": "entries of left_out: what the context left out (context)",
    "convmem.left_out.messages": "messages left out of the context, evicted ones included (context)",
    "convmem.left_out.tokens": "tokens left out of the context (context)",
    "convmem.summary.messages": "messages folded by the summarizer call (summarize)",
    "convmem.summary.max_tokens": "the summary's cap (summarize)",
    "convmem.sink": "the sink's class name (absorb)",
    "convmem.recall.block": "the recall block's name (recall)",
    "convmem.recall.k": "how many hits the block keeps at most (recall)",
    "convmem.recall.dropped": "candidates the block left out (repeats, below relevance, beyond k) (recall)",
    "convmem.recall.reused": "the block reused its last search (same turn, unchanged archive): nothing searched",
    "convmem.recall.server": "the store's server ran the search (PostgreSQL, Redis with RediSearch) (recall)",
}


class Metric(NamedTuple):
    """One instrument: its OpenTelemetry name, kind (counter or histogram), unit, meaning and buckets."""

    name: str
    kind: str
    unit: str
    description: str
    buckets: tuple[float, ...] = ()

    @property
    def prometheus(self) -> str:
        """Its name in the Prometheus text exposition: dots to underscores, the unit, ``_total`` for counters."""
        base = self.name.replace(".", "_")
        if self.unit == "s":
            base += "_seconds"
        return base + "_total" if self.kind == "counter" else base


SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TOKENS = (256.0, 1024.0, 4096.0, 16384.0, 32768.0, 65536.0, 131072.0, 262144.0, 1048576.0)

METRICS: tuple[Metric, ...] = (
    Metric("convmem.context.tokens", "histogram", "{token}", "tokens each context sends", TOKENS),
    Metric("convmem.context.left_out.tokens", "histogram", "{token}", "tokens each context leaves out", TOKENS),
    Metric("convmem.context.reused.tokens", "histogram", "{token}", "prefix tokens each context reuses", TOKENS),
    Metric("convmem.evictions", "counter", "{message}", "messages evicted from windows"),
    Metric("convmem.evicted.tokens", "counter", "{token}", "tokens evicted from windows"),
    Metric("convmem.summary.failures", "counter", "{failure}", "summaries that failed (messages kept archived)"),
    Metric("convmem.recall.duration", "histogram", "s", "recall searches' latency (reused renders excluded)", SECONDS),
    Metric("convmem.store.duration", "histogram", "s", "store calls' latency, by store kind and operation", SECONDS),
    Metric(
        "gen_ai.client.operation.duration",
        "histogram",
        "s",
        "GenAI memory operations' latency (add, context, recall), by gen_ai.operation.name",
        SECONDS,
    ),
)

#: The service's own request metrics (``/metrics`` only; spans of requests are the ASGI instrumentation's).
HTTP_METRICS: tuple[Metric, ...] = (
    Metric("convmem.http.requests", "counter", "{request}", "requests answered, by method, route and status"),
    Metric("convmem.http.duration", "histogram", "s", "requests' latency, by method and route", SECONDS),
)
