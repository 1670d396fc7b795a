"""Blocks: named sources of context, each with a priority, a token limit and a position.

Every turn the memory asks each block for its text and assembly fits them
into the budget: the highest ``priority`` number is cut first, and priority
0 is never cut. A block is anything with ``name``, ``priority`` and
``render(query)``; it may also have:

* ``max_tokens``: its own cap, applied (head + marker + tail) before assembly;
* ``position``: ``"system"`` (default: one system message after the pinned
  ones) or ``"user"`` (prepended to the latest user message, where models
  attend most and where a provider's prompt cache of the system part stays
  valid);
* ``trusted``: whether its text is the application's own (default True for a block of the
  application's own class). Roles are earned: a block whose text users, tools or models wrote
  (``WorkingBlock``, which agents edit; ``FactsBlock``; ``RecallBlock``; a ``StaticBlock(trusted=False)``
  built from what the service's API stored) says False and is never sent in a system message: at
  ``"system"`` it goes into one delimited user-position note after every system message
  (:data:`~convmem.policy.placement.BLOCKS_NOTE`), or with the user blocks if it changes every turn;
* ``render_turn(turn)``: used instead of ``render`` when present; a
  :class:`Turn` says whose memory and which session is asking, what the
  input is, and where the window starts, so dynamic blocks (facts, recall)
  stay within the user and never repeat the window.

Built in: :class:`StaticBlock`, :class:`CallableBlock`, :class:`WorkingBlock`
(editable, Letta's core memory), and in :mod:`convmem.longterm.facts.block` and :mod:`convmem.longterm.recall.block`
``FactsBlock`` and ``RecallBlock``.

Example::

    persona = WorkingBlock("persona", "You are terse.", priority=0, max_tokens=200)
    memory = Memory(model="gpt-4o", blocks=[persona, StaticBlock("style", "Use British spelling.")])
    persona.append("The user's name is Alice.")     # seen from the next context() on
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, runtime_checkable

from ...errors import BlockEditError, ConfigurationError, ConflictError
from .store import BlockRecord, BlockStore

if TYPE_CHECKING:
    from ...tokens import TokenCounter

__all__ = ["Block", "CallableBlock", "Position", "StaticBlock", "Turn", "WorkingBlock", "stored_block"]

Position: TypeAlias = Literal["system", "user"]


@dataclass(frozen=True, slots=True)
class Turn:
    """What a block knows about the turn it renders for.

    Attributes:
        query: the text of the current input (or of the newest user message), if any.
        session_id: the asking memory's session.
        user_id: the asking memory's user: dynamic blocks show this user's data only.
        window_start: the first seq of the window; messages of this session from
            here on are already in context.
        now: the time of the turn (for facts valid now).
    """

    query: str | None
    session_id: str | None = None
    user_id: str | None = None
    window_start: int | None = None
    now: datetime | None = None


@runtime_checkable
class Block(Protocol):
    """A named source of context text."""

    name: str
    priority: int

    def render(self, query: str | None) -> str:
        """The block's text for this turn; ``query`` is the text of the current input, if any."""
        ...


def check_block(name: str, priority: int, max_tokens: int | None = None, position: str = "system") -> None:
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigurationError(f"block name must be a non-empty identifier, got {name!r}")
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise ConfigurationError(f"block priority must be an integer >= 0, got {priority!r}")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ConfigurationError(f"block max_tokens must be a positive integer, got {max_tokens!r}")
    if position not in ("system", "user"):
        raise ConfigurationError(f"block position must be 'system' or 'user', got {position!r}")


def check_share(share: object) -> None:
    """A block's claim on the budget: a share of it (less the reserved output) in [0, 1)."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share < 1.0:
        raise ConfigurationError(f"share must be a number in [0, 1), got {share!r}")


class StaticBlock:
    """Fixed text: the application's own (``trusted``), unless built from what others wrote (``trusted=False``)."""

    def __init__(
        self,
        name: str,
        text: str,
        *,
        priority: int = 1,
        max_tokens: int | None = None,
        position: Position = "system",
        trusted: bool = True,
    ) -> None:
        check_block(name, priority, max_tokens, position)
        self.name, self.text, self.priority = name, text, priority
        self.max_tokens, self.position, self.trusted = max_tokens, position, bool(trusted)

    def render(self, query: str | None) -> str:
        return self.text


def stored_block(record: BlockRecord, *, priority: int | None = None) -> StaticBlock:
    """A stored block record as the block a memory renders: its text is what a client or an agent wrote over the
    service's or the MCP server's API, so it is never trusted (never sent in a system message)."""
    position: Position = "user" if record.position == "user" else "system"
    return StaticBlock(
        record.name,
        record.value,
        priority=record.priority if priority is None else priority,
        max_tokens=record.max_tokens,
        position=position,
        trusted=False,
    )


class CallableBlock:
    """Text produced by a callable on every turn, e.g. a task list kept always in context (priority 0).

    The callable is the application's, so its text is (``trusted``); say ``trusted=False`` when it returns what
    users, tools or models wrote.
    """

    def __init__(
        self,
        name: str,
        provider: Callable[[], str],
        *,
        priority: int = 0,
        max_tokens: int | None = None,
        position: Position = "system",
        trusted: bool = True,
    ) -> None:
        check_block(name, priority, max_tokens, position)
        self.name, self.provider, self.priority = name, provider, priority
        self.max_tokens, self.position, self.trusted = max_tokens, position, bool(trusted)

    def render(self, query: str | None) -> str:
        text = self.provider()
        if not isinstance(text, str):
            raise ConfigurationError(f"block {self.name!r}: provider returned {type(text).__name__}, not str")
        return text


class WorkingBlock:
    """An editable block, like a Letta core-memory block: ``update``, ``append`` and ``replace``.

    Every edit is checked against ``max_tokens`` (a :class:`~convmem.errors.BlockEditError`
    tells the editing agent to shorten its text; nothing changes) and bumps
    ``version``. Edits are optimistic: pass ``expected_version`` (the version
    the caller read) and a stale edit raises :class:`~convmem.errors.ConflictError`.
    With a ``store`` the block persists per ``scope`` (usually the user id);
    an edit made by another process since this one loaded also raises
    ConflictError; :meth:`reload` and retry.

    Its value is what an agent (a model) or a client edits, so it is not the application's own text
    (``trusted`` False): at ``"system"`` it is sent in the blocks' user-position note, never a system message.

    Args:
        name: the block's name (also its tag in the default template).
        value: the initial text, used only if the store has no such block yet.
        priority: cut order under budget pressure (0 is never cut).
        max_tokens: the limit every edit must respect.
        position: ``"system"`` (the stable note after the system messages) or ``"user"``.
        description: what the block is for (for an agent's tool description).
        store: where it persists; in memory only if None.
        scope: whose block it is (the user id); blocks of different scopes are independent.
        counter: counts ``max_tokens``; o200k_base by default.
    """

    def __init__(
        self,
        name: str,
        value: str = "",
        *,
        priority: int = 1,
        max_tokens: int | None = None,
        position: Position = "system",
        description: str | None = None,
        store: BlockStore | None = None,
        scope: str | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        check_block(name, priority, max_tokens, position)
        self.name, self.priority, self.max_tokens, self.position = name, priority, max_tokens, position
        self.trusted = False  # agents and clients edit it: roles are earned
        self.description, self.store, self.scope = description, store, scope
        self._counter = counter
        self._lock = threading.Lock()
        self._check_limit(value)
        record = store.load_block(scope, name) if store is not None else None
        if record is None:
            record = BlockRecord(scope, name, value, 0, priority, position, max_tokens, description)
            if store is not None:
                try:
                    record = store.save_block(record, expected_version=0)
                except ConflictError:  # another process created it first: theirs wins
                    record = store.load_block(scope, name) or record
        self._record = record

    @property
    def value(self) -> str:
        return self._record.value

    @property
    def version(self) -> int:
        return self._record.version

    def render(self, query: str | None) -> str:
        return self._record.value

    def tokens(self) -> int:
        return self._count(self._record.value)

    def update(self, value: str, *, expected_version: int | None = None) -> int:
        """Replace the whole value; returns the new version."""
        return self._edit(lambda _: value, expected_version)

    def append(self, text: str, *, separator: str = "\n", expected_version: int | None = None) -> int:
        """Add ``text`` at the end (after ``separator`` if the block is not empty); returns the new version."""
        return self._edit(lambda old: f"{old}{separator}{text}" if old else text, expected_version)

    def replace(self, old: str, new: str, *, expected_version: int | None = None) -> int:
        """Replace the one occurrence of ``old`` by ``new``; raises BlockEditError if it is absent or ambiguous."""

        def swap(value: str) -> str:
            found = value.count(old) if old else 0
            if found != 1:
                where = "not found" if found == 0 else f"found {found} times; quote more context"
                raise BlockEditError(f"block {self.name!r}: text to replace {where}: {old!r}")
            return value.replace(old, new)

        return self._edit(swap, expected_version)

    def reload(self) -> None:
        """Read the stored value again (after a ConflictError)."""
        if self.store is not None:
            record = self.store.load_block(self.scope, self.name)
            if record is not None:
                with self._lock:
                    self._record = record

    def _edit(self, change: Callable[[str], str], expected_version: int | None) -> int:
        with self._lock:
            current = self._record
            if expected_version is not None and expected_version != current.version:
                raise ConflictError(
                    f"block {self.name!r} is at version {current.version}, not {expected_version}; read it again"
                )
            value = change(current.value)
            self._check_limit(value)
            record = BlockRecord(
                self.scope,
                self.name,
                value,
                current.version + 1,
                self.priority,
                self.position,
                self.max_tokens,
                self.description,
            )
            if self.store is not None:
                record = self.store.save_block(record, expected_version=current.version)
            self._record = record
            return record.version

    def _check_limit(self, value: str) -> None:
        if self.max_tokens is not None:
            tokens = self._count(value)
            if tokens > self.max_tokens:
                raise BlockEditError(
                    f"block {self.name!r} holds at most {self.max_tokens} tokens; this edit makes it {tokens}. "
                    "Shorten or summarize the text first."
                )

    def _count(self, text: str) -> int:
        if self._counter is None:
            from ...tokens import counter_for

            self._counter = counter_for("gpt-4o")
        return self._counter.count_text(text)
