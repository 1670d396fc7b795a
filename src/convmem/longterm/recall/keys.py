"""Keys: the text recall indexes for an archived message.

A key is the message's text, optionally enriched: the speaker's name, the day it
was said, and facts extracted from it (LongMemEval found fact-augmented keys raise
recall). The message before it in the session is indexed lexically beside the key
(``context``) at :attr:`~convmem.longterm.recall.ranking.Tuning.context_weight`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...messages import Message

__all__ = ["Keys"]


@dataclass(frozen=True, slots=True)
class Keys:
    """How a message's indexed key is built from its text.

    Attributes:
        speaker: prefix the speaker (the message's ``name``, else its role).
        date: append the day it was said, e.g. ``(8 May 2023)``.
        facts: a :class:`~convmem.longterm.facts.book.Facts` whose facts sourced
            from the message are appended (give it as a sink *before* the index).
        context: index the previous message of the session lexically with the key,
            at ``Tuning.context_weight``.
    """

    speaker: bool = False
    date: bool = False
    facts: Any = None
    context: bool = True

    def build(self, message: Message, user_id: str | None, session_id: str | None = None) -> str:
        """The key of ``message``; facts sourced from it must come from its session (ids repeat across sessions)."""
        text = message.text
        if self.speaker:
            text = f"{message.name or message.role}: {text}"
        if self.date and message.created_at is not None:
            text = f"{text} ({message.created_at.day} {message.created_at:%B %Y})"
        if self.facts is not None and message.id is not None:
            sourced = [
                f.text
                for f in self.facts.history(user_id=user_id)
                if message.id in f.source_message_ids and (session_id is None or f.session_id in (None, session_id))
            ]
            if sourced:
                text = f"{text}\n" + "\n".join(sourced)
        return text
