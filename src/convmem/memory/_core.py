"""``MemoryCore``: one session's state and every decision about it, without I/O.

What comes in: the memory's :class:`~convmem.memory.options.Options` (its budget,
counter and strategy are resolved here), the messages of an add, the rows a store
read (:meth:`MemoryCore.restore`), a summarizer's text. What it keeps: the window
(pinned messages and units, at the seqs the store gives), the running summary and
the archived units still to fold, the state last saved, the counts behind ``stats()``.
What goes out: the decisions, which the flows (:mod:`convmem.memory._flows`) turn
into effects, and the contexts. A turn, as the flows run it::

    prepare (parse, check, count once) -> push at the next seqs -> plan -> evict -> the state that follows
      -> [store.append of the messages and that state]           (staged: _staging undoes it if refused)
      -> fold_request -> [summarizer] -> fold_done / fold_failed -> state_to_save -> [store.save_state]
    a provider's compaction in the batch (_compaction.compact): archive up to it, it becomes the summary
    context(inputs, format, block texts, tools) -> assemble within budget - reserve - tools -> Context

It never touches a store, a model or a sink (``tests/test_layout.py`` checks its imports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from typing import Any

from ..errors import InvalidMessageError
from ..formats import as_message
from ..formats.openai import to_openai
from ..formats.tool_definitions import ToolDefinition
from ..limits import Limits, check_limits, check_text
from ..longterm.blocks.base import Block, CallableBlock, Turn
from ..messages import Message
from ..policy.assembly import (
    Assembly,
    BlockText,
    Overflow,
    SummaryText,
    assemble,
    default_block_template,
    summary_message,
)
from ..policy.blockfit import block_room, block_texts
from ..policy.context import Context, LeftOut, evicted_account
from ..policy.controls import ToolsForRequest
from ..policy.prefix import Layout, carry_blocks
from ..policy.strategies import Plan, Strategy
from ..policy.truncate import truncate_text
from ..policy.units import Entry, Unit, Window
from ..session import COUNTED_KEY, LoadedSession, SessionState, SummaryRecord
from ..tokens import Calibration
from ..usage import USAGE_KEYS, Stats, fresh_counts
from ._intake import MessageLike, new_id, parse_all, rendered_alone, resolve_counter
from ._resume import resume
from .options import CONFIG_KEY, Options, budget, build_strategy, cache_controls

__all__ = ["FoldRequest", "MemoryCore", "Stats"]

MAX_WARNINGS = 20


@dataclass(frozen=True, slots=True)
class FoldRequest:
    """What the summarizer is asked: the previous summary and the new messages only."""

    previous: str | None
    messages: list[Message]
    units: list[Unit]
    max_tokens: int


class MemoryCore:
    """Pure state and policy of one session."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.limits = options.limits or Limits()
        self.model = options.model
        self.info, self.counter = resolve_counter(options.model, options.counter)
        # Chat-compatible vendor fields (reasoning_content, a thought signature) go to their own provider only.
        self.vendor = self.info.provider if self.info is not None else None
        self.rendered_alone = partial(rendered_alone, vendor=self.vendor)
        self.render_openai = partial(to_openai, vendor=self.vendor)
        self.budget, self.reserve = budget(options, self.info)
        self.strategy: Strategy = build_strategy(options)
        self.on_overflow: Overflow = options.on_overflow
        input_budget = self.budget - self.reserve
        self.summary_max_tokens = options.summary_max_tokens or max(64, min(2000, input_budget // 10))
        self.blocks: list[Block] = list(options.blocks)
        self.block_template = options.block_template or default_block_template
        self.block_room = block_room(self.blocks, input_budget)
        self.cache = cache_controls(options, self.info)
        self.tools: tuple[ToolDefinition, ...] = tuple(options.tools)  # type: ignore[arg-type]  # parsed by Options
        self.request_tools = ToolsForRequest(self.counter, self.info)
        self.sinks = options.sinks
        self.previous: dict[str, Layout] = {}  # the layout of the last context built in each format
        if options.pinned_context is not None:
            self.blocks.insert(0, CallableBlock("pinned_context", options.pinned_context, priority=0))
        self.window = Window()
        self.summary: SummaryText | None = None
        self.unfolded: list[Unit] = []
        self.state = SessionState()
        self.window_start = 0  # the live value; self.state holds the last saved one
        self.next_seq = 0  # the seq the store gives the next message (the writer's view of the session)
        self._evicted_key: tuple[Any, ...] | None = None
        self._evicted: list[LeftOut] = []
        self.counts: dict[str, Any] = fresh_counts()
        self.counts[CONFIG_KEY] = options.config()  # what the session saves (a reopened one keeps its own)
        self.counts[COUNTED_KEY] = self.counter.name  # whose counts the rows it stores hold (restore checks it)
        self.saved_usage: dict[str, Any] = {key: self.counts[key] for key in USAGE_KEYS}  # as the store has it
        # A calibrated counter's counts change when it learns; the window is recounted before its next use.
        calibration = getattr(self.counter, "calibration", None)
        self.calibration = calibration if isinstance(calibration, Calibration) else None
        self.prediction: tuple[int, float] | None = None  # the last context's tokens and factor (_usage.learn)
        self._calibrated = self.calibration is not None
        self._counted_version: int | None = getattr(self.counter, "version", None)
        self.block_counts: dict[Any, Any] = {}  # the placed blocks' counts of the last contexts (placement)

    # -- adding ------------------------------------------------------------------------------
    def prepare(self, items: Iterable[MessageLike], *, check: bool = True) -> list[tuple[Message, int]]:
        """Parse, validate (against the window too, unless ``check`` is false) and count a batch; changes nothing."""
        if self._calibrated:
            self.sync_counts()
        now = datetime.now(timezone.utc)
        messages = parse_all(items, now)
        limits = self.limits
        for index, message in enumerate(messages):
            check_limits(message, limits, index)
        if check:
            self.window.check_batch(messages)
        prepared = []
        count = self.counter.count_message
        for index, message in enumerate(messages):
            if message.id is None or message.created_at is None:
                message = message.with_identity(message.id or new_id(), message.created_at or now)
            try:
                prepared.append((message, count(message)))
            except InvalidMessageError as exc:
                raise exc.at(index) from None
        return prepared

    def push(self, seqs: Sequence[int], prepared: Sequence[tuple[Message, int]]) -> list[Entry]:
        push = self.window.push
        entries = []
        for seq, (message, tokens) in zip(seqs, prepared, strict=True):
            entry = Entry(seq, message, tokens)
            entry.rendered = self.rendered_alone(message)
            push(entry)
            entries.append(entry)
        self.counts["messages"] += len(prepared)
        if seqs:
            self.counts["last_seq"] = seqs[-1]
            self.next_seq = seqs[-1] + 1
        return entries

    def sync_counts(self) -> None:
        """Recount the window, the retry queue and the summary if a calibrated counter has learned since."""
        version = getattr(self.counter, "version", None)
        if version == self._counted_version:
            return
        self._counted_version = version
        count = self.counter.count_message
        self.window.recount(count)
        for unit in self.unfolded:
            unit.recount(count)
        if self.summary is not None:
            self.summary = replace(self.summary, tokens=count(self.summary.message))

    # -- eviction ----------------------------------------------------------------------------
    def limit(self) -> int:
        """The budget less the reserve, the memory's tools, pinned, summary and the blocks' claim (``block_room``)."""
        summary = self.summary.tokens if self.summary is not None else 0
        fixed = self.reserve + self.counter.reply_priming + self.window.pinned_tokens + summary
        fixed += self.request_tools(self.tools, self.options.format).tokens
        return max(1, self.budget - fixed - self.block_room)

    def plan(self) -> Plan:
        return self.strategy.plan(self.window, self.limit())

    def evict(self, plan: Plan) -> list[Unit]:
        units = [self.window.pop_oldest() for _ in range(plan.evict)]
        counts = self.counts
        for unit in units:
            counts["evicted_messages"] += len(unit.entries)
            counts["evicted_tokens"] += unit.tokens
            if counts["first_evicted"] is None:
                counts["first_evicted"] = unit.first_seq
        self.window_start = self._window_start()
        return units

    def _window_start(self) -> int:
        first = self.window.units[0].first_seq if self.window.units else None
        if first is not None:
            return first
        return self.counts["last_seq"] + 1 if self.counts["last_seq"] is not None else self.window_start

    def fold_request(self, units: list[Unit]) -> FoldRequest:
        pending = self.unfolded + units
        messages = [m for unit in pending for m in unit.messages]
        previous = (self.summary.text or None) if self.summary is not None else None  # an opaque compaction: none
        return FoldRequest(previous, messages, pending, self.summary_max_tokens)

    def fold_done(self, request: FoldRequest, text: object) -> bool:
        """Install the new summary; returns False (and archives) if ``text`` is unusable."""
        if not isinstance(text, str) or not text.strip():
            self.fold_failed(
                request, f"summarizer returned {'empty text' if isinstance(text, str) else type(text).__name__}"
            )
            return False
        try:  # a model's text is checked like a user's, before it is counted or stored
            check_text(text, "summary")
        except InvalidMessageError as exc:
            self.fold_failed(request, f"summarizer returned text that cannot be stored: {exc}")
            return False
        cut = truncate_text(self.counter.count_text, text.strip(), self.summary_max_tokens)
        if cut is None:
            self.fold_failed(request, "summary cap is too small to hold any text")
            return False
        if cut != text.strip():
            self.warn(f"summary exceeded {self.summary_max_tokens} tokens and was truncated")
        first = self.summary.first_seq if self.summary is not None else request.units[0].first_seq
        last = request.units[-1].last_seq
        message = summary_message(cut, first, last)
        self.summary = SummaryText(cut, first, last, self.counter.count_message(message), message)
        folded = sum(len(u.entries) for u in request.units)
        self.counts["summarized_messages"] += folded
        self.counts["summarized_tokens"] += sum(u.tokens for u in request.units)
        self.counts["summaries"] += 1
        self.unfolded = []
        record = SummaryRecord(cut, first, last, self.summary.tokens, datetime.now(timezone.utc))
        self.state = replace(self.state, folded_to=last, summary=record)
        return True

    def fold_failed(self, request: FoldRequest, reason: str) -> None:
        """Keep the units archived and queue them for the next fold (invariant 8)."""
        self.counts["summary_failures"] += 1
        self.warn(f"summary failed, messages archived instead and retried at the next eviction: {reason}")
        self.unfolded = request.units
        # Bound the retry queue: beyond it the oldest stay archived (and searchable) without folding.
        while len(self.unfolded) > 1 and sum(u.tokens for u in self.unfolded) > 8 * self.summary_max_tokens:
            self.unfolded.pop(0)

    def warn(self, text: str, *, once: bool = False) -> None:
        """Keep ``text`` among the newest warnings; with ``once``, not again while it is still kept."""
        warnings: list[str] = self.counts["warnings"]
        if once and text in warnings:
            return
        warnings.append(text)
        del warnings[:-MAX_WARNINGS]

    def state_to_save(self) -> SessionState:
        state = self.state
        return SessionState(
            self.window_start,
            state.folded_to,
            state.pinned_start,
            state.summary,
            _persistable(self.counts),
            state.version,
        )

    def pending_tool_calls(self) -> list[str]:
        """Ids of the newest assistant message's calls that still await results, in call order."""
        pending = self.window.pending
        if pending is None:
            return []
        return [call.id for call in pending.entries[0].message.tool_calls if call.id in pending.pending]

    # -- context -----------------------------------------------------------------------------
    def last_user_text(self) -> str | None:
        """The text of the newest user message in the window (what blocks search when no input is given)."""
        for unit in reversed(self.window.units):
            if unit.kind == "user":
                return unit.entries[0].message.text
        return None

    def block_texts(self, query: str | None, turn: Turn | None = None) -> list[BlockText]:
        """Render every block for this turn, each cut to its own ``max_tokens`` if it has one."""
        turn = turn or Turn(query)
        return block_texts(self.blocks, query, turn, self.counter.count_text, self.budget - self.reserve)

    def inputs(self, input: MessageLike | str | Sequence[MessageLike] | None) -> list[tuple[Message, int]]:
        if input is None:
            return []
        if isinstance(input, str):
            items: list[MessageLike] = [Message(role="user", content=input)]
        elif isinstance(input, (Message, Mapping)):
            items = [input]
        else:
            items = list(input)
        messages = [as_message(item, index=i) for i, item in enumerate(items)]
        self.window.check_batch(messages)
        return [(m, self.counter.count_message(m)) for m in messages]

    def context(
        self,
        inputs: list[Any],
        format: str,
        blocks: list[BlockText],
        *,
        track: bool = False,
        tools: tuple[ToolDefinition, ...] | None = None,
    ) -> Context:
        """Assemble a context (``tools`` None: the memory's); with ``track``, measure its prefix against the last."""
        if self._calibrated:
            self.sync_counts()
        if track and format in self.previous:
            self._carry(self.previous[format])
        request = Assembly(
            window=self.window,
            counter=self.counter,
            budget=self.budget,
            reserve=self.reserve,
            format=format,
            summary=self.summary,
            blocks=blocks,
            template=self.block_template,
            inputs=inputs,
            on_overflow=self.on_overflow,
            evicted=self.evicted(),
            # A tool result with images renders as two Chat messages: no per-message cache then.
            render_openai=self.render_openai if not self.window.unrendered else None,
            tools=self.request_tools(self.tools if tools is None else tools, format),
            cache=self.cache,
            vendor=self.vendor,
            counts=self.block_counts,
        )
        return assemble(request, self.previous if track else None)

    def _carry(self, layout: Layout) -> None:
        seq = carry_blocks(self.window, layout, self.counter.count_message, self.rendered_alone)
        if seq is not None:  # the layouts kept for measuring reuse now see those blocks as part of the window
            for name, kept in self.previous.items():
                if kept.carrier == seq:
                    self.previous[name] = kept._replace(carrier=None, user_text=None, user_tokens=0)

    def evicted(self) -> list[LeftOut]:
        key = (self.counts["evicted_messages"], self.counts["summarized_messages"], self.summary)
        if self._evicted_key != key:
            self._evicted_key, self._evicted = key, self._evicted_now()
        return self._evicted

    def _evicted_now(self) -> list[LeftOut]:
        summary = (self.summary.first_seq, self.summary.last_seq) if self.summary is not None else None
        return evicted_account(self.counts, summary, self.window_start)

    def stats(self) -> Stats:
        c = self.counts
        summary_tokens = self.summary.tokens if self.summary is not None else 0
        return Stats(
            messages=c["messages"],
            window_messages=self.window.messages,
            context_tokens=self.window.pinned_tokens + summary_tokens + self.window.tokens,
            archived=c["evicted_messages"] - c["summarized_messages"],
            summarized=c["summarized_messages"],
            summaries=c["summaries"],
            summary_failures=c["summary_failures"],
            tokens_saved=max(0, c["evicted_tokens"] - summary_tokens),
            evicted_tokens=c["evicted_tokens"],
            input_tokens=c["input_tokens"],
            output_tokens=c["output_tokens"],
            cost_usd=c["cost_usd"],
            warnings=tuple(c["warnings"]),
            cached_input_tokens=c["cached_input_tokens"],
            cache_write_tokens=c["cache_write_tokens"],
            cache_savings_usd=c["cache_savings_usd"],
            cache_write_1h_tokens=c["cache_write_1h_tokens"],
        )

    # -- resume ------------------------------------------------------------------------------
    def restore(self, loaded: LoadedSession) -> None:
        """Rebuild the window, summary and stats from what the store read (:func:`._resume.resume`)."""
        resumed = resume(loaded, self.rendered_alone)
        self.window, self.state, self.counts = resumed.window, resumed.state, resumed.counts
        self.window_start = resumed.state.window_start
        self.saved_usage = {key: self.counts[key] for key in USAGE_KEYS}
        self.summary, self.unfolded, self.next_seq = resumed.summary, resumed.unfolded, resumed.next_seq
        self._counted_version = None  # stored counts may come from another calibration: recount before use
        own = self.counter.name
        if self.counts.get(COUNTED_KEY) != own:
            # Counts are the memory's own: another model's or counter's, an import's (which names none) or a
            # forged one never decide this memory's budget. What it sends is recounted: O(window), never the
            # archive. From now on the session holds two counters' counts (unless it holds none yet), so the
            # state says it names none; stage() writes that with the next append.
            self.recount_window()
            self.counts[COUNTED_KEY] = own if not loaded.info.message_count else None

    def recount_window(self) -> None:
        """Count the pinned messages, the window and the summary again with this memory's counter."""
        count = self.counter.count_message
        self.window.recount(count)
        if self.summary is not None:
            self.summary = replace(self.summary, tokens=count(self.summary.message))


def _persistable(counts: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in counts.items()}
