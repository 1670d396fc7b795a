"""The recall block: archived messages of the turn's user relevant to the input, not already in the window.

It searches a :class:`~convmem.longterm.recall.index.RecallIndex` with the input and
lists the top ``k`` hits in the order they were said, leaving out the
messages of this session's window (already in context) and repeated texts.
It renders from a :class:`~convmem.longterm.blocks.Turn`, never from a user
id of its own (invariant 6).

Evidence per token (issue 30):

* **A relevance gate** (``gate``): a hit's relevance is the share of the query's word weight (each
  content word by its idf in the user's archive) that the hit's own text or the message before it holds
  (:func:`relevance`). When no hit reaches ``gate`` the block is empty: a turn that asks nothing the
  archive knows ("thanks!", "sounds good") carries no block at all; otherwise every hit is shown, as
  evidence often shares no word with the question. ``min_relevance`` is the stricter form, applied to each
  hit. The message before a hit counts because evidence is often the short answer to a question ("Where
  did you go?" / "The Rockies"), which holds none of the words itself.
* **Hits that keep their place** (``order="stable"``): a hit shown last turn in the same session keeps its
  line; a new hit takes the place of one that left, then the rest follow, in the order they were said.
  The block's text then changes only where its hits did. It was measured as a system block at a fixed place
  in the request too (``bench/cache.py``, on a LoCoMo conversation): a hit changes almost every turn there, and
  the window behind it was sent anew (reuse fell from 69% to 16%); that position is refused since issue 27
  (recalled text never gets the system role), and ``"stable"`` is not the default.

The gate's effect, measured (``bench/evidence.py --variants``, ``bench/cache.py``; figures in
``bench/README.md``): on LoCoMo at 4k, ``gate=0.35`` billed 27% less input with 5 points less of the
questions' evidence; it is off by default, as every benchmark question there has evidence to find.

Example::

    recall = RecallIndex()
    memory = Memory(model="gpt-4o", user_id="alice", sinks=[recall], blocks=[RecallBlock(recall, k=5)])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...errors import ConfigurationError, ConvmemError
from ..blocks.base import Position, Turn, check_block, check_share
from .hits import Dropped

if TYPE_CHECKING:
    from .hits import RecallHit
    from .index import Mode, RecallIndex
    from .model import DocRef

__all__ = ["DEFAULT_K", "DEFAULT_SHARE", "ORDERS", "RecallBlock", "hit_line", "relevance"]

#: Hits a recall block shows at most, and its reserved share of the budget: chosen by measurement
#: (``bench/evidence.py``, evidence turns reaching the request on LoCoMo at 4k and 8k tokens).
DEFAULT_K = 20
DEFAULT_SHARE = 0.2
ORDERS = ("time", "score", "stable")
_PLACES_KEPT = 256  # sessions whose last block a stable block remembers


def relevance(query_weights: Mapping[str, float], hit: RecallHit) -> float:
    """The share of the query's word weight (``query_weights``: each content word's weight) that ``hit``'s
    own text or the message before it holds, in [0, 1]; 0 for a query without content words."""
    from .lexical import tokenize  # numpy's side of recall: the block itself is imported without it

    total = sum(query_weights.values())
    if total <= 0:
        return 0.0
    held = set(tokenize(hit.doc.text))
    if hit.doc.context:
        held.update(tokenize(hit.doc.context))
    return sum(w for term, w in query_weights.items() if term in held) / total


def hit_line(hit: RecallHit) -> str:
    doc = hit.doc
    return f"[{doc.created_at:%Y-%m-%d %H:%M}] {doc.role}: {doc.text}"


def searchable(index: RecallIndex, user_id: str | None) -> tuple[int, int, int] | None:
    """A key of what a search of ``user_id``'s archive sees, which moves whenever that can change; None when
    the index's store searches in its server, where other processes write (no result can be kept then).

    A user's partition is append-only: its documents and its vectors only grow, so their counts (and the
    partition itself, loaded from the store on first use) say whether a search could see anything new.
    """
    if index._remote is not None:  # the package's own index: its private state is read, never changed
        return None
    partition = index._partitions.get(user_id)
    return (id(partition), len(partition), partition.vector_count) if partition is not None else (0, 0, 0)


class RecallBlock:
    """Archived messages of the turn's user relevant to the input, not already in the window.

    Its text changes with every input, so by default it rides on the latest user message
    (``position="user"``), after everything that stays the same from turn to turn: the request's
    prefix (system, summary, window) is then reused by the provider's prompt cache, and recalled
    text, which users, tools and models wrote, never gains the system role. When the next user message takes
    the block, the older message keeps its own if its tool loop or reply outweighs it, so that the
    cached prefix runs through them. ``position="system"`` is refused (a ConfigurationError): recalled
    text would gain the system role (roles are earned).

    The block is itemized: each hit is one line, ranked, and assembly drops the lowest-ranked
    lines first. It claims ``share`` of the budget (less the reserved output) ahead of the
    window: when the context is full, the oldest window units are left out to keep the best
    hits up to that share, and only then are hits cut (see :mod:`convmem.policy.assembly`).

    Args:
        index: the recall index the memory archives into (as a sink).
        name: the block's name.
        priority: cut order.
        k: how many messages at most.
        mode: ``lexical``, ``dense`` or ``hybrid`` (default: the index's).
        sessions: ``"all"`` the user's sessions, or ``"current"`` only this one.
        max_tokens: the block's own cap.
        position: ``"user"``, the only one taken (``"system"`` would give user text the system role).
        line: how one hit is written.
        order: ``"time"`` (as said; easier to read), ``"score"`` (best first) or ``"stable"`` (a hit
            shown last turn keeps its line; new ones in the order they were said).
        share: the share of the budget reserved for the block, in [0, 1).
        gate: in [0, 1]: no block is shown when no hit's :func:`relevance` reaches it (0: off).
        min_relevance: in [0, 1]: a hit whose :func:`relevance` is below it is left out (0: off).
    """

    per_turn = True
    trusted = False  # recalled messages are what users, tools and models said

    def __init__(
        self,
        index: RecallIndex,
        *,
        name: str = "recall",
        priority: int = 3,
        k: int = DEFAULT_K,
        mode: Mode | None = None,
        sessions: str = "all",
        max_tokens: int | None = None,
        position: Position = "user",
        line: Callable[[RecallHit], str] = hit_line,
        order: str = "time",
        share: float = DEFAULT_SHARE,
        gate: float = 0.0,
        min_relevance: float = 0.0,
    ) -> None:
        check_block(name, priority, max_tokens, position)
        if position != "user":
            raise ConfigurationError(
                f"RecallBlock {name!r}: position must be 'user', got {position!r}: recalled messages are what users, "
                "tools and models wrote, and a system position would give them the system role"
            )
        if sessions not in ("all", "current"):
            raise ConvmemError(f"sessions must be 'all' or 'current', got {sessions!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConvmemError(f"k must be a positive integer, got {k!r}")
        check_share(share)
        if order not in ORDERS:
            raise ConvmemError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        for label, value in (("gate", gate), ("min_relevance", min_relevance)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ConvmemError(f"{label} must be a number in [0, 1], got {value!r}")
        self.gate, self.min_relevance = float(gate), float(min_relevance)
        self._places: dict[tuple[str | None, str | None], list[DocRef]] = {}  # -> the refs shown
        self.index, self.name, self.priority, self.k, self.mode = index, name, priority, k, mode
        self.sessions, self.max_tokens, self.position, self.line, self.order = (
            sessions,
            max_tokens,
            position,
            line,
            order,
        )
        self.share = float(share)
        self.last_hits: list[RecallHit] = []  # what the latest render showed, for inspection
        self.last_dropped: list[Dropped] = []  # candidates it left out, with the reason
        # The latest render, kept while its key holds: a second context() for the same input (a caller
        # that builds the request twice, a tool loop's steps) reuses it instead of searching again.
        self._kept: tuple[object, list[tuple[str, int]], list[RecallHit], list[Dropped]] | None = None

    def render(self, query: str | None) -> str:
        return self.render_turn(Turn(query))

    def render_turn(self, turn: Turn) -> str:
        return "\n".join(text for text, _ in self.render_items(turn))

    def render_items(self, turn: Turn) -> list[tuple[str, int]]:
        """The hits' lines in display order, each with its rank (1 = best).

        The same turn (input, user, window, day) against an unchanged index gives the lines of the last
        render without searching again (see :func:`searchable`).
        """
        key = self._key(turn)
        kept = self._kept
        if key is not None and kept is not None and kept[0] == key:
            self.last_hits, self.last_dropped = list(kept[2]), list(kept[3])
            return list(kept[1])
        items = self._render_items(turn)
        self._kept = (key, list(items), list(self.last_hits), list(self.last_dropped)) if key is not None else None
        return items

    def _key(self, turn: Turn) -> object | None:
        """What a render depends on, or None when it cannot be kept (the index's server searches)."""
        index = self.index
        seen = searchable(index, turn.user_id)
        if seen is None:
            return None
        # A search reads ``now`` only for the day relative dates resolve against (temporal.query_ranges).
        day = turn.now.date() if turn.now is not None else None
        return (
            turn.query,
            turn.user_id,
            turn.session_id,
            turn.window_start,
            day,
            seen,
            (self.k, self.mode, self.sessions, self.order, self.line),
            (index.mode, index.fusion, index.weights, index.rerank, index.rewriter, index.tuning),
        )

    def _render_items(self, turn: Turn) -> list[tuple[str, int]]:
        self.last_hits, self.last_dropped = [], []
        if not turn.query or not turn.query.strip():
            return []
        window = (
            (turn.session_id, turn.window_start)
            if turn.session_id is not None and turn.window_start is not None
            else None
        )
        hits = self.index.search(
            turn.query,
            user_id=turn.user_id,
            k=self.k * 2,  # room for the repeated texts dropped below
            mode=self.mode,
            session_id=turn.session_id if self.sessions == "current" else None,
            exclude_window=window,
            now=turn.now,
        )
        seen: set[str] = {turn.query.strip()}
        chosen: list[RecallHit] = []
        weights: Mapping[str, float] = {}
        if self.min_relevance > 0 or self.gate > 0:
            from .lexical import tokenize

            weights = self.index.term_weights(turn.user_id, set(tokenize(turn.query)))
        for hit in hits:
            text = hit.doc.text.strip()
            if text in seen:
                self.last_dropped.append(Dropped(hit, "repeats the input or a text shown above"))
            elif self.min_relevance > 0 and (value := relevance(weights, hit)) < self.min_relevance:
                reason = f"relevance {value:.2f} below the block's min_relevance={self.min_relevance:g}"
                self.last_dropped.append(Dropped(hit, reason))
            elif len(chosen) >= self.k:
                self.last_dropped.append(Dropped(hit, f"ranked below the block's k={self.k}"))
            else:
                seen.add(text)
                chosen.append(hit)
        if self.gate > 0 and not any(relevance(weights, h) >= self.gate for h in chosen):
            self.last_dropped += [Dropped(hit, f"no hit reaches the block's gate={self.gate:g}") for hit in chosen]
            chosen = []
        ranks = {id(hit): rank for rank, hit in enumerate(chosen, start=1)}
        if self.order != "score":
            chosen.sort(key=lambda h: (h.doc.created_at, h.doc.session_id, h.doc.seq))
        if self.order == "stable":
            chosen = self._keep_places(turn, chosen)
        self.last_hits = chosen
        return [(self.line(h), ranks[id(h)]) for h in chosen]

    def _keep_places(self, turn: Turn, chosen: list[RecallHit]) -> list[RecallHit]:
        """``chosen`` (in time order) arranged so that a hit the last block of this session showed keeps its
        line, a new hit takes the line of one that left, and the remaining new hits follow."""
        key = (turn.user_id, turn.session_id)
        before = self._places.pop(key, [])
        by_ref = {h.doc.ref: h for h in chosen}
        shown = set(before)
        fresh = [h for h in chosen if h.doc.ref not in shown]
        placed: list[RecallHit] = []
        for ref in before:
            if ref in by_ref:
                placed.append(by_ref[ref])
            elif fresh:
                placed.append(fresh.pop(0))
        placed.extend(fresh)
        self._places[key] = [h.doc.ref for h in placed]
        while len(self._places) > _PLACES_KEPT:  # the oldest session first (dicts keep insertion order)
            del self._places[next(iter(self._places))]
        return placed
