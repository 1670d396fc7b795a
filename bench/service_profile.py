"""Where a service request's time goes: cProfile over the ASGI app in one thread, the bench's add/context mix.

The app (SQLite default store, a fresh folder) is driven through ``httpx.ASGITransport`` in one event loop, with
FastAPI's thread pool replaced by a direct call so that the profiler sees the route's work in the same thread
(a sync route otherwise runs in a worker thread cProfile does not follow). 16 sessions, half adds (one message
of 8 to 60 words, ids chosen by the client), half contexts, as ``bench/service.py`` sends them; a warm-up of
300 requests first. ``--timer cpu`` profiles CPU time (what a worker's core spends), ``--timer wall`` wall time
(an fsync's wait shows there). Prints the CPU ms per request (client side included: it runs in the process)
and the top entries.

Run: ``PYTHONPATH=src .venv/bin/python bench/service_profile.py --timer wall`` (``--requests``, ``--top``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import tempfile
import time
import uuid
from typing import Any

WORDS = [
    "the",
    "a",
    "memory",
    "budget",
    "token",
    "window",
    "summary",
    "recall",
    "block",
    "model",
    "context",
    "service",
    "store",
]


async def _inline(func: Any, *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--timer", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    os.environ.setdefault("CONVMEM_ADMIN_KEY", "bench-admin-key-0123456789")
    import fastapi.dependencies.utils
    import fastapi.routing
    import httpx

    fastapi.routing.run_in_threadpool = _inline  # type: ignore[assignment]
    fastapi.dependencies.utils.run_in_threadpool = _inline  # type: ignore[assignment]
    from convmem.server import Settings, create_app

    folder = tempfile.mkdtemp(prefix="convmem-profile-")
    app = create_app(Settings(store=os.path.join(folder, "data.db"), keys=os.path.join(folder, "keys.db")))
    headers = {"Authorization": f"Bearer {app.state.service.registry.create_key('bench').secret}"}
    rng = random.Random(7)
    profile = cProfile.Profile(time.process_time if args.timer == "cpu" else time.perf_counter)

    async def run() -> float:
        transport = httpx.ASGITransport(app=app.state.asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", headers=headers) as http:
            sessions = [(await http.post("/v1/sessions", json={"max_tokens": 4000})).json()["id"] for _ in range(16)]

            async def step() -> None:
                sid = rng.choice(sessions)
                if rng.random() < 0.5:
                    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
                    body = {"messages": [{"role": "user", "content": text, "id": uuid.uuid4().hex}]}
                    answer = await http.post(f"/v1/sessions/{sid}/messages", json=body)
                    assert answer.status_code == 201, answer.text
                else:
                    answer = await http.post(f"/v1/sessions/{sid}/context", json={})
                    assert answer.status_code == 200, answer.text

            for _ in range(300):
                await step()
            started = time.process_time()
            profile.enable()
            for _ in range(args.requests):
                await step()
            profile.disable()
            return (time.process_time() - started) / args.requests * 1000

    cpu = asyncio.run(run())
    print(f"CPU ms per request (client and server, profiled): {cpu:.2f}; load average {os.getloadavg()[0]:.1f}")
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
