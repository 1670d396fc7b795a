"""The fixed turn workload of the speed gate (``python3 scripts/dev.py bench-check``): N turns, nothing printed.

A memory with the defaults (token_budget, 8,000 tokens, gpt-4o counting) is filled with 1,000 messages,
then runs ``--turns`` turns of ``add_many(step)`` + ``context()``: user and assistant texts drawn from a
seeded generator (no data file, so it runs anywhere), every 10th assistant turn a tool call with its
result, as in ``bench/turns.py``. The gate runs it under ``valgrind --tool=callgrind``, collecting only
inside the timed turns: their instructions over N are one turn's, a count that does not move with the
machine's load. ``--archive M`` gives the memory the default ``RecallBlock`` over M archived messages of its
user (in process, or ``--backend fts5``), the recall turn of ``bench/recall_turns.py`` counted the same way.
<<<<<<< HEAD
``--memory`` counts the same turns through another memory, for ratios that the load cannot move: ``sqlite``
(convmem on a SQLite file, the library's default store), ``minimal`` (``bench/turns.py``'s deque memory) or
``naive`` (the brief's naive memory, ``../shared/bench/naive_seed_memory.py``, read in place).
=======
``--telemetry metrics|otel`` gives the memory a ``Telemetry`` (a registry only; or OpenTelemetry's SDK with
in-memory exporter and reader as well), to count what telemetry costs a turn (bench/README.md, "Telemetry").
>>>>>>> p32c
"""

from __future__ import annotations

import argparse
import functools
import random
from typing import Any

from convmem import Memory
from turns import BUDGET, MinimalMemory, NaiveMemory, workload

_VOCABULARY = (
    "the a I you we it was is to and of in that my for on with at this have but not so just like about what "
    "went saw made really love great trip dog painting guitar lake camping sister job cake marathon paris "
    "yesterday tomorrow weekend friends family school work music book movie garden kids beach morning night"
)
WORDS = _VOCABULARY.split()
FILL = 1000


def texts(count: int = 2000, seed: int = 34) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 60))) + "." for _ in range(count)]


def recall_memory(size: int, backend: str) -> Memory:
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    from convmem.longterm.recall import RecallBlock
    from recall_turns import USER, archive, index_for

    where = tempfile.mkdtemp(prefix="convmem-gate-")
    atexit.register(shutil.rmtree, where, True)
    index = index_for(backend, Path(where))
    docs = archive(size, texts())
    for start in range(0, size, 5000):
        index.add(docs[start : start + 5000])
    return Memory(max_tokens=BUDGET, user_id=USER, blocks=[RecallBlock(index)], sinks=[index])


def make_memory(kind: str, archive: int, backend: str) -> Any:
    if archive:
        return recall_memory(archive, backend)
    if kind == "minimal":
        return MinimalMemory(BUDGET)
    if kind == "naive":
        return NaiveMemory(BUDGET)
    if kind == "sqlite":
        import atexit
        import shutil
        import tempfile
        from pathlib import Path

        where = tempfile.mkdtemp(prefix="convmem-gate-")
        atexit.register(shutil.rmtree, where, True)
        return Memory(max_tokens=BUDGET, store=str(Path(where) / "gate.db"))
    return Memory(max_tokens=BUDGET)


def telemetry(kind: str) -> object:
    from convmem.telemetry import MetricsRegistry, Telemetry

    if kind == "metrics":
        return Telemetry(otel=False, registry=MetricsRegistry())
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--archive", type=int, default=0, help="archived messages a recall block searches")
    parser.add_argument("--backend", choices=("memory", "fts5"), default="memory")
    parser.add_argument("--memory", choices=("convmem", "sqlite", "minimal", "naive"), default="convmem")
    parser.add_argument("--telemetry", choices=("none", "metrics", "otel"), default="none")
    args = parser.parse_args()
    steps = workload(texts())
    if args.telemetry != "none":  # every memory made from here on has it
        from convmem.telemetry import set_default

        set_default(telemetry(args.telemetry))  # type: ignore[arg-type]
    memory = make_memory(args.memory, args.archive, args.backend)
    filled = 0
    while filled < FILL:
        step = next(steps)
        memory.add_many(step)
        filled += len(step)
    memory.context()
    timed = [next(steps) for _ in range(args.turns)]

    def turn(_: None, step: list[dict[str, object]]) -> None:
        memory.add_many(step)
        memory.context()

    # The timed turns run inside one functools.reduce call: the gate collects instructions only there
    # (valgrind --collect-atstart=no --toggle-collect=functools_reduce), not in imports and the fill.
    functools.reduce(turn, timed, None)


if __name__ == "__main__":
    main()
