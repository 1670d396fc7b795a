"""The inspector on a long session, in headless Chromium: how long opening it and moving the turn slider take.

Seeds one session of ``--messages`` messages (default 20,000: user and assistant turns, every tenth
assistant turn calling a tool and getting its result) through the library into the service's store (one
``add`` per message, as the service stores them), serves ``/ui`` from the service in this process (uvicorn
on loopback), and drives Debian's ``chromium`` with Playwright. Times are taken inside the page
(``performance.now()``), from the click or the slider's ``input`` event to the DOM showing the result:

- open: clicking the session until the account bar shows the last turn and the first page of messages is
  listed (the summary history fills in on its own; its time is reported apart, as ``summaries``);
- cold open: the first open after the service started (nothing kept); warm open: reopening it after
  opening another session (the page keeps nothing across sessions; the service keeps the last turn);
- moves: the slider set to a random turn not shown before, until the bar shows that turn: ``cold`` moves
  come right after a cold open, while the summary history is still being replayed; ``warm`` moves after it.

Run: ``.venv/bin/python bench/inspector.py`` (``--store memory`` skips SQLite). Prints a JSON line and a
Markdown table. The machine may be loaded by other work: wall times are what they are on it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.server.conftest import serve_in_thread  # noqa: E402

from convmem.memory import Memory  # noqa: E402
from convmem.messages import Message, ToolCall  # noqa: E402
from convmem.server import Settings, create_app  # noqa: E402
from convmem.server.tenancy import Scope  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
OPTIONS = {"model": "gpt-4o", "max_tokens": 4000, "max_output_tokens": 500, "strategy": "summary_buffer"}
USER = "bench"

OPEN_JS = """async ([sid, last]) => {
  const start = performance.now();
  document.querySelector(`#sessions button[data-session="${sid}"]`).click();
  const done = () => document.querySelector(`#account-bar[data-seq="${last}"]`)
    && document.querySelectorAll('#messages li').length >= Math.min(200, last + 1);
  while (!done()) {
    const failed = document.querySelector('#turn-notes.error');
    if (failed) throw new Error(failed.textContent);
    await new Promise((r) => requestAnimationFrame(r));
  }
  const opened = performance.now() - start;
  while (!document.querySelector('#summaries[data-loaded]')) await new Promise((r) => setTimeout(r, 20));
  return [opened, performance.now() - start];
}"""

OPEN_ONLY_JS = (
    OPEN_JS.split("const opened")[0].replace(
        "const start = performance.now();", "const start = window.coldStart = performance.now();"
    )
    + "return [performance.now() - start, null]; }"
)

MOVE_JS = """async (seq) => {
  const slider = document.querySelector('#turn-slider');
  const start = performance.now();
  slider.value = String(seq);
  slider.dispatchEvent(new Event('input', { bubbles: true }));
  while (document.querySelector('#account-bar').dataset.seq !== String(seq)) {
    const failed = document.querySelector('#turn-notes.error');
    if (failed) throw new Error(failed.textContent);
    await new Promise((r) => requestAnimationFrame(r));
  }
  return performance.now() - start;
}"""


def seed(store: Any, scope: Scope, sid: str, count: int) -> float:
    started = time.perf_counter()
    memory = Memory.open(scope.store_session(sid), store=store, user_id=scope.store_user)
    t0 = datetime.now(timezone.utc) - timedelta(seconds=count + 60)
    seq = 0
    while seq < count:
        at = t0 + timedelta(seconds=seq)
        if seq % 20 == 19 and seq + 1 < count:  # an assistant turn with text and a tool call, then its result
            call = ToolCall(f"call_{seq}", "lookup", json.dumps({"q": f"item {seq}"}))
            memory.add(Message("assistant", f"Checking item {seq}.", tool_calls=(call,), created_at=at))
            memory.add(
                Message("tool", f"item {seq}: in stock", tool_call_id=call.id, created_at=at + timedelta(0, 0.5))
            )
            seq += 2
            continue
        role = "user" if seq % 2 == 0 else "assistant"
        text = f"message {seq} about the train to Porto, the hotel near station {seq % 97} and the plans. " * 2
        memory.add(Message(role, text, created_at=at))
        seq += 1
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="bench-inspector-"))
    store = str(tmp / "data.db") if args.store == "sqlite" else "memory"
    app = create_app(Settings(store=store, keys=str(tmp / "keys.db")))
    service = app.state.service
    key = service.registry.create_key("acme").secret
    url, server, thread = serve_in_thread(app.state.asgi)
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, params={"user_id": USER})
    for sid, title in (("long", "Long session"), ("short", "Short session")):
        assert http.post("/v1/sessions", json={**OPTIONS, "id": sid, "title": title}).status_code == 201
    scope = Scope("acme", USER)
    seconds = seed(service.backend.store, scope, "long", args.messages)
    seed(service.backend.store, scope, "short", 30)
    last = args.messages - 1
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"messages": args.messages, "store": args.store, "seed_seconds": round(seconds, 1)}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(600_000)
            page.goto(f"{url}/ui/")
            page.fill("#api-key", key)
            page.fill("#user-id", USER)
            page.click("#connect button[type=submit]")
            page.locator('#sessions button[data-session="long"]').wait_for()
            cold_open, _ = page.evaluate(OPEN_ONLY_JS, ["long", last])
            shown: set[int] = {last}
            cold_moves = []
            for _ in range(args.cold_moves):
                seq = rng.choice([s for s in range(args.messages) if s not in shown][:: max(1, args.messages // 500)])
                shown.add(seq)
                cold_moves.append(page.evaluate(MOVE_JS, seq))
            page.locator("#summaries[data-loaded]").wait_for()
            cold_summaries = page.evaluate("() => performance.now() - window.coldStart")
            warm_opens, summaries = [], []
            for _ in range(args.reopens):
                page.evaluate(OPEN_JS, ["short", 29])
                opened, with_summaries = page.evaluate(OPEN_JS, ["long", last])
                warm_opens.append(opened)
                summaries.append(with_summaries)
            moves = []
            for _ in range(args.moves):
                seq = rng.randrange(args.messages)
                while seq in shown:
                    seq = rng.randrange(args.messages)
                shown.add(seq)
                moves.append(page.evaluate(MOVE_JS, seq))
            browser.close()
    finally:
        http.close()
        server.should_exit = True
        thread.join(10)
        service.close()
    out.update(
        cold_open_ms=round(cold_open),
        cold_moves_ms=[round(m) for m in cold_moves],
        cold_summaries_ms=round(cold_summaries),
        warm_open_ms_median=round(statistics.median(warm_opens)),
        warm_open_ms_max=round(max(warm_opens)),
        warm_summaries_ms_median=round(statistics.median(summaries)),
        moves=len(moves),
        move_ms_median=round(statistics.median(moves)),
        move_ms_p95=round(percentile(moves, 0.95)),
        move_ms_max=round(max(moves)),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--cold-moves", type=int, default=3)
    parser.add_argument("--reopens", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    out = run(parser.parse_args())
    print(json.dumps(out))
    print("| measure | ms |\n|---|---:|")
    for name in ("cold_open_ms", "warm_open_ms_median", "warm_open_ms_max", "move_ms_median", "move_ms_p95"):
        print(f"| {name} | {out[name]} |")
    print(f"| move_ms_max | {out['move_ms_max']} |")
    print(f"| cold_moves_ms | {', '.join(map(str, out['cold_moves_ms']))} |")
    print(f"| cold_summaries_ms | {out['cold_summaries_ms']} |")
    print(f"| warm_summaries_ms_median | {out['warm_summaries_ms_median']} |")


if __name__ == "__main__":
    main()
