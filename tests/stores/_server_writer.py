"""A writer process for the server-backend many-writer and fault tests.

Usage: python _server_writer.py BACKEND URL NAMESPACE TAG THREADS MESSAGES_PER_THREAD SESSIONS

BACKEND is ``postgres`` (NAMESPACE: the schema) or ``redis`` (NAMESPACE: the
key prefix). Each of THREADS threads shares the process's one store and
appends whole units in single batches (a user message, an assistant reply,
or an assistant with one or two tool calls and their results) to random
sessions among SESSIONS, until it has written MESSAGES_PER_THREAD messages.
After each append returns it prints ``ok <session> <id,id..> <seq,seq..>``; a
StoreError prints ``err <session> <id,id..> <message>`` (the batch may or may
not be stored: its outcome is unknown) and the thread goes on.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
from typing import Any

from convmem.errors import StoreError
from convmem.messages import Message, ToolCall
from convmem.stores.base import AppendRequest


def batch(rng: random.Random, prefix: str, size: int) -> list[tuple[Message, int]]:
    if size == 1:
        role = rng.choice(["user", "assistant"])
        return [(Message(role=role, content=f"{role} {prefix} says hi", id=prefix), 6)]
    calls = [ToolCall(id=f"c-{prefix}-{n}", name="lookup", arguments='{"q": 1}') for n in range(size - 1)]
    out = [(Message(role="assistant", content=None, tool_calls=calls, id=prefix), 12)]
    for n, call in enumerate(calls, start=1):
        out.append((Message(role="tool", content=f"result {n}", tool_call_id=call.id, id=f"{prefix}.{n}"), 4))
    return out


def writer(store: Any, tag: str, count: int, sessions: int, lock: threading.Lock) -> None:
    rng = random.Random(tag)
    written = k = 0
    while written < count:
        size = min(count - written, rng.choice([1, 1, 2, 3]))
        messages = batch(rng, f"{tag}-{k}", size)
        session = f"s{rng.randrange(sessions)}"
        ids = ",".join(m.id or "" for m, _ in messages)
        try:
            seqs = store.append(AppendRequest(session, messages, user_id="u", model="gpt-4o"))
        except StoreError as exc:
            line = f"err {session} {ids} {' '.join(str(exc).split())}"
        else:
            line = f"ok {session} {ids} {','.join(map(str, seqs))}"
        with lock:
            print(line, flush=True)
        written, k = written + size, k + 1


def main() -> None:
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # the pool notes each connection it replaces
    backend, url, namespace, tag, threads, per_thread, sessions = sys.argv[1:8]
    if backend == "postgres":
        from convmem.stores.postgres import PostgresStore

        store: Any = PostgresStore(url, schema=namespace, max_size=int(threads))
    else:
        from convmem.stores.redis import RedisStore

        store = RedisStore(url, prefix=namespace)
    lock = threading.Lock()
    workers = [
        threading.Thread(target=writer, args=(store, f"{tag}.{t}", int(per_thread), int(sessions), lock))
        for t in range(int(threads))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()


if __name__ == "__main__":
    main()
