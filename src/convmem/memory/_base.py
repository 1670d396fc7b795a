"""``MemoryBase``: the constructor both twins share, and what they do without I/O.

What comes in: a model, the options (each documented on :meth:`MemoryBase.__init__`
and checked by :class:`~convmem.memory.options.Options`), a store or its URL, the
session's and the user's ids. What happens: the options are checked and the core
(:mod:`convmem.memory._core`) is built from them; then the twin attaches what
differs (``_attach``: a sync or an async store, a ``threading.RLock`` or an
``asyncio.Lock``, what only a sync memory refuses). The operations that need no
I/O are written here once: ``stats()``, ``pending_tool_calls``, a context (blocks
rendered for the turn, then assembly), and what the twins' performers share: the
store call each store effect names (:func:`store_call`: the sync and async stores
take the same arguments), a result read for another session, a session lost under
a writer. Every write is a flow (:mod:`convmem.memory._flows`) that the twin drives. What goes out: the
memory's attributes (``store``, ``session_id``, ``user_id``, ``model``, ``format``,
``options``) and its read-only properties.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from ..errors import ContextOverflowError, SessionNotFoundError
from ..formats import Format
from ..formats.tool_definitions import ToolDefinition, parse_tools
from ..limits import Limits
from ..longterm.blocks.base import Block, Turn
from ..policy.assembly import BlockText, Overflow
from ..policy.context import Context
from ..policy.strategies import AsyncSummarizer, Strategy, Summarizer
from ..session import LoadedSession
from ..stores._writes import check_ids, lost
from ..stores.base import AppendRequest, AsyncStore, Store
from ..tokens import TokenCounter
from ..usage import Stats
from ._core import MemoryCore
from ._effects import Append, Delete, Find, Load, Read, SaveState, StoreEffect
from ._intake import InputLike
from ._longterm import wire
from ._staging import keep_config
from ._usage import adopt, noted
from .options import FOLDING, Options
from .sinks import AsyncEvictionSink, EvictionSink

if TYPE_CHECKING:
    from ..longterm.facts.model import AsyncFactExtractor, FactExtractor
    from ..longterm.recall.embedders import Embedder
    from ..telemetry import Telemetry

__all__ = ["MemoryBase", "store_call"]

StoreT = TypeVar("StoreT")


class MemoryBase(Generic[StoreT]):
    """The constructor, the configuration and the I/O-free reads of both twins."""

    store: StoreT

    def __init__(
        self,
        model: str | None = None,
        *,
        store: StoreT | str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        max_tokens: int | None = None,
        max_output_tokens: int | None = None,
        counter: TokenCounter | Literal["approximate", "calibrated"] | None = None,
        strategy: str | Strategy = "token_budget",
        strategy_options: Mapping[str, Any] | None = None,
        summarizer: Summarizer | AsyncSummarizer | None = None,
        on_overflow: Overflow = "truncate",
        summary_max_tokens: int | None = None,
        blocks: Sequence[Block] = (),
        pinned_context: Callable[[], str] | None = None,
        block_template: Callable[[Sequence[BlockText]], str] | None = None,
        sinks: Sequence[EvictionSink | AsyncEvictionSink] = (),
        format: Format = "openai",
        limits: Limits | None = None,
        cache_breakpoints: bool | Literal["automatic"] = True,
        facts: bool | FactExtractor | AsyncFactExtractor = False,
        recall: bool | Embedder = False,
        tools: Sequence[Mapping[str, Any] | ToolDefinition] = (),
        cache_ttl: Literal["5m", "1h"] | None = None,
        prompt_cache_key: str | None = None,
        prompt_cache_options: Mapping[str, Any] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """A memory of one session: a new one, or one a store already holds messages of.

        Args:
            model: the model the requests are for (``"gpt-4o"``, ``"claude-sonnet-4-5"``...): its
                registry entry gives the budget, the output allowance, the prices and the exact
                counter. An unknown model needs ``counter`` (or a known one ``max_tokens``).
            store: where the session is kept: a store (the caller's: it stays open), a URL such as
                ``"sqlite:///chat.db"`` or ``"postgresql://..."`` (the memory opens it and ``close()``
                closes it), or None for a store in this process's memory.
            session_id: the session's id (default: a new random one). Use ``open`` to resume a stored
                session with its options.
            user_id: the user the session belongs to: sessions, facts and recall are scoped by it.
            max_tokens: the budget of a request and its reply, in tokens (default: the model's context
                window; at most that window).
            max_output_tokens: tokens kept free for the reply (default: the model's output allowance,
                at most a quarter of its window, when ``max_tokens`` is not given; otherwise 0).
            counter: a ``TokenCounter``; ``"calibrated"``, an estimate that learns from the usage the
                provider reports (any model); or ``"approximate"`` (default: the model's exact
                counter, else a calibrated one).
            strategy: what leaves the window when it is full: ``"token_budget"`` (the oldest units,
                down to a low watermark), ``"sliding_window"``, ``"summary_buffer"`` and ``"compaction"``
                (both fold what leaves into a running summary), ``"provider"`` (the provider compacts: its
                compaction becomes the summary), or a ``Strategy`` object.
            strategy_options: keyword options of a named strategy, e.g. ``{"max_messages": 20}`` for
                ``sliding_window`` or ``{"max_tokens": 4000, "keep_recent_tokens": 1500}``.
            summarizer: writes the running summary of ``summary_buffer`` and ``compaction``
                (default: the offline extractive summarizer); refused with other strategies.
            on_overflow: when what cannot be cut (pinned messages, the newest unit, the input) exceeds
                the budget: ``"truncate"`` cuts the newest text, ``"raise"`` raises
                ``ContextOverflowError``.
            summary_max_tokens: the running summary's cap (default: a tenth of the input budget,
                between 64 and 2,000).
            blocks: context sent with every request, by priority: static, callable, working, facts
                and recall blocks (``convmem.longterm``).
            pinned_context: a callable whose text is sent every turn, never cut (a block of priority 0).
            block_template: joins the blocks' texts into what is sent (default: each under its name).
            sinks: eviction sinks (``convmem.memory.EvictionSink``) that receive every evicted unit:
                ``Facts`` with an extractor, a ``RecallIndex``.
            format: what ``context()`` renders when no format is given: ``"openai"`` (Chat
                Completions), ``"anthropic"`` (Messages) or ``"responses"``.
            limits: what a message may hold at the door (default: ``convmem.limits.Limits()``).
            cache_breakpoints: whether requests mark where the stable prefix ends: Anthropic
                ``cache_control`` (at most 4 marks with the caller's own, on its system blocks and tools
                included), OpenAI ``prompt_cache_breakpoint`` parts for the models that take them;
                ``"automatic"`` also sends Anthropic's top-level ``cache_control``.
            facts: ``True`` keeps the user's facts in the store's own fact store (``store.facts()``) and
                renders those valid now into every request (a ``FactsBlock`` after the caller's blocks);
                a fact extractor also mines what the memory evicts for facts. ``memory.facts`` is the
                ``Facts`` (``AsyncFacts`` in ``AsyncMemory``) to add, update and query them.
            recall: ``True`` indexes everything the memory evicts in the store's own recall index
                (``store.recall()``) and recalls what the input asks about every turn (a
                ``RecallBlock``); an embedder makes it hybrid. ``memory.recall`` is the ``RecallIndex``.
            tools: the tool definitions of every request, in any format's shape (Chat, Responses or
                Anthropic; a provider's own tools too): counted in the budget (and kept free of the
                window at eviction), sent by ``context().request()`` in its format, placed first in
                the cached prefix. ``context(tools=...)`` replaces them for one request.
            cache_ttl: the lifetime of convmem's Anthropic cache marks: ``"5m"`` or ``"1h"`` (writes at
                2x the input price; None: the API's default, 5 minutes).
            prompt_cache_key: OpenAI's ``prompt_cache_key``, sent with every Chat and Responses request.
            prompt_cache_options: OpenAI's ``prompt_cache_options`` (``mode``, ``ttl``), sent with every
                Chat and Responses request; convmem then places explicit breakpoints (as it does for
                the models that take them).
            telemetry: a ``convmem.telemetry.Telemetry``: spans and metrics of every add, eviction, summary,
                context, recall search and store call (default: ``convmem.telemetry.default()``, None
                unless set). Never saved with the session.

        Raises:
            ConfigurationError: an option of the wrong type or out of range, a budget the model's
                window cannot hold or that the reserve fills, a summarizer without a folding strategy.
            UnknownModelError: ``model`` is not in the registry and no ``counter`` is given.
        """
        if summarizer is None and isinstance(strategy, str) and strategy in FOLDING:
            # Offline and pure (it imports only the model layer): the documented extractive default.
            from ..llm.extractive import ExtractiveSummarizer

            summarizer = default = ExtractiveSummarizer()
        else:
            default = None
        self.options = Options(
            model=model,
            max_tokens=max_tokens,
            max_output_tokens=max_output_tokens,
            counter=counter,
            strategy=strategy,
            strategy_options=strategy_options,
            summarizer=summarizer,
            on_overflow=on_overflow,
            summary_max_tokens=summary_max_tokens,
            blocks=blocks,
            pinned_context=pinned_context,
            block_template=block_template,
            sinks=sinks,
            format=format,
            limits=limits,
            cache_breakpoints=cache_breakpoints,
            cache_ttl=cache_ttl,
            prompt_cache_key=prompt_cache_key,
            prompt_cache_options=prompt_cache_options,
            tools=tools,
        )
        # The one id rule of the stores, before anything is built: an empty id is refused, not made random.
        check_ids(session_id, user_id)
        self._core = MemoryCore(self.options)
        if default is not None:
            default.bind(self._core.counter.count_text)
        self.session_id = uuid.uuid4().hex if session_id is None else session_id
        self.user_id = user_id
        self.model = model
        self.format: Format = format
        self._attach(store)
        try:
            wired = wire(self.store, facts=facts, recall=recall, awaited=self._awaited)
        except BaseException:
            self._discard()
            raise
        self.facts, self.recall = wired.facts, wired.recall
        if wired.blocks or wired.sinks:  # after the caller's own, so the caller's priorities read first
            self.options = replace(self.options, blocks=(*blocks, *wired.blocks), sinks=(*sinks, *wired.sinks))
            self._core = MemoryCore(self.options)
            if default is not None:
                default.bind(self._core.counter.count_text)
        self._telemetry = _telemetry(telemetry, self._core)

    def _attach(self, store: StoreT | str | None) -> None:
        """The twin's part of the constructor: check what only it refuses, take the store, make the lock."""
        raise NotImplementedError

    _telemetry: Telemetry | None  # spans and metrics of add and context (convmem.telemetry), or None
    _owns_store: bool  # whether close() closes the store (the memory opened it from a URL or made it)
    _awaited = False  # whether the twin awaits its store (AsyncMemory): its blocks read a sync twin

    def _discard(self) -> None:
        """Close, without awaiting, a store the constructor opened and then refused (nothing was written)."""
        if self._owns_store:
            close = getattr(getattr(self.store, "sync", self.store), "close", None)
            if close is not None:
                close()

    def _reading(self) -> AbstractContextManager[Any]:
        """What a read that does no I/O holds: the twin's lock, when it can be taken without awaiting."""
        raise NotImplementedError

    @property
    def budget(self) -> int:
        """The budget of a request and its reply, in tokens (fixed when the memory is made)."""
        return self._core.budget

    @property
    def reserved_output(self) -> int:
        """The tokens kept free for the reply (fixed when the memory is made)."""
        return self._core.reserve

    @property
    def counter(self) -> TokenCounter:
        """The counter every message is counted with, once, when it is added."""
        return self._core.counter

    @property
    def strategy(self) -> Strategy:
        """The eviction strategy the memory plans with."""
        return self._core.strategy

    def stats(self) -> Stats:
        """Tokens in context, archived and summarized counts, summaries made, tokens saved, usage, warnings.

        ``context_tokens`` is what ``context().tokens`` reports for this state when no input is given
        and no blocks are set: the memory's tools, pinned, summary and window as they fit the budget,
        plus the reply priming (and, in the Anthropic format, the continuation placeholder). Blocks are left out
        because rendering them may search a store; ``context().account.blocks`` has their share.
        """
        with self._reading():  # a consistent reading while another thread adds
            core = self._core
            stats = core.stats()
            try:
                tokens = core.context([], self.format, []).tokens
            except ContextOverflowError:  # on_overflow="raise" and the irreducible part does not fit
                tokens = stats.context_tokens + core.counter.reply_priming
            return replace(stats, context_tokens=tokens)

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of the newest assistant message's calls that still await results, in call order."""
        with self._reading():
            return self._core.pending_tool_calls()

    def _context(self, input: InputLike, format: str | None, tools: Sequence[Mapping[str, Any]] | None) -> Context:
        core = self._core
        given = parse_tools(tools, "context(tools=...)") if tools is not None else None
        inputs = core.inputs(input) if input is not None else []
        if not core.blocks:
            return noted(core, core.context(inputs, format or self.format, [], track=True, tools=given))
        query = inputs[-1][0].text if inputs else core.last_user_text()
        turn = Turn(query, self.session_id, self.user_id, core.window_start, datetime.now(timezone.utc))
        blocks = core.block_texts(query, turn)
        return noted(core, core.context(inputs, format or self.format, blocks, track=True, tools=given))

    def _exact(self, value: Any) -> Any:
        """``value``, unless it is another session than this memory's (a store resolves id prefixes)."""
        if isinstance(value, LoadedSession) and value.info.id != self.session_id:
            raise SessionNotFoundError(self.session_id)
        return value

    def _lost(self, error: SessionNotFoundError) -> Exception:
        """What a store's "not found" means to this memory: lost, if it holds seqs of the session (never re-created)."""
        return lost(self.session_id, self._core.next_seq) if self._core.next_seq else error

    def _restore(self, loaded: LoadedSession) -> None:
        keep_config(self._core, loaded)
        adopt(self._core)  # only when this process has learned nothing yet for the model


def _telemetry(given: Telemetry | None, core: MemoryCore) -> Telemetry | None:
    """The memory's telemetry (the process default when none is given); its recall blocks traced if any."""
    from ..telemetry import default  # convmem.telemetry imports OpenTelemetry only when a Telemetry is made

    chosen = given if given is not None else default()
    if chosen is not None:
        from ..telemetry._memory import attach

        core.blocks = attach(chosen, core.blocks)
    return chosen


def store_call(
    store: Store | AsyncStore, effect: StoreEffect, *, session_id: str, user_id: str | None, model: str | None
) -> Any:
    """Call the store a store effect names (see :mod:`convmem.memory._effects`), for both twins.

    The sync and the async stores take the same arguments, so this is written once: ``Memory`` gets
    the result, ``AsyncMemory`` the awaitable it awaits.
    """
    if isinstance(effect, Append):
        return store.append(
            AppendRequest(
                session_id,
                effect.messages,
                user_id=user_id,
                model=model,
                expected_seq=effect.expected_seq,
                expected_version=effect.expected_version,
                state=effect.state,
            )
        )
    if isinstance(effect, SaveState):
        return store.save_state(session_id, effect.state, expected_version=effect.state.version, user_id=user_id)
    if isinstance(effect, Load):
        return store.load(effect.session_id or session_id, user_id=user_id, unfolded_limit=effect.unfolded_limit)
    if isinstance(effect, Read):
        return store.messages(session_id, user_id=user_id, from_seq=effect.from_seq, to_seq=effect.to_seq)
    if isinstance(effect, Find):
        return store.get_session(effect.session_id, user_id=user_id)
    assert isinstance(effect, Delete)
    return store.delete_messages(session_id, effect.seqs, user_id=user_id, expected_seq=effect.expected_seq)
