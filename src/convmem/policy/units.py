"""Units: the atoms of eviction, and the window that holds them.

A unit is what eviction removes, whole, from the oldest end of the window:

* a user message;
* an assistant message on its own;
* an assistant message with ``tool_calls`` together with *all* the tool
  results that answer its call ids (parallel calls included).

System and developer messages are pinned and never form units. Because a
tool result can only join the unit whose call it answers, and a unit is
evicted whole, no context built from units can orphan a result or leave a
call unanswered (the pending unit at the end is left out until complete).

The :class:`Window` keeps running totals so that every operation on the hot
path is O(1) amortized: ``push`` appends, ``pop_oldest`` evicts.

Example::

    window = Window()
    window.check(message)          # raises InvalidMessageError, changes nothing
    window.push(Entry(seq, message, tokens))
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeAlias

from ..errors import InvalidMessageError
from ..messages import PINNED_ROLES, Message

__all__ = ["Entry", "Unit", "UnitKind", "Window", "group_units"]

UnitKind: TypeAlias = Literal["user", "assistant", "tool_call"]


class Entry:
    """A stored message: its per-session ``seq``, the message and its token count (counted once).

    ``rendered`` caches the OpenAI dict of the message so that assembling a
    context does not re-render the window on every turn. ``carried`` is the
    message as requests send it when per-turn user blocks rode on it (see
    :meth:`Window.carry`); ``message`` stays what was stored, and ``tokens`` and
    ``rendered`` follow what is sent.
    """

    __slots__ = ("carried", "extra", "message", "rendered", "seq", "tokens")

    def __init__(self, seq: int, message: Message, tokens: int) -> None:
        self.seq = seq
        self.message = message
        self.tokens = tokens
        self.rendered: dict[str, Any] | None = None
        self.carried: Message | None = None
        self.extra = 0  # what the carried blocks add to ``tokens``: the stored message is ``tokens - extra``

    @property
    def sent(self) -> Message:
        """The message as a request sends it."""
        return self.carried or self.message

    def __repr__(self) -> str:
        return f"Entry(seq={self.seq}, role={self.message.role!r}, tokens={self.tokens})"


class Unit:
    """One eviction atom; see the module docstring. ``pending`` holds its unanswered call ids."""

    __slots__ = ("entries", "kind", "pending", "tokens")

    def __init__(self, kind: UnitKind, entries: list[Entry], tokens: int, pending: set[str]) -> None:
        self.kind = kind
        self.entries = entries
        self.tokens = tokens
        self.pending = pending

    @property
    def complete(self) -> bool:
        return not self.pending

    @property
    def first_seq(self) -> int:
        return self.entries[0].seq

    @property
    def last_seq(self) -> int:
        return self.entries[-1].seq

    def recount(self, count: Callable[[Message], int]) -> int:
        """Count every entry again with ``count``; returns the unit's new total."""
        self.tokens = 0
        for entry in self.entries:
            entry.tokens = count(entry.sent)
            if entry.carried is not None:
                entry.extra = entry.tokens - count(entry.message)
            self.tokens += entry.tokens
        return self.tokens

    @property
    def messages(self) -> list[Message]:
        """The messages as stored (what eviction archives and summaries fold)."""
        return [entry.message for entry in self.entries]

    @property
    def sent(self) -> list[Message]:
        """The messages as requests send them."""
        return [entry.sent for entry in self.entries]

    def __len__(self) -> int:
        return len(self.entries)


def _unit_kind(message: Message) -> UnitKind:
    if message.role == "user":
        return "user"
    return "tool_call" if message.tool_calls else "assistant"


def _check_against(last: Unit | None, message: Message) -> None:
    """Raise if ``message`` cannot follow a window whose newest unit is ``last``."""
    if message.role in PINNED_ROLES:
        return
    if message.role == "tool":
        call_id = message.tool_call_id
        if last is None or last.kind != "tool_call":
            raise InvalidMessageError(
                f"tool result for call {call_id!r} does not follow an assistant message that called it",
                field="tool_call_id",
            )
        if call_id not in last.pending:
            known = ", ".join(repr(c) for c in sorted(last.pending)) or "none"
            answered = any(e.message.tool_call_id == call_id for e in last.entries[1:])
            why = "is already answered" if answered else f"is unknown (the open calls are {known})"
            raise InvalidMessageError(f"tool call id {call_id!r} {why}", field="tool_call_id")
        return
    if last is not None and last.pending:
        missing = ", ".join(repr(c) for c in sorted(last.pending))
        raise InvalidMessageError(
            f"tool calls {missing} are still unanswered; add their results first, "
            "or call rollback_incomplete() / repair()",
            field="role",
        )


class Window:
    """The active units, newest last, with running token and message totals."""

    __slots__ = ("messages", "pinned", "pinned_tokens", "rendered", "tokens", "units", "unrendered", "user_units")

    def __init__(self) -> None:
        self.units: deque[Unit] = deque()
        # The rendered OpenAI dicts of the window messages, flat and in order, so that
        # assembling an OpenAI context is a C-level slice rather than a Python loop.
        self.rendered: deque[dict[str, Any] | None] = deque()
        # How many of them are None (a message that renders as more than one Chat message): assembly
        # copies the cache only when there is none, and asking the deque would be a scan per context.
        self.unrendered = 0
        self.pinned: list[Entry] = []
        self.tokens = 0
        self.messages = 0
        self.pinned_tokens = 0
        self.user_units = 0

    @property
    def last(self) -> Unit | None:
        return self.units[-1] if self.units else None

    @property
    def pending(self) -> Unit | None:
        """The newest unit if it still awaits tool results."""
        units = self.units
        return units[-1] if units and units[-1].pending else None

    def check(self, message: Message) -> None:
        """Validate that ``message`` may be added next; changes nothing."""
        _check_against(self.last, message)

    def check_batch(self, messages: Sequence[Message]) -> None:
        """Validate a whole batch in order without changing the window."""
        if len(messages) == 1:
            try:
                _check_against(self.units[-1] if self.units else None, messages[0])
            except InvalidMessageError as exc:
                raise exc.at(0) from None
            return
        last = self.last
        shadow: Unit | None = None if last is None else Unit(last.kind, [], 0, set(last.pending))
        if shadow is not None and last is not None:
            shadow.entries = last.entries
        for index, message in enumerate(messages):
            try:
                _check_against(shadow, message)
            except InvalidMessageError as exc:
                raise exc.at(index) from None
            if message.role in PINNED_ROLES:
                continue
            if message.role == "tool":
                assert shadow is not None
                shadow.pending = shadow.pending - {message.tool_call_id or ""}
                shadow.entries = [*shadow.entries, Entry(-1, message, 0)]
            else:
                calls = {call.id for call in message.tool_calls}
                shadow = Unit(_unit_kind(message), [Entry(-1, message, 0)], 0, calls)

    def push(self, entry: Entry) -> Unit | None:
        """Add a checked entry; returns the unit it joined (None when pinned)."""
        message = entry.message
        if message.role in PINNED_ROLES:
            self.pinned.append(entry)
            self.pinned_tokens += entry.tokens
            return None
        self.tokens += entry.tokens
        self.messages += 1
        self.rendered.append(entry.rendered)
        self.unrendered += entry.rendered is None
        if message.role == "tool":
            unit = self.units[-1]
            unit.entries.append(entry)
            unit.tokens += entry.tokens
            unit.pending.discard(message.tool_call_id or "")
            return unit
        if message.tool_calls:
            unit = Unit("tool_call", [entry], entry.tokens, {c.id for c in message.tool_calls})
        elif message.role == "user":
            unit = Unit("user", [entry], entry.tokens, set())
            self.user_units += 1
        else:
            unit = Unit("assistant", [entry], entry.tokens, set())
        self.units.append(unit)
        return unit

    def recount(self, count: Callable[[Message], int]) -> None:
        """Count every entry again with ``count`` (a calibrated counter has learned) and redo the totals."""
        self.pinned_tokens = 0
        for entry in self.pinned:
            entry.tokens = count(entry.message)
            self.pinned_tokens += entry.tokens
        self.tokens = sum(unit.recount(count) for unit in self.units)

    def carry(self, seq: int, message: Message, tokens: int, rendered: dict[str, Any] | None) -> bool:
        """Send the user message ``seq`` as ``message`` from now on (with the user blocks it was sent with).

        ``tokens`` is its count as sent. O(the units after it). Returns False, changing nothing, when
        ``seq`` is not a user message of the window or already carries blocks.
        """
        after = 0
        for unit in reversed(self.units):
            entry = unit.entries[0]
            if unit.kind == "user" and entry.seq == seq:
                if entry.carried is not None:
                    return False
                extra = tokens - entry.tokens
                self.unrendered += (rendered is None) - (entry.rendered is None)
                entry.carried, entry.tokens, entry.extra, entry.rendered = message, tokens, extra, rendered
                unit.tokens += extra
                self.tokens += extra
                self.rendered[len(self.rendered) - 1 - after] = rendered
                return True
            if unit.last_seq < seq:
                return False
            after += len(unit.entries)
        return False

    def pop_oldest(self) -> Unit:
        return self._removed(self.units.popleft(), self.rendered.popleft)

    def pop_newest(self) -> Unit:
        return self._removed(self.units.pop(), self.rendered.pop)

    def _removed(self, unit: Unit, pop_rendered: Callable[[], dict[str, Any] | None]) -> Unit:
        """Take ``unit``, just removed from one end of the window, out of the totals (``pop_rendered``: that end)."""
        for _ in unit.entries:
            if pop_rendered() is None:
                self.unrendered -= 1
        self.tokens -= unit.tokens
        self.messages -= len(unit.entries)
        if unit.kind == "user":
            self.user_units -= 1
        return unit

    def unpush(self, entry: Entry) -> None:
        """Undo the latest :meth:`push` of ``entry`` (a write that failed must leave the window as it was)."""
        message = entry.message
        if message.role in PINNED_ROLES:
            self.pinned.pop()
            self.pinned_tokens -= entry.tokens
            return
        self.tokens -= entry.tokens
        self.messages -= 1
        if self.rendered.pop() is None:
            self.unrendered -= 1
        unit = self.units[-1]
        if message.role == "tool":
            unit.entries.pop()
            unit.tokens -= entry.tokens
            unit.pending.add(message.tool_call_id or "")
            return
        self.units.pop()
        if unit.kind == "user":
            self.user_units -= 1

    def unpop_oldest(self, unit: Unit) -> None:
        """Undo :meth:`pop_oldest`: ``unit`` becomes the oldest unit again."""
        self.units.appendleft(unit)
        self.rendered.extendleft(reversed([entry.rendered for entry in unit.entries]))
        self.unrendered += sum(entry.rendered is None for entry in unit.entries)
        self.tokens += unit.tokens
        self.messages += len(unit.entries)
        if unit.kind == "user":
            self.user_units += 1

    def entries(self) -> Iterator[Entry]:
        for unit in self.units:
            yield from unit.entries

    def __len__(self) -> int:
        return len(self.units)


def group_units(messages: Sequence[Message]) -> list[list[Message]]:
    """Group a valid, pinned-free message list into units (for tests and tools).

    Raises:
        InvalidMessageError: when the list breaks a tool-call rule; the error
            carries the index of the offending message.
    """
    window = Window()
    window.check_batch(messages)
    for seq, message in enumerate(messages):
        window.push(Entry(seq, message, 0))
    return [unit.messages for unit in window.units]
