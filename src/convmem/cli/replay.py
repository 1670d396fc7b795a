"""``convmem replay``: run a JSONL transcript through a Memory and report every turn.

Each line of the transcript is one message in OpenAI Chat Completions, Anthropic
Messages or OpenAI Responses format (detected from the lines, or ``--format``).
Replay adds the messages in order, calls ``context()`` at the end of every turn
(see :mod:`convmem.cli._replayer` for what a turn is), and prints a per-turn
table and a summary, or ``--json``.

``summary_buffer`` and ``compaction`` need a summarizer; replay never calls an
LLM, so it uses a deterministic *extractive* one and says so in its output.

A line that cannot be replayed (bad JSON, or a message convmem refuses) stops
the replay with exit code 2 and ``FILE, line N: reason``; nothing of that line
is stored.

Usage::

    convmem replay examples/agent_session.jsonl --model gpt-4o \\
        --strategy summary_buffer --max-tokens 16000
    convmem replay chat.jsonl --strategy sliding_window --max-messages 40 --json | jq .summary
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import ConvmemError
from ..formats import Format
from ..memory import Memory
from ._hints import program, redact, store_flags
from ._replayer import ReplayResult, replay_file
from ._report import Setup, as_json, print_report
from ._summarizer import make_summarizer
from ._transcript import Line, TranscriptError, detect, read_lines

__all__ = ["replay"]

DEFAULT_MAX_MESSAGES = 50


class StrategyName(str, Enum):
    token_budget = "token_budget"
    sliding_window = "sliding_window"
    summary_buffer = "summary_buffer"
    compaction = "compaction"


class FormatName(str, Enum):
    openai = "openai"
    anthropic = "anthropic"
    responses = "responses"


def _strategy_options(
    strategy: StrategyName, max_messages: int | None, keep_recent_tokens: int | None
) -> dict[str, Any]:
    if max_messages is not None and strategy is not StrategyName.sliding_window:
        raise typer.BadParameter("only applies to --strategy sliding_window", param_hint="--max-messages")
    if keep_recent_tokens is not None and strategy is not StrategyName.summary_buffer:
        raise typer.BadParameter("only applies to --strategy summary_buffer", param_hint="--keep-recent-tokens")
    if strategy is StrategyName.sliding_window:
        return {"max_messages": max_messages or DEFAULT_MAX_MESSAGES}
    if keep_recent_tokens is not None:
        return {"keep_recent_tokens": keep_recent_tokens}
    return {}


def _fail(console: Console, message: str) -> typer.Exit:
    # soft_wrap keeps "FILE, line N" on one line whatever the terminal width.
    console.print(f"[bold red]error:[/bold red] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=2)


def replay(
    transcript: Annotated[
        Path,
        typer.Argument(
            metavar="TRANSCRIPT",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
            help="JSONL file: one OpenAI, Anthropic or Responses message per line.",
        ),
    ],
    model: Annotated[
        str, typer.Option(metavar="MODEL", help="Model whose tokenizer and context window apply.")
    ] = "gpt-4o",
    strategy: Annotated[
        StrategyName,
        typer.Option(
            metavar="NAME", help="Eviction strategy: token_budget, sliding_window, summary_buffer or compaction."
        ),
    ] = StrategyName.token_budget,
    max_tokens: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Total budget (input + reserved output). Default: the model's window."),
    ] = None,
    max_output_tokens: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=0,
            help="Tokens reserved for the reply. Default: the model's maximum, or 0 with --max-tokens.",
        ),
    ] = None,
    max_messages: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help=f"sliding_window only: messages kept (default: {DEFAULT_MAX_MESSAGES})."),
    ] = None,
    keep_recent_tokens: Annotated[
        int | None, typer.Option(metavar="N", min=1, help="summary_buffer only: window tokens kept after each fold.")
    ] = None,
    format: Annotated[
        FormatName | None,
        typer.Option(
            "--format", metavar="FORMAT", help="Transcript format: openai, anthropic or responses (default: detected)."
        ),
    ] = None,
    approximate: Annotated[
        bool, typer.Option("--approximate", help="Count with the fixed approximate counter (cl100k_base x1.15).")
    ] = False,
    calibrated: Annotated[
        bool,
        typer.Option(
            "--calibrated", help="Count a model the registry does not know with the usage-calibrated counter."
        ),
    ] = False,
    every: Annotated[
        int | None, typer.Option(metavar="N", min=1, help="Show a table row every N turns (default: about 40 rows).")
    ] = None,
    as_json_output: Annotated[
        bool, typer.Option("--json", help="Print every turn and the summary as one JSON object instead.")
    ] = False,
    store: Annotated[
        str,
        typer.Option(
            metavar="URL",
            help="Where the session is kept: memory, sqlite (the default database), sqlite:///path.db, "
            "files:///dir, postgresql://..., redis://...",
        ),
    ] = "memory",
) -> None:
    """Replay a JSONL transcript through a Memory and report tokens, evictions and summaries per turn."""
    err = Console(stderr=True)
    options = _strategy_options(strategy, max_messages, keep_recent_tokens)
    summarizer, summarizer_label = (None, None)
    if strategy in (StrategyName.summary_buffer, StrategyName.compaction):
        summarizer, summarizer_label = make_summarizer()
    try:
        lines = read_lines(transcript)
        fmt: Format = format.value if format is not None else detect(transcript, lines)
        # Each context is rendered in the transcript's own format, so the provider's rules are checked too.
        memory = Memory(
            model,
            max_tokens=max_tokens,
            max_output_tokens=max_output_tokens,
            counter="approximate" if approximate else "calibrated" if calibrated else None,
            strategy=strategy.value,
            strategy_options=options,
            summarizer=summarizer,
            format=fmt,
            store=store,
        )
        bind = getattr(summarizer, "bind", None)
        if callable(bind):  # both extractive summarizers cap exactly with the memory's own counter
            bind(memory.counter.count_text)
        result = _run(transcript, lines, fmt, memory, quiet=as_json_output, console=err)
    except TranscriptError as exc:
        raise _fail(err, str(exc)) from None
    except ConvmemError as exc:  # configuration: unknown model, budget too small, bad strategy option
        hint = " (on the command line: --calibrated)" if "counter='calibrated'" in str(exc) else ""
        raise _fail(err, f"{exc}{hint}") from None
    setup = Setup(
        transcript=str(transcript),
        format=fmt,
        model=model,
        counter=memory.counter.name,
        exact=memory.counter.exact,
        strategy=strategy.value,
        options=options,
        budget=memory.budget,
        reserved_output=memory.reserved_output,
        summarizer=summarizer_label,
    )
    if as_json_output:
        typer.echo(json.dumps(as_json(setup, result), indent=1))
    else:
        print_report(Console(), setup, result, every=every)
    if store != "memory":
        # The command goes on a line of its own and is never wrapped by rich, so it can be pasted as printed.
        where = "the default SQLite database" if store == "sqlite" else redact(store)
        err.print(f"session {memory.session_id[:8]} kept in {escape(where)}; to see it again:", soft_wrap=True)
        command = f"{program()} sessions show {memory.session_id[:8]}{store_flags(store, None)}"
        err.print(f"  {escape(command)}", soft_wrap=True, highlight=False)
    memory.close()


def _run(
    path: Path, lines: Sequence[Line], fmt: Format, memory: Memory, *, quiet: bool, console: Console
) -> ReplayResult:
    columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TextColumn("lines"), TimeElapsedColumn())
    # Off the terminal (pipes, CI) a live bar would only leave a stray blank line behind.
    with Progress(*columns, console=console, transient=True, disable=quiet or not console.is_terminal) as progress:
        task = progress.add_task("replay", total=len(lines))
        return replay_file(path, lines, fmt, memory, advance=lambda n: progress.advance(task, n))
