"""How the commands' help reads: plain text at any width, arguments named as in the usage line.

What comes in: the commands as typer builds them. What happens: the help is click's plain
layout (no rich panels: their option column wraps into a strip a few characters wide at 80
columns); an argument is shown by its metavar alone, as ``TRANSCRIPT`` (typer's own layout
adds ``{...}`` around a required one and a ``<type>`` tag after it). What goes out: the
command class every command is registered with (``cls=PlainCommand``);
``tests/cli/test_help.py`` renders every ``--help`` at 80 columns.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand

__all__ = ["PlainCommand"]


class _PlainArgument(TyperArgument):
    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        return name if self.required else f"[{name}]"

    def display_type_rich(self, ctx: Any) -> str | None:  # typer vendors click: its Context is its own
        return None


class PlainCommand(TyperCommand):
    """A command whose arguments show as their metavars (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _PlainArgument  # the same parameter, shown plainly
