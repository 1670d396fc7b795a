"""Rich renderings for ``convmem sessions``: the session list, a session's header, its conversation."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..messages import AudioPart, FilePart, ImagePart, Message, TextPart
from ..policy.context import Context
from ..stores.base import SessionInfo, SessionState, StoredMessage, status_of

__all__ = ["info_panel", "message_table", "sessions_table"]

_ROLE_STYLE = {"system": "magenta", "developer": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
_WIDTH = 160


def sessions_table(found: Sequence[SessionInfo]) -> Table:
    table = Table(title="Sessions, most recent first")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("title")
    table.add_column("messages", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("updated", no_wrap=True)
    table.add_column("model")
    table.add_column("fork of")
    for info in found:
        fork = f"{info.parent_id[:12]}@{info.fork_seq}" if info.parent_id else ""
        table.add_row(
            info.id,
            escape(info.title or ""),
            f"{info.message_count:,}",
            f"{info.tokens:,}",
            info.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            escape(info.model or ""),
            fork,
        )
    return table


def info_panel(info: SessionInfo, state: SessionState, ctx: Context) -> Panel:
    lines = [
        f"[bold]{escape(info.title or '(untitled)')}[/bold]  model {escape(info.model or '-')}  "
        f"user {escape(info.user_id or '-')}",
        f"{info.message_count:,} messages, {info.tokens:,} tokens; created {info.created_at:%Y-%m-%d %H:%M}, "
        f"updated {info.updated_at:%Y-%m-%d %H:%M}",
        f"context: {ctx.tokens:,} of {ctx.budget:,} tokens; window seqs "
        + (f"{ctx.window[0]}..{ctx.window[1]}" if ctx.window else "none"),
    ]
    if info.parent_id:
        lines.append(f"forked from {escape(info.parent_id)} at seq {info.fork_seq}")
    parts: list[Text | str] = ["\n".join(lines)]
    if state.summary is not None:
        summary = state.summary
        parts.append(Text(f"summary of seqs {summary.first_seq}..{summary.last_seq}: {summary.text}", style="italic"))
    for left in ctx.left_out:
        parts.append(f"[dim]left out: {left.messages} messages ({left.reason}) {escape(left.detail)}[/dim]")
    return Panel(Group(*parts), title=f"session {escape(info.id)}", title_align="left")


def message_table(
    rows: Sequence[StoredMessage], state: SessionState, window: tuple[int, int] | None, *, hidden: int = 0
) -> Table:
    """One row per message; ``●`` marks the messages of the current context."""
    table = Table(
        caption=f"{hidden:,} older messages not shown (--last 0 shows all)" if hidden > 0 else None,
        caption_justify="left",
        show_lines=False,
    )
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("ctx", justify="center", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("content", overflow="fold")
    for row in rows:
        status = status_of(row, state)
        in_context = status == "pinned" or (window is not None and window[0] <= row.seq <= window[1])
        role = row.message.role
        table.add_row(
            str(row.seq),
            "[bold green]●[/bold green]" if in_context else "",
            f"[{_ROLE_STYLE[role]}]{role}[/{_ROLE_STYLE[role]}]",
            status,
            _content(row.message),
        )
    return table


def _content(message: Message) -> Text:
    out = Text()
    if message.role == "tool":
        out.append(f"← {message.tool_call_id}: ", style="yellow")
    content = message.content
    if isinstance(content, str):
        out.append(_short(content))
    elif content is not None:
        for part in content:
            if isinstance(part, TextPart):
                out.append(_short(part.text) + " ")
            elif isinstance(part, ImagePart):
                out.append("[image] ", style="dim")
            elif isinstance(part, AudioPart):
                out.append(f"[audio {part.format}] ", style="dim")
            elif isinstance(part, FilePart):
                out.append(f"[file {part.filename or part.file_id or ''}] ", style="dim")
    for call in message.tool_calls:
        out.append(f"{chr(10) if out else ''}→ {call.name}({_short(call.arguments, 80)}) ", style="bold yellow")
        out.append(f"[{call.id}]", style="dim")
    return out


def _short(text: str, width: int = _WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
