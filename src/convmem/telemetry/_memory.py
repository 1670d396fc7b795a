"""The spans and metrics of a memory's operations, observed from outside its flows.

A memory with telemetry drives its add flows through :func:`add` / :func:`aadd`: the loop of
:func:`convmem._effects.drive` with the twin's own ``perform``, each effect the flow yields (a store call, a
summary, a sink) inside a span and timed, a failed one thrown back into the flow as there; and
what the add did (messages evicted, tokens, summary failures) is read from the core's running counts
before and after, so no decision of the core knows about telemetry. :func:`context` spans a context and reads
its account; :func:`attach` wraps the memory's recall blocks (:class:`TracedRecall`) so that their searches
are spans too. Nothing here reads a message's text; the recall query is put on its span only with
``capture_content``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .._effects import Done, Flow, step
from ..memory._effects import Absorb, Append, Delete, Effect, Find, Load, Read, SaveState, Summarize
from ._core import Span, Telemetry
from ._names import CONVERSATION, MODEL, OPERATION, QUERY_TEXT, RECORD_COUNT, SEARCH, STORE_ID, UPDATE, UPSERT

__all__ = ["TracedRecall", "aadd", "add", "attach", "context", "store_kind"]

T = TypeVar("T")
STORE_OPERATIONS: dict[type, str] = {
    Append: "append",
    Load: "load",
    Read: "read",
    Delete: "delete",
    Find: "find",
    SaveState: "save_state",
}
SERVERS = ("postgres", "redis")  # stores in another process: their spans are CLIENT spans
KINDS = {"file": "files", "postgresql": "postgres"}
OPERATION_DURATION = "gen_ai.client.operation.duration"


def store_kind(store: object) -> str:
    """The backend of a store, as the ``convmem.store.kind`` attribute names it."""
    name = type(store).__name__.lower()
    name = name.removeprefix("async").removesuffix("store") or "store"
    return KINDS.get(name, name)


def _present(attributes: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in attributes.items() if value is not None}


class _Add:
    """One add: its span, the eviction span it opens, and a span per effect."""

    def __init__(self, telemetry: Telemetry, memory: Any) -> None:
        self.t, self.memory, self.core = telemetry, memory, memory._core
        counts = self.core.counts
        self.before = (counts["evicted_messages"], counts["evicted_tokens"], counts["summary_failures"])
        self.kind = store_kind(memory.store)
        self.session = {CONVERSATION: memory.session_id, STORE_ID: "session"}
        attributes = {OPERATION: UPSERT, "convmem.operation": "add", MODEL: memory.model, **self.session}
        self.span = telemetry.start(UPSERT, _present({**attributes, "convmem.store.kind": self.kind}))
        self.evict: Span | None = None
        self.started = time.perf_counter()

    def _evicted(self) -> bool:
        return bool(self.core.counts["evicted_messages"] > self.before[0])

    def _open_eviction(self) -> None:
        attributes = {OPERATION: UPDATE, "convmem.operation": "evict", **self.session}
        self.evict = self.t.start(UPDATE, attributes, parent=self.span)

    def begin(self, effect: Effect) -> tuple[Span, float]:
        if self.evict is None and self._evicted():
            # Staging evicted before the append that stores it: that append and what follows it (the summary,
            # the sinks, the state save) are the eviction's.
            self._open_eviction()
        parent = self.evict or self.span
        operation = STORE_OPERATIONS.get(type(effect))
        if operation is not None:
            attributes: dict[str, Any] = {
                **self.session,
                "convmem.store.kind": self.kind,
                "convmem.store.operation": operation,
            }
            if isinstance(effect, Append):
                attributes[RECORD_COUNT] = len(effect.messages)
                attributes["convmem.store.state"] = effect.state is not None
            elif isinstance(effect, Delete):
                attributes[RECORD_COUNT] = len(effect.seqs)
            span = self.t.start(f"convmem.store.{operation}", attributes, parent=parent, client=self.kind in SERVERS)
        elif isinstance(effect, Summarize):
            request = effect.request
            attributes = {
                "convmem.summary.messages": len(request.messages),
                "convmem.summary.max_tokens": request.max_tokens,
            }
            span = self.t.start("convmem.summarize", attributes, parent=parent)
        else:
            assert isinstance(effect, Absorb)
            attributes = {
                "convmem.sink": type(effect.sink).__name__,
                RECORD_COUNT: sum(len(unit) for unit in effect.units),
            }
            span = self.t.start("convmem.absorb", attributes, parent=parent)
        return span, time.perf_counter()

    def done(self, effect: Effect, span: Span, started: float, result: Any, error: BaseException | None) -> None:
        elapsed = time.perf_counter() - started
        operation = STORE_OPERATIONS.get(type(effect))
        if operation is not None:
            labels = {"convmem.store.kind": self.kind, "convmem.store.operation": operation}
            if error is not None:
                labels["error.type"] = type(error).__name__
            self.t.observe("convmem.store.duration", elapsed, labels)
            if isinstance(effect, Read) and isinstance(result, list):
                span.set({RECORD_COUNT: len(result)})
        if error is not None:
            span.fail(error)
        span.end()

    def advance(self, steps: Flow[Effect, T], reply: Any, error: BaseException | None) -> Effect | Done[T]:
        """:func:`convmem._effects.step`; what the flow raises in answer ends the add's span failed."""
        try:
            return step(steps, reply, error)
        except BaseException as exc:
            self.finish(None, exc)
            raise

    def finish(self, result: object, error: BaseException | None) -> None:
        counts, (messages0, tokens0, failures0) = self.core.counts, self.before
        # A catch-up adopts another writer's counts: never report less than nothing.
        evicted = max(0, counts["evicted_messages"] - messages0)
        evicted_tokens = max(0, counts["evicted_tokens"] - tokens0)
        failures = max(0, counts["summary_failures"] - failures0)
        window = self.core.window
        kept = {"convmem.window.messages": window.messages, "convmem.window.tokens": window.tokens}
        moved = {"convmem.evicted.messages": evicted, "convmem.evicted.tokens": evicted_tokens}
        if evicted and self.evict is None:
            self._open_eviction()
        if self.evict is not None:
            self.evict.set({RECORD_COUNT: evicted, **moved, **kept})
            self.evict.end()
        attributes: dict[str, Any] = {**moved, **kept, "convmem.summary.failures": failures}
        if isinstance(result, list):
            attributes[RECORD_COUNT] = len(result)
        self.span.set(attributes)
        if error is not None:
            self.span.fail(error)
        self.span.end()
        labels = {"convmem.store.kind": self.kind}
        self.t.count("convmem.evictions", evicted, labels)
        self.t.count("convmem.evicted.tokens", evicted_tokens, labels)
        self.t.count("convmem.summary.failures", failures, labels)
        outcome = {OPERATION: UPSERT, "convmem.operation": "add", **labels}
        if error is not None:
            outcome["error.type"] = type(error).__name__
        self.t.observe(OPERATION_DURATION, time.perf_counter() - self.started, outcome)


def add(telemetry: Telemetry, memory: Any, steps: Flow[Effect, T], perform: Callable[[Effect], Any]) -> T:
    """Drive an add flow of a ``Memory`` with its spans and metrics: :func:`convmem._effects.drive` with each
    effect spanned (a failed effect is thrown back into the flow, as there)."""
    run = _Add(telemetry, memory)
    with run.span.current():
        outcome = _first(run, steps)
        while not isinstance(outcome, Done):
            span, started = run.begin(outcome)
            result: Any = None
            failure: BaseException | None = None
            try:
                with span.current():
                    result = perform(outcome)
            except BaseException as exc:
                failure = exc
            run.done(outcome, span, started, result, failure)
            outcome = run.advance(steps, result, failure)
    run.finish(outcome.value, None)
    return outcome.value


async def aadd(
    telemetry: Telemetry, memory: Any, steps: Flow[Effect, T], perform: Callable[[Effect], Awaitable[Any]]
) -> T:
    """The async twin of :func:`add` (``AsyncMemory``): each effect awaited."""
    run = _Add(telemetry, memory)
    with run.span.current():
        outcome = _first(run, steps)
        while not isinstance(outcome, Done):
            span, started = run.begin(outcome)
            result: Any = None
            failure: BaseException | None = None
            try:
                with span.current():
                    result = await perform(outcome)
            except BaseException as exc:
                failure = exc
            run.done(outcome, span, started, result, failure)
            outcome = run.advance(steps, result, failure)
    run.finish(outcome.value, None)
    return outcome.value


def _first(run: _Add, steps: Flow[Effect, T]) -> Effect | Done[T]:
    try:
        return step(steps, first=True)
    except BaseException as exc:
        run.finish(None, exc)
        raise


def context(telemetry: Telemetry, memory: Any, build: Callable[[], T]) -> T:
    """``build()`` (the memory's context) in a ``search_memory`` span, with the account's figures."""
    attributes = {
        OPERATION: SEARCH,
        "convmem.operation": "context",
        CONVERSATION: memory.session_id,
        STORE_ID: "session",
        MODEL: memory.model,
    }
    span = telemetry.start(SEARCH, _present(attributes))
    started = time.perf_counter()
    try:
        with span.current():
            built: Any = build()
    except BaseException as exc:
        span.fail(exc)
        span.end()
        failed = {OPERATION: SEARCH, "convmem.operation": "context", "error.type": type(exc).__name__}
        telemetry.observe(OPERATION_DURATION, time.perf_counter() - started, failed)
        raise
    account, left_out = built.account, built.left_out
    span.set(
        {
            RECORD_COUNT: len(built.messages),
            "convmem.format": built.format,
            "convmem.tokens.total": account.total,
            "convmem.tokens.budget": account.budget,
            "convmem.tokens.reserved_output": account.reserved_output,
            "convmem.tokens.pinned": account.pinned,
            "convmem.tokens.summary": account.summary,
            "convmem.tokens.blocks": sum(account.blocks.values()),
            "convmem.tokens.window": account.window,
            "convmem.tokens.input": account.input,
            "convmem.tokens.tools": account.tools,
            "convmem.tokens.reused": account.reused,
            "convmem.tokens.exact": account.exact,
            "convmem.tools_changed": account.tools_changed,
            "convmem.left_out.count": len(left_out),
            "convmem.left_out.messages": sum(entry.messages for entry in left_out),
            "convmem.left_out.tokens": sum(entry.tokens for entry in left_out),
        }
    )
    span.end()
    labels = _present({MODEL: memory.model, "convmem.format": built.format})
    telemetry.observe("convmem.context.tokens", account.total, labels)
    telemetry.observe("convmem.context.left_out.tokens", sum(entry.tokens for entry in left_out), labels)
    telemetry.observe("convmem.context.reused.tokens", account.reused, labels)
    telemetry.observe(
        OPERATION_DURATION, time.perf_counter() - started, {OPERATION: SEARCH, "convmem.operation": "context"}
    )
    result: T = built
    return result


class TracedRecall:
    """A recall block whose searches are ``search_memory`` spans; every other attribute is the block's own."""

    def __init__(self, block: Any, telemetry: Telemetry) -> None:
        self._block, self._telemetry = block, telemetry

    def __getattr__(self, name: str) -> Any:
        return getattr(self._block, name)

    def render_items(self, turn: Any) -> list[tuple[str, int]]:
        block, telemetry = self._block, self._telemetry
        kept = getattr(block, "_kept", None)
        attributes = {
            OPERATION: SEARCH,
            "convmem.operation": "recall",
            STORE_ID: "recall",
            CONVERSATION: turn.session_id,
            "convmem.recall.block": block.name,
            "convmem.recall.k": block.k,
            "convmem.recall.server": getattr(block.index, "_remote", None) is not None,
        }
        if telemetry.capture_content and turn.query:
            attributes[QUERY_TEXT] = turn.query
        span = telemetry.start(SEARCH, _present(attributes))
        started = time.perf_counter()
        try:
            with span.current():
                items: list[tuple[str, int]] = block.render_items(turn)
        except BaseException as exc:
            span.fail(exc)
            span.end()
            raise
        elapsed = time.perf_counter() - started
        reused = kept is not None and getattr(block, "_kept", None) is kept  # the block kept its last search
        span.set(
            {
                RECORD_COUNT: len(block.last_hits),
                "convmem.recall.dropped": len(block.last_dropped),
                "convmem.recall.reused": reused,
            }
        )
        span.end()
        if not reused:
            telemetry.observe("convmem.recall.duration", elapsed, {})
            telemetry.observe(OPERATION_DURATION, elapsed, {OPERATION: SEARCH, "convmem.operation": "recall"})
        return items


def _is_recall(block: object) -> bool:
    return all(hasattr(block, name) for name in ("render_items", "index", "last_hits", "last_dropped"))


def attach(telemetry: Telemetry, blocks: Sequence[Any]) -> list[Any]:
    """``blocks`` with each recall block wrapped so that its searches are spans (the others unchanged)."""
    return [TracedRecall(b, telemetry) if _is_recall(b) else b for b in blocks]
