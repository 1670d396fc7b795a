"""Every ``--help`` at 80 columns reads like a command line's: plain text, no column squeezed, no line too long.

The commands are found by walking the app (a new command is checked without being listed
here). Each help is rendered in a process with ``COLUMNS=80``, as a terminal of that width
would show it, and must hold no reST markup (````x````), no typer placeholder (``<str>``,
``<bool>``, ``{ARG}``), no line over 80 characters, and a help column at least 38 wide.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from convmem.cli import app

ROOT = Path(__file__).resolve().parents[2]
NARROWEST = 38  # the help text of an option never starts further right than column 80 - this


def commands() -> list[list[str]]:
    """The path of every command and group of the app, the root included."""
    found: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:  # typer vendors click: its classes are its own
        found.append(path)
        for name, sub in (getattr(command, "commands", None) or {}).items():  # a group's commands
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def render(path: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "convmem", *path, "--help"],
        env={"COLUMNS": "80", "PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def help_column(text: str) -> int:
    """The column where the option and argument help starts (the widest indent of a two-column row)."""
    starts = [len(m.group(1)) for m in re.finditer(r"^(  [-A-Za-z].*?[ ]{2,})\S", text, flags=re.M)]
    return max(starts, default=0)


ALL = commands()


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(path) for path in ALL}
    assert {"", "replay", "sessions list", "sessions fork", "mcp", "serve", "keys create", "keys revoke"} <= names


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "convmem")
def test_help_reads_at_80_columns(path: list[str]) -> None:
    text = render(path)
    assert text.startswith("Usage: convmem")
    assert "``" not in text, "reST markup in the help"
    placeholders = re.findall(r"<[a-z][a-z ]*>|\{[A-Za-z_]+\}", text)
    assert placeholders == [], f"placeholders in the help: {placeholders}"
    long = [line for line in text.splitlines() if len(line) > 80]
    assert long == [], f"lines over 80 columns: {long}"
    assert 80 - help_column(text) >= NARROWEST, f"the help column is {80 - help_column(text)} wide:\n{text}"


def test_the_checks_catch_what_they_look_for() -> None:
    squeezed = "Options:\n  --a-very-long-option-name-with-a-value VALUE_NAME_HERE  help\n"
    assert 80 - help_column(squeezed) < NARROWEST
    assert re.findall(r"<[a-z][a-z ]*>|\{[A-Za-z_]+\}", "  --x <int range>  {ARG}") == ["<int range>", "{ARG}"]
