"""A writer process for the two-writers test: an agent loop on one shared session, through ``Memory``.

Usage: python _turn_writer.py BACKEND LOCATION NAMESPACE TAG TURNS

BACKEND is ``sqlite`` (LOCATION: the database file), ``postgres`` (LOCATION: the URL, NAMESPACE: the schema)
or ``redis`` (LOCATION: the URL, NAMESPACE: the key prefix). Each turn adds, one ``add`` at a time: a user
message, an assistant message calling one or two tools, their results (one batch), and the assistant's
answer, all on session ``shared`` of user ``u``. An add refused because the other writer's tool calls are
still unanswered waits and tries again (nothing may land between a call and its results). After each add
returns, the process prints ``ok <id,id..>``: those messages are acknowledged.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from convmem import Memory
from convmem.errors import InvalidMessageError
from convmem.messages import Message, ToolCall

OPTIONS: dict[str, Any] = {
    "max_tokens": 3_000,
    "strategy": "summary_buffer",  # the extractive default summarizer: folds, so state saves race too
    "strategy_options": {"max_tokens": 1_500, "keep_recent_tokens": 600},
}


def open_store(backend: str, location: str, namespace: str) -> Any:
    if backend == "sqlite":
        from convmem.stores import SQLiteStore

        return SQLiteStore(location)
    if backend == "postgres":
        from convmem.stores.postgres import PostgresStore

        return PostgresStore(location, schema=namespace, max_size=2)
    from convmem.stores.redis import RedisStore

    return RedisStore(location, prefix=namespace)


def steps(tag: str, turn: int, rng: random.Random) -> list[list[Message]]:
    calls = tuple(ToolCall(f"c-{tag}-{turn}-{n}", "lookup", f'{{"q": {n}}}') for n in range(rng.choice([1, 2])))
    return [
        [Message(role="user", content=f"{tag} asks question {turn} " * 3, id=f"u-{tag}-{turn}")],
        [Message(role="assistant", tool_calls=calls, id=f"a-{tag}-{turn}")],
        [Message(role="tool", tool_call_id=c.id, content=f"result of {c.id}", id=f"t-{c.id}") for c in calls],
        [Message(role="assistant", content=f"{tag} answers {turn}", id=f"f-{tag}-{turn}")],
    ]


def add(memory: Memory, batch: list[Message]) -> list[Message]:
    deadline = time.monotonic() + 120
    pause = 0.002
    while True:
        try:
            return memory.add_many(batch)
        except InvalidMessageError as exc:
            if "unanswered" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)  # the other writer is between its tool call and the results
            pause = min(pause * 1.5, 0.03)


def main() -> None:
    backend, location, namespace, tag, turns = sys.argv[1:6]
    store = open_store(backend, location, namespace)
    rng = random.Random(tag)
    memory = Memory(store=store, user_id="u", session_id="shared", **OPTIONS)
    for turn in range(int(turns)):
        for batch in steps(tag, turn, rng):
            added = add(memory, batch)
            print("ok", ",".join(m.id or "" for m in added), flush=True)
    store.close()


if __name__ == "__main__":
    main()
