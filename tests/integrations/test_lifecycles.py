"""The lifecycle matrix: each adapter x (same process, new adapter object, new process) x (Memory, Client).

Each case runs N turns of the adapter's real agent loop, then the app "restarts" (keeps going
with the same objects; or makes a new memory object and adapter from the store and the
app's saved state; or goes on in a new Python process), then M more turns. After that, every
message is stored exactly once, and no request the model received held a message twice.
The saved state is what an app keeps: a LangGraph checkpointer, Pydantic AI's
``all_messages()`` as JSON, LlamaIndex's chat history as JSON (passed as ``chat_history=``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integrations._lifecycle import DRIVERS, close_memory, memory_spec, open_memory, stored

pytest.importorskip("agents")
pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("llama_index.core")
pytest.importorskip("pydantic_ai")
pytest.importorskip("google.adk")

# llama-index's workflow engine walks its agents' attributes, touching pydantic's deprecated __fields__.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")

N, M = 3, 2
ROOT = Path(__file__).resolve().parents[2]
LIFECYCLES = ["same process", "new adapter object", "new process"]


def twice(messages: list[Any]) -> list[Any]:
    return [
        item
        for item, n in Counter(tuple(tuple(x) if isinstance(x, list) else x for x in m) for m in messages).items()
        if n > 1
    ]


@pytest.mark.parametrize("backend", ["memory", "client"])
@pytest.mark.parametrize("lifecycle", LIFECYCLES)
@pytest.mark.parametrize("adapter", list(DRIVERS))
async def test_every_message_once_after_a_restart(
    adapter: str, lifecycle: str, backend: str, tmp_path: Path, live: Any, offline_tiktoken: Path
) -> None:
    if backend == "client" and not DRIVERS[adapter].client:
        pytest.skip(f"{adapter}'s services own the sessions: they run over a store, not over the service")
    sid = f"life-{uuid.uuid4().hex[:12]}"
    if backend == "memory":
        spec = memory_spec("memory", store=f"sqlite:///{tmp_path}/store.db", session_id=sid, user_id="alice")
    else:
        spec = memory_spec("client", url=live.url, key=live.key_a, session_id=sid, user_id="alice")
    first = DRIVERS[adapter]()
    first.memory = await first.open(spec, create=True)
    await first.run(0, N)
    requests = list(first.requests)
    if lifecycle == "same process":
        await first.run(N, M)
        requests = first.requests
        await close_memory(first.memory)
    else:
        first.save(tmp_path)
        await close_memory(first.memory)
        if lifecycle == "new adapter object":
            again = DRIVERS[adapter]()
            again.load(tmp_path)
            again.memory = await again.open(spec, create=False)
            await again.run(N, M)
            await close_memory(again.memory)
            requests += again.requests
        else:
            (tmp_path / "spec.json").write_text(json.dumps(spec))
            out = tmp_path / "requests.json"
            env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
            command = [sys.executable, "-m", "tests.integrations._lifecycle", adapter, str(tmp_path / "spec.json")]
            done = await asyncio.to_thread(
                subprocess.run,
                [*command, str(tmp_path), str(N), str(M), str(out)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            requests += [[tuple(x) for x in request] for request in json.loads(out.read_text())]

    final = await open_memory(first.stored(spec), create=False, sync=True, system=False)
    held = await stored(final)
    await close_memory(final)
    assert twice(held) == [], f"stored twice: {twice(held)}"
    assert len(held) == first.expected(N + M), held
    assert [turn for turn in range(N + M) if not any(f"Turn {turn}:" in text for _, text, _, _ in held)] == []
    assert requests, "the model was never called"
    for number, request in enumerate(requests):
        assert twice(request) == [], f"request {number} holds a message twice: {twice(request)}"
