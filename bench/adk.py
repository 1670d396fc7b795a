"""Google ADK: listing many sessions and loading a long one, ConvmemSessionService beside DatabaseSessionService.

Both services get the same work in the same run, on SQLite files in a temp folder: ``--sessions``
sessions of one user (each created through the service's own ``create_session``, with a small
state), then one session of ``--events`` events (alternating user and model texts of about 30
words, appended through ``append_event``). Timed: ``list_sessions(app_name, user_id)`` over all
of them, and ``get_session`` of the long session (every event read back as an ADK ``Event``).
Each is run ``--repeats`` times; the table gives the median and the best. Setup is not timed.

Command: ``.venv/bin/python bench/adk.py`` (defaults: 10,000 sessions, 3,000 events, 5 repeats).
Needs ``google-adk`` and ``aiosqlite`` (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from google.adk.events.event import Event  # noqa: E402
from google.adk.sessions import DatabaseSessionService  # noqa: E402
from google.genai import types  # noqa: E402

from convmem.integrations.adk import ConvmemSessionService  # noqa: E402

APP, USER = "bench", "alice"
WORDS = "the quick brown fox jumps over the lazy dog while the weather in Lisbon stays mild all week".split()  # noqa: SIM905


def text(n: int) -> str:
    return " ".join(WORDS[(n + i) % len(WORDS)] for i in range(30)) + f" ({n})"


async def fill(service: Any, sessions: int, events: int) -> str:
    started = time.perf_counter()
    for n in range(sessions):
        await service.create_session(app_name=APP, user_id=USER, state={"n": n}, session_id=f"s{n:05d}")
    made = time.perf_counter() - started
    long = await service.create_session(app_name=APP, user_id=USER, session_id="long")
    started = time.perf_counter()
    for n in range(events):
        role = "user" if n % 2 == 0 else "model"
        event = Event(
            author="user" if role == "user" else "agent",
            invocation_id=f"i{n // 2}",
            content=types.Content(role=role, parts=[types.Part(text=text(n))]),
        )
        await service.append_event(long, event)
    appended = time.perf_counter() - started
    print(
        f"  {type(service).__name__}: created {sessions} sessions in {made:.1f} s, "
        f"appended {events} events in {appended:.1f} s"
    )
    return long.id


async def timed(repeats: int, call: Any) -> tuple[float, float, Any]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times), result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=3_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        services: list[tuple[str, Any]] = [
            (
                "ADK DatabaseSessionService (sqlite+aiosqlite)",
                DatabaseSessionService(f"sqlite+aiosqlite:///{tmp}/adk.db"),
            ),
            (
                "ConvmemSessionService (sqlite)",
                ConvmemSessionService(f"sqlite:///{tmp}/convmem.db", counter="approximate", max_tokens=128_000),
            ),
        ]
        for name, service in services:
            print(f"filling {name}", flush=True)
            long = await fill(service, args.sessions, args.events)
            listed = await timed(args.repeats, lambda s=service: s.list_sessions(app_name=APP, user_id=USER))
            loaded = await timed(
                args.repeats, lambda s=service, i=long: s.get_session(app_name=APP, user_id=USER, session_id=i)
            )
            assert len(listed[2].sessions) == args.sessions + 1, len(listed[2].sessions)
            assert len(loaded[2].events) == args.events, len(loaded[2].events)
            rows.append((name, listed[:2], loaded[:2]))
            closing = getattr(service, "close", None)
            if closing is not None:
                result = closing()
                if asyncio.iscoroutine(result):
                    await result
    print(f"\n{args.sessions + 1:,} sessions of one user; a {args.events:,}-event session; {args.repeats} repeats\n")
    print("| service | list_sessions median | best | get_session (long) median | best |")
    print("|---|---:|---:|---:|---:|")
    for name, (lm, lb), (gm, gb) in rows:
        print(f"| {name} | {lm * 1000:.0f} ms | {lb * 1000:.0f} ms | {gm * 1000:.0f} ms | {gb * 1000:.0f} ms |")


if __name__ == "__main__":
    asyncio.run(main())
