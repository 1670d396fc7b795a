"""``ConvmemContextProvider``: the user's long-term memory in every Agent Framework run, and each run remembered.

Before a run: the user's working blocks and facts valid now, and the archived messages recall finds for
the run's user input (convmem's recall over the store's index: BM25 with its ranking steps, hybrid
with vectors where the store has them), as the run's instructions, cut to ``max_tokens`` by the
model's counter (blocks first, then facts, then the recalled messages, best first). After a run:
its messages, the inputs and the response, are indexed in the user's recall archive under the
session's id, each once (a durable id chained from the previous message, kept in the session's
state, so a restored ``AgentSession`` goes on with the same chain).

Where the history is a :class:`~convmem.integrations.agent_framework.ConvmemHistoryProvider` over a
``Memory(facts=True, recall=True)``, the memory already renders its facts and recall inside its
budget; this provider is for agents whose history the service keeps (``store=True``) or another
provider holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ...errors import ConfigurationError
from ...formats import parse_messages
from ...messages import StoredMessage
from ...tokens import counter_for
from .. import missing
from .._identity import fingerprint
from .history import _dicts

try:
    from agent_framework import ContextProvider, Message
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("agent-framework-core", "agent-framework") from exc

__all__ = ["ConvmemContextProvider"]

_LAST, _SEQ = "last", "seq"  # the session state's keys: the newest indexed message's id, the next seq


class ConvmemContextProvider(ContextProvider):
    """An Agent Framework ``ContextProvider`` over a convmem store's long-term memory (see the module docstring).

    Args:
        store: a convmem store with long-term memory (``facts()``, ``blocks()``, ``recall()``).
        user_id: the user, or a function from the ``AgentSession`` to its user.
        k: how many recalled messages at most.
        max_tokens: the cap of the instructions this provider adds, counted by ``model``'s counter.
        model: the model whose counter counts them.
    """

    DEFAULT_SOURCE_ID = "convmem-memory"

    def __init__(
        self,
        store: Any,
        *,
        user_id: str | Callable[[Any], str],
        k: int = 5,
        max_tokens: int = 1_000,
        model: str = "gpt-4o",
        source_id: str = DEFAULT_SOURCE_ID,
    ) -> None:
        super().__init__(source_id)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise ConfigurationError(f"k must be an integer from 1 to 100, got {k!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 1_000_000:
            raise ConfigurationError(f"max_tokens must be an integer from 1 to 1000000, got {max_tokens!r}")
        if not all(callable(getattr(store, kind, None)) for kind in ("facts", "blocks", "recall")):
            raise ConfigurationError("ConvmemContextProvider needs a convmem store with long-term memory")
        from ...longterm.recall import RecallIndex

        self.store, self.user_id, self.k, self.max_tokens = store, user_id, k, max_tokens
        self.counter = counter_for(model)
        self.index = RecallIndex(store=store.recall())

    def _user(self, session: Any) -> str:
        return self.user_id if isinstance(self.user_id, str) else str(self.user_id(session))

    async def before_run(self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]) -> None:
        query = " ".join(m.text for m in context.input_messages if str(m.role) == "user").strip()
        text = await asyncio.to_thread(self.recall, self._user(session), query)  # the stores are sync
        if text:
            context.extend_instructions(self.source_id, text)

    def recall(self, user_id: str, query: str) -> str:
        """The instructions for a run of ``user_id`` asking ``query``: blocks, facts, recalled messages."""
        lines = [f"{b.name}: {b.value}" for b in self.store.blocks().list_blocks(user_id) if b.value.strip()]
        now = datetime.now(timezone.utc)
        lines += [f"- {f.text}" for f in self.store.facts().list_facts(user_id=user_id, valid_at=now)]
        if query:
            hits = self.index.search(query, user_id=user_id, k=self.k)
            lines += [f"[{h.doc.created_at:%Y-%m-%d}] {h.doc.role}: {h.doc.text}" for h in hits]
        kept, used = [], self.counter.count_text("What you remember about this user:\n")
        for line in lines:
            cost = self.counter.count_text(line + "\n")
            if used + cost > self.max_tokens:
                break  # in order of trust: blocks, then facts, then recall's best first
            kept.append(line)
            used += cost
        return "What you remember about this user:\n" + "\n".join(kept) if kept else ""

    async def after_run(self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]) -> None:
        response = context.response
        messages = [*context.input_messages, *(response.messages if response is not None else [])]
        await asyncio.to_thread(self._remember, self._user(session), str(session.session_id), messages, state)

    def _remember(self, user_id: str, session_id: str, messages: Sequence[Message], state: dict[str, Any]) -> None:
        parsed = parse_messages([d for m in messages for d in _dicts(m)], format="openai") if messages else []
        stored, last, seq = [], state.get(_LAST), int(state.get(_SEQ, 0))
        now = datetime.now(timezone.utc)  # when it was said: recall dates what it finds
        for message in parsed:
            last = fingerprint(last, message)
            stored.append(StoredMessage(seq, replace(message, id=last, created_at=message.created_at or now), 0))
            seq += 1
        if stored:
            self.index.add_messages(stored, session_id=session_id, user_id=user_id)
            state[_LAST], state[_SEQ] = last, seq
