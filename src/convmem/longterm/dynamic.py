"""Dynamic blocks: the user's facts valid now, and archived messages relevant to the input.

Both render from a :class:`~convmem.longterm.blocks.Turn`, never from a
user id of their own: a block shared by many memories shows each memory
only its own user's facts and recalls (invariant 6).

* :class:`FactsBlock` lists the facts valid at the turn's time, oldest first,
  with the date each started to hold.
* :class:`RecallBlock` searches a :class:`~convmem.longterm.recall.RecallIndex`
  with the input and lists the top ``k`` hits in the order they were said,
  leaving out the messages of this session's window (already in context) and
  repeated texts.

Example::

    facts, recall = Facts(extractor=my_extractor), RecallIndex()
    memory = Memory(
        model="gpt-4o", user_id="alice", sinks=[facts, recall],
        blocks=[FactsBlock(facts, priority=2), RecallBlock(recall, k=5, priority=3)],
    )
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..errors import ConvmemError
from .blocks import Position, Turn, check_block
from .hits import Dropped

if TYPE_CHECKING:
    from .facts import Fact
    from .recall import Mode, RecallHit, RecallIndex

__all__ = ["DEFAULT_K", "DEFAULT_SHARE", "FactsBlock", "RecallBlock"]

#: Hits a recall block shows at most, and its reserved share of the budget: chosen by measurement
#: (``bench/evidence.py``, evidence turns reaching the request on LoCoMo at 4k and 8k tokens).
DEFAULT_K = 20
DEFAULT_SHARE = 0.2
#: The facts block's claim on the budget (see ``FactsBlock``): about 20 one-line facts at a 4k budget.
DEFAULT_FACTS_SHARE = 0.1


def _fact_line(fact: Fact) -> str:
    return f"- {fact.text} (since {fact.valid_from:%Y-%m-%d})"


def _hit_line(hit: RecallHit) -> str:
    doc = hit.doc
    return f"[{doc.created_at:%Y-%m-%d %H:%M}] {doc.role}: {doc.text}"


class FactsBlock:
    """The facts about the turn's user that hold now.

    Its text changes only when facts change (the memory extracts them from what it evicts) or expire,
    not with the input, so it belongs with the parts of the request that change rarely: by default a
    system block right after the pinned messages, where a provider's prompt cache keeps serving it.

    Args:
        facts: a :class:`~convmem.longterm.factbook.Facts` (sync).
        name: the block's name.
        priority: cut order (facts are usually kept longer than recalls).
        limit: at most this many facts, the most recent ones.
        max_tokens: the block's own cap.
        position: ``"system"`` or ``"user"``.
        line: how one fact is written.
        share: the share of the budget (less the reserved output) the block claims, in [0, 1): eviction
            keeps it free of the window, and the block is cut to it (the oldest facts first), so that it
            neither squeezes the window nor changes size with it from turn to turn.
    """

    per_turn = False

    def __init__(
        self,
        facts: Any,
        *,
        name: str = "facts",
        priority: int = 2,
        limit: int = 50,
        max_tokens: int | None = None,
        position: Position = "system",
        line: Callable[[Fact], str] = _fact_line,
        share: float = DEFAULT_FACTS_SHARE,
    ) -> None:
        check_block(name, priority, max_tokens, position)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share < 1.0:
            raise ConvmemError(f"share must be a number in [0, 1), got {share!r}")
        self.facts, self.name, self.priority, self.limit = facts, name, priority, limit
        self.max_tokens, self.position, self.line, self.share = max_tokens, position, line, float(share)

    def render(self, query: str | None) -> str:
        return self.render_turn(Turn(query))

    def render_turn(self, turn: Turn) -> str:
        return "\n".join(text for text, _ in self.render_items(turn))

    def render_items(self, turn: Turn) -> list[tuple[str, int]]:
        """The facts' lines, oldest first, ranked newest first (cuts drop the oldest facts)."""
        now = turn.now or datetime.now(timezone.utc)
        valid = self.facts.facts(user_id=turn.user_id, valid_at=now)[-self.limit :]
        return [(self.line(f), len(valid) - i) for i, f in enumerate(valid)]


class RecallBlock:
    """Archived messages of the turn's user relevant to the input, not already in the window.

    Its text changes with every input, so by default it rides on the latest user message
    (``position="user"``), after everything that stays the same from turn to turn: the request's
    prefix (system, summary, window) is then reused by the provider's prompt cache, and recalled
    text, which users wrote, never gains the system role. When the next user message takes the
    block, the older message keeps its own if its tool loop or reply outweighs it, so that the
    cached prefix runs through them. With ``position="system"`` it is a system
    message after the summary, and the window behind it is sent anew every turn.

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
        position: ``"user"`` (default) or ``"system"``.
        line: how one hit is written.
        order: ``"time"`` (as said; easier to read) or ``"score"`` (best first).
        share: the share of the budget reserved for the block, in [0, 1).
    """

    per_turn = True

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
        line: Callable[[RecallHit], str] = _hit_line,
        order: str = "time",
        share: float = DEFAULT_SHARE,
    ) -> None:
        check_block(name, priority, max_tokens, position)
        if sessions not in ("all", "current"):
            raise ConvmemError(f"sessions must be 'all' or 'current', got {sessions!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConvmemError(f"k must be a positive integer, got {k!r}")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share < 1.0:
            raise ConvmemError(f"share must be a number in [0, 1), got {share!r}")
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

    def render(self, query: str | None) -> str:
        return self.render_turn(Turn(query))

    def render_turn(self, turn: Turn) -> str:
        return "\n".join(text for text, _ in self.render_items(turn))

    def render_items(self, turn: Turn) -> list[tuple[str, int]]:
        """The hits' lines in display order, each with its rank (1 = best)."""
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
        for hit in hits:
            text = hit.doc.text.strip()
            if text in seen:
                self.last_dropped.append(Dropped(hit, "repeats the input or a text shown above"))
            elif len(chosen) >= self.k:
                self.last_dropped.append(Dropped(hit, f"ranked below the block's k={self.k}"))
            else:
                seen.add(text)
                chosen.append(hit)
        ranks = {id(hit): rank for rank, hit in enumerate(chosen, start=1)}
        if self.order == "time":
            chosen.sort(key=lambda h: (h.doc.created_at, h.doc.session_id, h.doc.seq))
        self.last_hits = chosen
        return [(self.line(h), ranks[id(h)]) for h in chosen]
