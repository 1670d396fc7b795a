"""Rich renderings for ``convmem sessions``: the session list, a session's header, its conversation."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..messages import AudioPart, FilePart, ImagePart, Message, StoredMessage, TextPart
from ..policy.context import Context
from ..session import SessionInfo, SessionState, status_of

__all__ = ["info_panel", "made_up", "message_table", "sessions_table", "unique_prefixes"]

_ROLE_STYLE = {"system": "magenta", "developer": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
_WIDTH = 160


def sessions_table(found: Sequence[SessionInfo], *, width: int = 200) -> Table:
    """The sessions, readable from 80 columns: made-up ids shortened to unique prefixes, the title takes what is left.

    An id someone chose (``alice-chat-1``) is shown whole: it is the name to copy. A made-up one
    (random hex) is shortened, since every command accepts a unique id prefix, so the shortened id
    is what the user types next; ``--json`` prints the full ids.
    """
    prefixes = unique_prefixes([info.id for info in found], minimum=8)
    short = [prefix if made_up(info.id) else info.id for info, prefix in zip(found, prefixes, strict=True)]
    narrow = width < 120
    forks = any(info.parent_id for info in found) and not narrow  # narrow: the fork goes before the title
    models = any(info.model for info in found)
    table = Table(
        title="Sessions, most recent first", box=box.SIMPLE_HEAD, pad_edge=False, expand=True, collapse_padding=True
    )
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("msgs", justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    if models:
        table.add_column("model", no_wrap=True, overflow="ellipsis", max_width=17 if narrow else None)
    if forks:
        table.add_column("fork of", no_wrap=True)
    table.add_column("title", overflow="ellipsis", no_wrap=True, min_width=12, ratio=1)
    for info, sid in zip(found, short, strict=True):
        row = [sid, _when(info.updated_at, narrow=width < 100), f"{info.message_count:,}", f"{info.tokens:,}"]
        if models:
            row.append(escape(info.model or ""))
        fork = f"{short_of(info.parent_id, short, found)}@{info.fork_seq}" if info.parent_id else ""
        if forks:
            row.append(fork)
        title = escape(info.title or "")
        row.append(title if forks or not fork else f"[dim]↳{fork}[/dim] {title}")
        table.add_row(*row)
    return table


def _when(moment: datetime, *, narrow: bool) -> str:
    """The update time; on a narrow terminal without the year when it is this year's."""
    if narrow and moment.year == datetime.now(moment.tzinfo).year:
        return moment.strftime("%b %d %H:%M")
    return moment.strftime("%Y-%m-%d %H:%M")


def made_up(session_id: str) -> bool:
    """Whether an id was made up by convmem or a store (16 or more hex digits), not chosen by someone."""
    return len(session_id) >= 16 and all(c in "0123456789abcdef" for c in session_id)


def unique_prefixes(ids: Sequence[str], *, minimum: int = 8) -> list[str]:
    """The shortest prefix of each id (at least ``minimum`` characters) that no other id in ``ids`` shares."""
    out = []
    for sid in ids:
        length = min(minimum, len(sid))
        while length < len(sid) and any(o != sid and o.startswith(sid[:length]) for o in ids):
            length += 1
        out.append(sid[:length])
    return out


def short_of(sid: str, short: Sequence[str], found: Sequence[SessionInfo]) -> str:
    """The shortened form of ``sid`` if it is listed, else its first 12 characters."""
    for info, prefix in zip(found, short, strict=True):
        if info.id == sid:
            return prefix
    return sid[:12]


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
