"""How ``convmem replay`` reports: a rich per-turn table and summary panel, or JSON.

Example::

    print_report(console, setup, result, every=None)
    typer.echo(json.dumps(as_json(setup, result)))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ._replayer import ReplayResult, Turn

__all__ = ["Setup", "as_json", "print_report", "rows_to_show"]

MAX_ROWS = 40
_HISTORY = frozenset({"archived", "summarized", "budget", "pending_tool_results"})


@dataclass(frozen=True, slots=True)
class Setup:
    """What was replayed, and how (echoed in every report)."""

    transcript: str
    format: str
    model: str
    counter: str
    exact: bool
    strategy: str
    options: Mapping[str, Any]
    budget: int
    reserved_output: int
    summarizer: str | None


def rows_to_show(turns: Sequence[Turn], every: int | None) -> list[Turn]:
    """Every ``every``-th turn (default: enough for about MAX_ROWS rows), always with the last one."""
    step = every or max(1, math.ceil(len(turns) / MAX_ROWS))
    shown = [t for t in turns if t.turn % step == 0 or t.turn == 1]
    if turns and (not shown or shown[-1] is not turns[-1]):
        shown.append(turns[-1])
    return shown


def _percentiles(turns: Sequence[Turn]) -> dict[str, float]:
    times = sorted(t.seconds * 1000 for t in turns)
    if not times:
        return {"mean_ms": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}

    def pick(q: float) -> float:
        return times[min(len(times) - 1, math.ceil(q * len(times)) - 1)]

    return {"mean_ms": sum(times) / len(times), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": times[-1]}


def _warnings(result: ReplayResult) -> list[str]:
    out = list(result.notes)
    truncated = sum(1 for t in result.turns if t.truncated)
    if truncated:
        out.append(f"{truncated} turn(s) truncated an oversized message to fit (marked in the context)")
    if result.stats is not None:
        out += result.stats.warnings
    if result.context is not None:
        out += [w for w in result.context.warnings if w not in out]
    return out


def _summary(result: ReplayResult) -> dict[str, Any]:
    stats, ctx = result.stats, result.context
    # A transcript always has at least one turn, so both are set.
    assert stats is not None
    assert ctx is not None
    left_out = {lo.reason: {"messages": lo.messages, "tokens": lo.tokens} for lo in ctx.left_out}
    # What sending everything would cost, give or take truncation markers.
    history = (
        ctx.account.pinned
        + ctx.account.window
        + ctx.account.overhead
        + sum(lo.tokens for lo in ctx.left_out if lo.reason in _HISTORY)
    )
    return {
        "turns": len(result.turns),
        "lines": result.lines,
        "messages": stats.messages,
        "final_context_tokens": ctx.tokens,
        "peak_context_tokens": max(t.tokens for t in result.turns),
        "history_tokens": history,
        "archived": stats.archived,
        "summarized": stats.summarized,
        "summaries": stats.summaries,
        "summary_failures": stats.summary_failures,
        "tokens_saved": stats.tokens_saved,
        "left_out": left_out,
        "seconds": result.seconds,
        "per_turn": _percentiles(result.turns),
        "warnings": _warnings(result),
    }


def as_json(setup: Setup, result: ReplayResult) -> dict[str, Any]:
    """The whole report as one JSON-serializable object (every turn, whatever ``--every`` says)."""
    turns = []
    for turn in result.turns:
        row = asdict(turn)
        row["ms"] = round(row.pop("seconds") * 1000, 3)
        turns.append(row)
    return {"setup": asdict(setup) | {"options": dict(setup.options)}, "turns": turns, "summary": _summary(result)}


def _header(setup: Setup) -> Text:
    options = ", ".join(f"{k}={v}" for k, v in setup.options.items())
    text = Text.assemble(
        ("Replayed ", "bold"),
        (setup.transcript, "cyan"),
        f" ({setup.format} format)\n",
        "model ",
        (setup.model, "cyan"),
        ", strategy ",
        (setup.strategy + (f"({options})" if options else ""), "cyan"),
        f"\nbudget {setup.budget:,} tokens ({setup.reserved_output:,} reserved for output), counter {setup.counter}",
        ("" if setup.exact else " (APPROXIMATE)", "yellow"),
    )
    if setup.summarizer:
        text.append(f"\nsummarizer: {setup.summarizer}", style="yellow")
    return text


def _table(setup: Setup, turns: Sequence[Turn]) -> Table:
    table = Table(
        title="Per turn, after its context() call",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        caption="stored: messages stored; in ctx: messages in the request; used: tokens / (budget - reserved output);"
        " evicted: messages archived or summarized so far; summ.: summaries made so far",
        caption_justify="left",
    )
    for name in ("turn", "lines", "stored", "in ctx", "tokens", "used", "evicted", "summ.", "ms"):
        table.add_column(name, justify="left" if name == "lines" else "right", no_wrap=True)
    limit = setup.budget - setup.reserved_output
    for t in turns:
        share = t.tokens / limit
        style = "red" if share > 1 else ("yellow" if share > 0.9 else "")
        table.add_row(
            str(t.turn),
            f"{t.first_line}-{t.last_line}",
            str(t.stored),
            str(t.in_request),
            Text(f"{t.tokens:,}", style=style),
            Text(f"{share:.0%}", style=style),
            str(t.evicted),
            str(t.summaries),
            f"{t.seconds * 1000:.2f}",
        )
    return table


def _panel(result: ReplayResult) -> Panel:
    s = _summary(result)
    per = s["per_turn"]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("turns", f"{s['turns']:,} ({s['messages']:,} messages from {s['lines']:,} lines)")
    grid.add_row(
        "context",
        f"final {s['final_context_tokens']:,} tokens, peak {s['peak_context_tokens']:,}; "
        f"the whole history would be ~{s['history_tokens']:,}",
    )
    grid.add_row(
        "evicted",
        f"archived {s['archived']:,} messages; summarized {s['summarized']:,} into {s['summaries']:,} "
        f"summaries ({s['summary_failures']} failed)",
    )
    grid.add_row("tokens saved", f"{s['tokens_saved']:,}")
    grid.add_row(
        "time",
        f"per turn (add + context) mean {per['mean_ms']:.2f} ms, p50 {per['p50_ms']:.2f}, "
        f"p99 {per['p99_ms']:.2f}, max {per['max_ms']:.2f}; whole replay {s['seconds']:.2f} s",
    )
    warnings = s["warnings"]
    grid.add_row(
        "warnings",
        Text("\n".join(f"- {w}" for w in warnings), style="yellow") if warnings else Text("none", style="green"),
    )
    return Panel(grid, title="Summary", title_align="left", border_style="yellow" if warnings else "green")


def print_report(console: Console, setup: Setup, result: ReplayResult, *, every: int | None) -> None:
    """Print the header, the per-turn table and the summary panel."""
    console.print(_header(setup))
    console.print(_table(setup, rows_to_show(result.turns, every)))
    console.print(_panel(result))
