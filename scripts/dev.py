#!/usr/bin/env python3
"""Set up and run convmem from a fresh clone with nothing but python3.

    python3 scripts/dev.py demo            # replay the shipped agent session on the embedded default
    python3 scripts/dev.py test            # lint + format check + strict type check + the whole test suite,
                                           # then the TypeScript client's Node tests (skipped without node)
    python3 scripts/dev.py test --quick    # the same checks, and the in-process tests (QUICK below)
    python3 scripts/dev.py bench-check     # the speed gate: instructions per turn against bench/baseline.json
        [--against OTHER_TREE] [--update] [--turns N] [--python PATH]

Each command creates ./.venv on first use and installs what it needs into it.
Only the standard library is used here, on purpose.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
DEMO = [
    "replay",
    "examples/agent_session.jsonl",
    "--model",
    "gpt-4o",
    "--strategy",
    "summary_buffer",
    "--max-tokens",
    "16000",
    "--every",
    "25",
    "--store",
    "sqlite",
]


SOURCES = ["src", "tests", "bench", "examples", "scripts"]
README_TESTS = "tests/test_readme.py"

# The inner loop: no test marked slow or reading the LoCoMo data, none that talks to PostgreSQL or Redis,
# and not the service, the framework integrations, the provider SDK round trips or the README runner
# (the full suite runs them all).
QUICK = [
    "-m",
    "not slow and not locomo",
    "-k",
    "not postgres and not redis and not Postgres and not Redis and not pgvector",
    *(f"--ignore=tests/{path}" for path in ("integrations", "provider", "server", "test_readme.py")),
    *(
        f"--ignore=tests/stores/{name}.py"
        for name in ("test_many_writers", "test_server_bad_input", "test_search_servers")
    ),
    # The in-process tests share nothing (each has its own temporary folder), so they run on both cores.
    "-n",
    "2",
]


# The speed gate (bench-check): instructions per turn of bench/gate.py's fixed workload, counted by callgrind,
# which gives the same count on an idle or a loaded machine (wall-clock times do not). A turn that costs more
# than TOLERANCE above the reference fails the gate.
BASELINE = ROOT / "bench" / "baseline.json"
TOLERANCE = 0.10
GATE_TURNS = 300


def instructions_per_turn(python: str | Path, src: Path, turns: int) -> float:
    """bench/gate.py's turns against the convmem of ``src`` under callgrind, collected inside them only."""
    if shutil.which("valgrind") is None:
        sys.exit("bench-check needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="convmem-bench-check-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            f"--callgrind-out-file={out}",
            str(python),
            str(ROOT / "bench" / "gate.py"),
            "--turns",
            str(turns),
        ]
        print("+", f"PYTHONPATH={src}", " ".join(command), flush=True)
        done = subprocess.run(command, cwd=ROOT / "bench", env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"bench/gate.py failed under callgrind:\n{done.stderr[-3000:]}")
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None or int(found.group(1)) == 0:
            sys.exit("callgrind collected nothing: is this Python built with its symbols (functools_reduce)?")
    return int(found.group(1)) / turns


def environment(python: str | Path) -> dict[str, str]:
    """What an instruction count depends on besides convmem: the interpreter and the libraries a turn runs."""
    probe = (
        "import json, platform, tiktoken; "
        "print(json.dumps({'python': platform.python_version(), 'machine': platform.machine(), "
        "'tiktoken': tiktoken.__version__}))"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    found: dict[str, str] = json.loads(done.stdout)
    return found


def verdict(current: float, reference: float, tolerance: float = TOLERANCE) -> tuple[bool, str]:
    """Whether ``current`` instructions per turn pass against ``reference``, and the line that says so."""
    ratio = current / reference
    line = f"{current:,.0f} instructions per turn, {ratio:.3f}x the reference ({reference:,.0f})"
    if ratio > 1 + tolerance:
        return False, f"FAIL: {line}: more than {tolerance:.0%} slower per turn"
    return True, f"ok: {line}"


def bench_check(args: list[str]) -> None:
    def option(name: str) -> str | None:
        if name not in args:
            return None
        at = args.index(name)
        if at + 1 >= len(args):
            sys.exit(f"{name} needs a value")
        return args[at + 1]

    python = option("--python")
    if python is None:
        ensure_venv("")
        python = str(BIN / "python")
    turns = int(option("--turns") or GATE_TURNS)
    current = instructions_per_turn(python, ROOT / "src", turns)
    against = option("--against")
    if against is not None:  # another tree (the previous release, main), measured here and now
        reference = instructions_per_turn(python, Path(against).resolve() / "src", turns)
        where = f"the tree at {against}"
    elif "--update" in args:
        record = {"instructions_per_turn": round(current), "turns": turns, **environment(python)}
        BASELINE.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {BASELINE.relative_to(ROOT)}: {current:,.0f} instructions per turn")
        return
    else:
        if not BASELINE.exists():
            sys.exit(f"no {BASELINE.relative_to(ROOT)}: run bench-check --update on the reference tree")
        record = json.loads(BASELINE.read_text())
        reference = float(record["instructions_per_turn"])
        where = str(BASELINE.relative_to(ROOT))
        here = environment(python)
        differs = {k: (record.get(k), v) for k, v in here.items() if record.get(k) != v}
        if differs:
            # Another interpreter or library counts differently: say so, so a pass or fail is read with care.
            print(f"note: the baseline was counted with {differs} (stored, here); compare with --against instead")
    passed, line = verdict(current, reference)
    print(f"{line} [{where}]")
    if not passed:
        sys.exit(1)


def run(*command: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    completed = subprocess.run([str(c) for c in command], cwd=cwd, env=env, check=False)
    if completed.returncode != 0:
        sys.exit(completed.returncode)


def ensure_venv(extras: str) -> None:
    marker = VENV / f".installed-{extras or 'base'}"
    stamp = str((ROOT / "pyproject.toml").stat().st_mtime_ns)
    if marker.exists() and marker.read_text() == stamp:
        return
    if not BIN.joinpath("python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"setting up {VENV} with convmem[{extras or 'base'}]; the first time takes a few minutes", flush=True)
    run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    # pip's own progress (one line per package) shows that the long first install is moving.
    run(BIN / "python", "-m", "pip", "install", "--progress-bar", "off", "-e", f".[{extras}]" if extras else ".")
    marker.write_text(stamp)


def typescript_tests() -> None:
    """The TypeScript client's Node tests, against a live ``convmem serve`` of this venv that they start."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        print("skipping the TypeScript client's tests (clients/typescript): node and npm are not installed")
        return
    package = ROOT / "clients" / "typescript"
    run(npm, "ci", "--no-audit", "--no-fund", cwd=package)
    run(npm, "test", cwd=package, env={**os.environ, "CONVMEM_PYTHON": str(BIN / "python")})


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "demo":
        ensure_venv("")
        run(BIN / "convmem", *DEMO, *sys.argv[2:])
    elif command == "test":
        ensure_venv("dev")
        args = sys.argv[2:]
        quick = "--quick" in args
        args = [a for a in args if a != "--quick"]
        run(BIN / "ruff", "check", *SOURCES)
        run(BIN / "ruff", "format", "--check", *SOURCES)
        run(BIN / "mypy")
        if quick:
            os.environ["CONVMEM_QUICK"] = "1"  # property tests take a handful of examples (tests/_quick.py)
        # Collection is mostly pytest compiling and rewriting the test modules: let it keep the result
        # in __pycache__ (ignored by git) where the environment asked Python not to write bytecode.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        if quick:
            run(BIN / "pytest", "-q", *QUICK, *args)
        else:
            # Both cores for the full suite too: every test that needs a server of its own starts it per worker
            # (under the worker's temporary folder), and the shared servers get a namespace per test. The README
            # is read top to bottom in one folder (a line uses what an earlier block made), so it runs apart, in
            # one process, in order.
            run(BIN / "pytest", "-q", "-n", "2", f"--ignore={README_TESTS}", *args)
            run(BIN / "pytest", "-q", README_TESTS, *args)
        if not quick:
            typescript_tests()
    elif command == "bench-check":
        bench_check(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
