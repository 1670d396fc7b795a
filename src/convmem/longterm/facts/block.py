"""The facts block: the user's facts valid at the turn's time, oldest first, with the date each started to hold.

It renders from a :class:`~convmem.longterm.blocks.Turn`, never from a user id
of its own: a block shared by many memories shows each memory only its own
user's facts (invariant 6).

Example::

    facts = Facts(extractor=my_extractor)
    memory = Memory(model="gpt-4o", user_id="alice", sinks=[facts], blocks=[FactsBlock(facts, priority=2)])
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..blocks.base import Position, Turn, check_block, check_share

if TYPE_CHECKING:
    from .model import Fact

__all__ = ["DEFAULT_FACTS_SHARE", "FactsBlock"]

#: The facts block's claim on the budget (see ``FactsBlock``): about 20 one-line facts at a 4k budget.
DEFAULT_FACTS_SHARE = 0.1


def _fact_line(fact: Fact) -> str:
    return f"- {fact.text} (since {fact.valid_from:%Y-%m-%d})"


class FactsBlock:
    """The facts about the turn's user that hold now.

    Its text changes only when facts change (the memory extracts them from what it evicts) or expire,
    not with the input, so it belongs with the parts of the request that change rarely: by default a
    ``"system"`` block right after the pinned messages, where a provider's prompt cache keeps serving it. A fact
    is what an extractor (a model) took from what users said, so the block is not the application's text
    (``trusted`` False): it is sent in the blocks' delimited user-position note after every system message,
    never in a system role.

    Args:
        facts: a :class:`~convmem.longterm.facts.book.Facts` (sync).
        name: the block's name.
        priority: cut order (facts are usually kept longer than recalls).
        limit: at most this many facts, the most recent ones.
        max_tokens: the block's own cap.
        position: ``"system"`` (the stable note after the system messages) or ``"user"``.
        line: how one fact is written.
        share: the share of the budget (less the reserved output) the block claims, in [0, 1): eviction
            keeps it free of the window, and the block is cut to it (the oldest facts first), so that it
            neither squeezes the window nor changes size with it from turn to turn.
    """

    per_turn = False
    trusted = False  # facts are model output from user text: roles are earned

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
        check_share(share)
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
