"""Blocks: named sources of context, each with a priority.

Every turn the memory asks each block for its text (recall blocks use the
current input as their query) and assembly fits them into the budget: the
highest ``priority`` number is cut first, and priority 0 is never cut.

Example::

    memory = Memory(
        model="gpt-4o",
        blocks=[StaticBlock("persona", "You are terse.", priority=0)],
        pinned_context=lambda: todo_list.render(),   # always kept in context
    )
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..errors import ConfigurationError

__all__ = ["Block", "CallableBlock", "StaticBlock"]


@runtime_checkable
class Block(Protocol):
    """A named source of context text."""

    name: str
    priority: int

    def render(self, query: str | None) -> str:
        """The block's text for this turn; ``query`` is the text of the current input, if any."""
        ...


def _check(name: str, priority: int) -> None:
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigurationError(f"block name must be a non-empty identifier, got {name!r}")
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise ConfigurationError(f"block priority must be an integer >= 0, got {priority!r}")


class StaticBlock:
    """Fixed text."""

    def __init__(self, name: str, text: str, *, priority: int = 1) -> None:
        _check(name, priority)
        self.name, self.text, self.priority = name, text, priority

    def render(self, query: str | None) -> str:
        return self.text


class CallableBlock:
    """Text produced by a callable on every turn, e.g. a task list kept always in context (priority 0)."""

    def __init__(self, name: str, provider: Callable[[], str], *, priority: int = 0) -> None:
        _check(name, priority)
        self.name, self.provider, self.priority = name, provider, priority

    def render(self, query: str | None) -> str:
        text = self.provider()
        if not isinstance(text, str):
            raise ConfigurationError(f"block {self.name!r}: provider returned {type(text).__name__}, not str")
        return text
