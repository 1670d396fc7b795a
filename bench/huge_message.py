"""What a message larger than the budget costs per context, after the first (issue 12, deliverable 5).

A 10 MB user message is the newest unit of an 8,000-token memory, so every context must cut it. The first
context counts and cuts it; later ones reuse the cut. Beside it, in the same run, a memory of two short
messages. Command: ``.venv/bin/python bench/huge_message.py``
"""

from __future__ import annotations

import statistics
import time

from convmem import Memory

SIZE = 10_000_000
LINE = "some log line with words and 12345 numbers\n"


def timed(memory: Memory, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        memory.context()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    small = Memory("gpt-4o", max_tokens=8000)
    small.add({"role": "user", "content": "hi"})
    small.add({"role": "assistant", "content": "hello"})
    huge = Memory("gpt-4o", max_tokens=8000)
    start = time.perf_counter()
    huge.add({"role": "user", "content": LINE * (SIZE // len(LINE))})
    added = time.perf_counter() - start
    first = timed(huge, 1)[0]
    later, plain = [], []
    for _ in range(50):  # interleaved, so machine noise hits both alike
        later += timed(huge, 1)
        plain += timed(small, 1)
    print(f"add of a {SIZE / 1e6:.0f} MB message: {added * 1e3:.0f} ms; first context: {first * 1e3:.0f} ms")
    print(
        f"later contexts p50: {statistics.median(later) * 1e6:.0f} us; a two-message memory: "
        f"{statistics.median(plain) * 1e6:.0f} us (ratio {statistics.median(later) / statistics.median(plain):.1f}x)"
    )


if __name__ == "__main__":
    main()
