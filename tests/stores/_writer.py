"""A writer process for the crash and concurrency tests.

Usage: python _writer.py BACKEND PATH SESSION TAG COUNT PAYLOAD_BYTES

It appends COUNT messages one by one and prints ``<message id> <seq>`` after
each append returns, that is, once the store has acknowledged it.
"""

from __future__ import annotations

import sys

from convmem.messages import Message
from convmem.stores import FileStore, SQLiteStore
from convmem.stores.base import AppendRequest


def main() -> None:
    backend, path, session, tag, count, size = sys.argv[1:7]
    store = SQLiteStore(path) if backend == "sqlite" else FileStore(path)
    padding = "x" * int(size)
    for n in range(int(count)):
        message_id = f"{tag}-{n}"
        message = Message(role="user", content=f"{message_id} {padding}", id=message_id)
        [seq] = store.append(AppendRequest(session, [(message, 1)], user_id="u"))
        print(message_id, seq, flush=True)
    store.close()


if __name__ == "__main__":
    main()
