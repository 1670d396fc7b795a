"""The ``convmem`` command line (typer + rich).

Commands:

* ``convmem replay TRANSCRIPT.jsonl`` -- replay a transcript through a Memory and
  report tokens, evictions and summaries per turn (:mod:`convmem.cli.replay`).
* ``convmem sessions list|show|export|import|delete|fork`` -- stored sessions
  (:mod:`convmem.cli.sessions`).
* ``convmem forget --user ID [--session S]``, ``convmem sweep`` and ``convmem compact`` -- erase a user,
  a session or the sessions a retention policy no longer allows, then clear what the storage still holds
  (:mod:`convmem.cli.forget`).
* ``convmem mcp --user ID`` -- one user's long-term memory as an MCP server (:mod:`convmem.cli.mcp`).
* ``convmem serve`` and ``convmem keys create|list|revoke`` -- the HTTP service and its
  API keys (:mod:`convmem.cli.serve`).

Each command lives in its own module and is registered below with one line.

Usage::

    convmem --version
    convmem replay examples/agent_session.jsonl --strategy summary_buffer --max-tokens 16000
"""

from __future__ import annotations

from typing import Annotated

import typer

from .. import __version__
from ._help import PlainCommand
from .forget import compact, forget, sweep
from .mcp import mcp
from .replay import replay
from .serve import keys_app, serve
from .sessions import sessions_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="convmem",
    help="Memory for LLM conversations and agents: exact token budgets, tool-call-safe eviction, summaries.",
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # a transcript in a local would flood the screen
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"convmem {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Memory for LLM conversations and agents: exact token budgets, tool-call-safe eviction, summaries."""


app.command(name="replay", cls=PlainCommand)(replay)
app.add_typer(sessions_app, name="sessions")
app.command(name="mcp", cls=PlainCommand)(mcp)
app.command(name="serve", cls=PlainCommand)(serve)
app.add_typer(keys_app, name="keys")
app.command(name="forget", cls=PlainCommand)(forget)
app.command(name="sweep", cls=PlainCommand)(sweep)
app.command(name="compact", cls=PlainCommand)(compact)


def main() -> None:
    """Entry point of the ``convmem`` script and of ``python -m convmem``."""
    app(prog_name="convmem")
