#!/usr/bin/env python3
"""Set up and run convmem from a fresh clone with nothing but python3.

    python3 scripts/dev.py demo            # replay the shipped agent session on the embedded default
    python3 scripts/dev.py test            # lint + format check + strict type check + the whole test suite,
                                           # then the TypeScript client's Node tests (skipped without node)
    python3 scripts/dev.py test --quick    # the same checks, and the in-process tests (QUICK below)

Each command creates ./.venv on first use and installs what it needs into it.
Only the standard library is used here, on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
        run(BIN / "pytest", "-q", *(QUICK if quick else []), *args)
        if not quick:
            typescript_tests()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
