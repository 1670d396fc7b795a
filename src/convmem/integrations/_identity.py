"""Which of a framework's messages the memory already holds, by a durable identity, never by process memory.

What comes in: a batch of messages a framework hands an adapter (its whole history,
as a LangGraph state or a Pydantic AI ``message_history`` is, or only what is new,
as ``add_messages`` and ``put`` are), each with the framework's own id where it has
one; and a :class:`Ledger` of what the memory holds, read from the memory itself.
What happens (:func:`plan`): every message gets its durable id, and those the
memory holds are told apart from the new ones. What goes out: the new messages,
with ids, to add in one write (:func:`sync` does it, once, however often the
framework hands the same messages again: after a restart, a checkpointer restore,
a new adapter object, a retry).

A message's id is, in this order:

* the framework's own id (a LangChain message id, an id stamped on a Pydantic AI message);
* for a system or developer message, the id of the pinned system message with the same
  text (a system prompt is one message however it reached the memory), else a fingerprint
  of it alone; system messages do not take part in the chain below;
* else a fingerprint: a hash of the message's content chained to the id of the message
  before it (the same words at another place are another message, and a message's id
  does not depend on how many messages came before the ones the batch starts with).

A whole history continues the memory when it holds the memory's newest message (then the
messages after it are new); any other history (a run that starts without its history) is
all new, and so is a batch of what the framework adds: both chain from the memory's newest
message. A retry after a lost answer
sends the same messages under the same ids, since the adapter's reading of the memory has
not moved (the write failed for it), and the store then stores nothing. No batch is ever
taken for a retry by its content alone: the same words twice (a user who says "ok" again,
a model that answers the same) are two turns, and nothing said is dropped. So a retry
that only a restarted adapter sends, of messages without an id of their framework, is
stored again: the one case where the memory cannot tell.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..errors import ConfigurationError, ConflictError
from ..messages import Message
from ..stores.codec import encode_message
from ._bridge import MemoryFlow, on

__all__ = ["SYSTEM_ROLES", "Ledger", "Planned", "fingerprint", "plan", "read_ledger", "sync"]

SYSTEM_ROLES = frozenset({"system", "developer"})


def fingerprint(previous: str | None, message: Message) -> str:
    """A durable id for ``message`` after the message whose id is ``previous`` (None: the first)."""
    bare = encode_message(replace(message, id=None, created_at=None, metadata={}))
    text = json.dumps(bare, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(f"{previous or ''}\n{text}".encode()).hexdigest()
    return f"cm-{digest[:32]}"


@dataclass
class Ledger:
    """What a memory holds, as read from it: the ids of its messages in order, its pinned system prompts.

    Attributes:
        order: the ids of its messages other than system and developer ones, oldest first.
        ids: every id it holds (system messages' too).
        system: the text of each pinned system or developer message -> its id.
    """

    order: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    system: dict[str, str] = field(default_factory=dict)

    @property
    def last(self) -> str | None:
        """The id of the newest message that is not a system message (None: there is none)."""
        return self.order[-1] if self.order else None

    def hold(self, messages: Sequence[Message]) -> None:
        """Record messages the memory has just stored."""
        for message in messages:
            key = message.id or ""
            if key in self.ids:
                continue
            self.ids.add(key)
            if message.role in SYSTEM_ROLES:
                self.system.setdefault(message.text, key)
            else:
                self.order.append(key)


def read_ledger() -> MemoryFlow[Ledger]:
    """Read the ledger from the memory (every stored message once, then the pinned ones)."""
    stored: list[Message] = yield on("messages")
    ledger = Ledger(ids={m.id or "" for m in stored})
    ledger.order = [m.id or "" for m in stored if m.role not in SYSTEM_ROLES]
    if any(m.role in SYSTEM_ROLES for m in stored):  # only a pinned one is in every context: only it counts
        pinned: list[Message] = yield on("messages", "pinned")
        ledger.system = {m.text: m.id or "" for m in reversed(pinned) if m.role in SYSTEM_ROLES}
    return ledger


@dataclass(frozen=True, slots=True)
class Planned:
    """A batch with its durable ids (``messages``, in order) and the ones the memory does not hold (``new``)."""

    messages: list[Message]
    new: list[Message]


def plan(
    batch: Sequence[Message], given: Sequence[str | None], ledger: Ledger, *, history: bool, strict: bool = False
) -> Planned:
    """Give every message of ``batch`` its durable id and find the ones ``ledger`` does not hold.

    Args:
        batch: the messages, in the framework's order.
        given: the framework's own id of each message (None where it has none).
        ledger: what the memory holds.
        history: the batch is the framework's whole history (a LangGraph state, a Pydantic AI
            ``message_history``), which may continue the memory; else it is what the framework
            adds (``add_messages``, ``put``, ``add_items``), which follows the memory's newest message.
        strict: refuse a batch that does not continue the memory (it lacks the memory's newest
            message: a graph that removed or replaced messages, or another thread's history).

    Raises:
        ConfigurationError: ``strict`` and the batch cannot be followed, or a message the memory
            holds comes after one it does not (the framework inserted a message into its history).
    """
    ids = _chained(batch, given, ledger, anchor=None if history else ledger.last)
    chained = [key for key, m in zip(ids, batch, strict=True) if m.role not in SYSTEM_ROLES]
    if history and ledger.last is not None and ledger.last not in chained:
        if strict:
            raise ConfigurationError(
                "the framework's history no longer holds the newest message this memory holds (it removed or "
                "replaced messages); give each thread its own memory and let the memory, not the graph, trim"
            )
        ids = _chained(batch, given, ledger, anchor=ledger.last)
    keyed = [replace(m, id=key) for m, key in zip(batch, ids, strict=True)]
    new = [m for m in keyed if m.id not in ledger.ids]
    first_new = next((i for i, m in enumerate(keyed) if m.id not in ledger.ids), len(keyed))
    if any(m.id in ledger.ids and m.role not in SYSTEM_ROLES for m in keyed[first_new:]):
        raise ConfigurationError(
            "the framework's history holds a message this memory stores after one it does not store: it inserted "
            "a message into its history, which the memory cannot follow"
        )
    return Planned(keyed, new)


def _chained(batch: Sequence[Message], given: Sequence[str | None], ledger: Ledger, *, anchor: str | None) -> list[str]:
    ids = []
    previous = anchor
    for message, own in zip(batch, given, strict=True):
        if message.role in SYSTEM_ROLES:
            ids.append(own or ledger.system.get(message.text) or fingerprint("system", message))
            continue
        key = own or fingerprint(previous, message)
        ids.append(key)
        previous = key
    return ids


def sync(
    batch: Sequence[Message], given: Sequence[str | None], ledger: Ledger, *, history: bool, strict: bool = False
) -> MemoryFlow[Planned]:
    """Add the messages of ``batch`` the memory does not hold, in one write; returns the plan (see :func:`plan`).

    The ledger is the adapter's reading of the memory; when another writer stored some of the
    batch meanwhile (the store refuses a batch of held and new ids), it is read again and the
    batch planned once more.
    """
    planned = plan(batch, given, ledger, history=history, strict=strict)
    if planned.new:
        try:
            yield on("add_many", planned.new)
        except ConflictError:
            fresh = yield from read_ledger()
            ledger.order, ledger.ids, ledger.system = fresh.order, fresh.ids, fresh.system
            planned = plan(batch, given, ledger, history=history, strict=strict)
            if planned.new:
                yield on("add_many", planned.new)
        ledger.hold(planned.new)
    return planned
