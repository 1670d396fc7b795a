"""README.md cannot drift: every Python block in it runs, every CLI line in it runs, and every figure in it is
copied from bench/README.md (issue 19, deliverable 4).

Blocks run in README order, each in a fresh namespace, in one temporary directory (so a later block may open
what an earlier one stored, as a reader following the README would). A block's first line may say what it needs:

* ``# needs: openai`` -- an OpenAI-compatible API: a local scripted server (``tests/llm/server.py``), reached
  through ``OPENAI_BASE_URL``, speaking chat completions and Responses;
* ``# needs: postgres`` / ``# needs: redis`` -- the real server (skipped when it is down); the block's URL is
  pointed at the test server, and the store's default schema / key prefix at one of this test's own;
* ``# needs: service`` -- a live ``convmem`` service on loopback, its key in ``CONVMEM_API_KEY``;
* ``# process 2`` (anywhere) -- the block runs in a process of its own;
* ``# given: a, b`` -- objects the reader brings (an agent, a chat model); the test passes the framework's own
  offline test model.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BENCH = ROOT / "bench" / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
NEEDS = ("openai", "postgres", "redis", "service")


@dataclass(frozen=True)
class Block:
    line: int
    language: str
    code: str

    @property
    def marker(self) -> tuple[str, list[str]]:
        """("needs", [what]) / ("given", [names]) / ("", []) from the block's first line."""
        first = self.code.splitlines()[0] if self.code else ""
        found = re.match(r"#\s*(needs|given):\s*([\w ,]+?)\s*(\(.*)?$", first)
        if not found:
            return "", []
        return found.group(1), [name.strip() for name in found.group(2).split(",")]

    def __repr__(self) -> str:
        return f"README.md:{self.line}"


def blocks(text: str, language: str) -> list[Block]:
    return [
        Block(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) == language
    ]


TEXT = README.read_text()
PYTHON = blocks(TEXT, "python")


def execute(code: str, namespace: dict[str, Any]) -> None:
    """Run a block as a script; top-level ``await`` is allowed, as in a notebook."""
    compiled = compile(code, "<README block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)


# -- the environment a block needs -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One folder for the whole README, with ``examples/`` as in a clone, and the default database inside it."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "examples").symlink_to(ROOT / "examples")
    patch = pytest.MonkeyPatch()
    patch.chdir(folder)
    patch.setenv("CONVMEM_DB", str(folder / "default.db"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CONVMEM_API_KEY"):
        patch.delenv(name, raising=False)
    yield folder
    patch.undo()


def _responses_body(text: str) -> dict[str, Any]:
    return {
        "id": "resp_readme",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-4o",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_readme",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35},
    }


@pytest.fixture(scope="module")
def openai_server() -> Iterator[Any]:
    from tests.llm.server import ChatServer, Reply

    def reply(request: Any) -> Any:
        if request.path.endswith("/responses"):
            return Reply.json(_responses_body("It is sunny in Paris."))
        if "response_format" in request.body:  # the fact extractor: one fact, stated by the first message it saw
            first = re.search(r"<new_messages>\n\[(\S+) ", str(request.body["messages"][-1]["content"]))
            operation = {"op": "add", "fact_id": None, "text": "Alice lives in Porto.", "subject": "alice.home"}
            operation |= {"reason": None, "source_message_ids": [first.group(1)] if first else []}
            return Reply.text(json.dumps({"operations": [operation]}), prompt_tokens=300, completion_tokens=40)
        return Reply.text("It is sunny in Paris.", prompt_tokens=30, completion_tokens=5)

    with ChatServer(reply) as server:
        yield server


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    pytest.importorskip("fastapi")
    from convmem.server import Settings, create_app
    from tests.server.conftest import serve_in_thread

    tmp = tmp_path_factory.mktemp("readme-service")
    app = create_app(Settings(store=str(tmp / "data.db"), keys=str(tmp / "keys.db")))
    key = app.state.service.registry.create_key("readme").secret
    url, server, thread = serve_in_thread(app.state.asgi)
    yield url, key
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(10)
    app.state.service.close()


def _up(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _postgres(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Callable[[str], str]:
    from tests.stores._servers import PG_URL, drop_schemas, schema_for

    if not _up("127.0.0.1", 5432) and "CONVMEM_POSTGRES_URL" not in os.environ:
        pytest.skip("PostgreSQL is not running")
    from convmem.stores.postgres._db import Settings

    schema = schema_for(f"readme:{request.node.name}")
    original = Settings.of.__func__  # type: ignore[attr-defined]

    def of(cls: Any, url: Any, name: str, *rest: Any) -> Any:  # the block's default schema -> this test's own
        return original(cls, url, schema if name == "convmem" else name, *rest)

    monkeypatch.setattr(Settings, "of", classmethod(of))
    request.addfinalizer(lambda: drop_schemas({schema}))
    return lambda code: re.sub(r"postgres(ql)?://[^\"' ]+", PG_URL, code)


def _redis(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Callable[[str], str]:
    from tests.stores._servers import REDIS_URL, drop_prefixes, prefix_for

    if not _up("127.0.0.1", 6379) and "CONVMEM_REDIS_URL" not in os.environ:
        pytest.skip("Redis is not running")
    import convmem.stores.redis.store as redis_store

    prefix = prefix_for(f"readme:{request.node.name}")
    original = redis_store._keys

    def keys(name: str, *rest: Any) -> Any:  # the block's default prefix -> this test's own
        return original(prefix if name == "convmem:" else name, *rest)

    monkeypatch.setattr(redis_store, "_keys", keys)
    request.addfinalizer(lambda: drop_prefixes({prefix}))
    return lambda code: re.sub(r"redis://[^\"' ]+", REDIS_URL, code)


def _asked(server: Any, before: int) -> None:
    assert len(server.requests) > before, "a block that needs the API never called it"


def _given(names: list[str], code: str) -> dict[str, Any]:
    """The framework's own offline test objects, for the names a block takes from its reader."""
    given: dict[str, Any] = {}
    if "google.adk" in code:
        from google.adk.agents import LlmAgent
        from google.adk.models.base_llm import BaseLlm
        from google.adk.models.llm_response import LlmResponse
        from google.genai import types

        class Hello(BaseLlm):
            model: str = "hello"

            async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Hello!")]))

        given["agent"] = LlmAgent(name="assistant", model=Hello(), instruction="Be brief.")
    elif "agents" in code:
        from agents import Agent, set_tracing_disabled
        from agents.testing import ModelStep, ScriptedModel, assistant_message

        set_tracing_disabled(True)
        model = ScriptedModel([ModelStep.respond(lambda call: [assistant_message("Hello!")])])
        given["agent"] = Agent(name="assistant", instructions="Be brief.", model=model)
    elif "langchain" in code or "langgraph" in code:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        given["model"] = GenericFakeChatModel(messages=iter([AIMessage("Hello!")]))
        given["tools"] = []
    elif "llama_index" in code:
        from llama_index.core.llms import MockLLM

        given["llm"] = MockLLM(max_tokens=20)
    elif "pydantic_ai" in code:
        from pydantic_ai.models.test import TestModel

        given["model"] = TestModel(custom_output_text="Hello!")
    missing = set(names) - set(given)
    assert not missing, f"the README test has nothing to give for {sorted(missing)}"
    return {name: given[name] for name in names}


# -- the tests ------------------------------------------------------------------------------------------------


def test_the_readme_has_the_blocks_this_test_expects() -> None:
    # Guards the extractor: a fence regex that matched nothing would make every test below pass vacuously.
    assert len(PYTHON) >= 15
    kinds = {block.marker[0] for block in PYTHON}
    assert kinds == {"", "needs", "given"}
    for block in PYTHON:
        kind, names = block.marker
        if kind == "needs":
            assert len(names) == 1, f"{block!r}: one need per block"
            assert names[0] in NEEDS, f"{block!r}: unknown need {names}"
        assert "../" not in block.code


@pytest.mark.parametrize("block", PYTHON, ids=repr)
def test_every_python_block_runs(
    block: Block,
    workdir: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, namespace = block.code, {"__name__": "__readme__"}
    kind, names = block.marker
    if kind == "needs" and names == ["openai"]:
        server = request.getfixturevalue("openai_server")
        for name in ("OPENAI_BASE_URL", "CONVMEM_LLM_BASE_URL"):
            monkeypatch.setenv(name, server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
        before = len(server.requests)
        request.addfinalizer(lambda: _asked(server, before))
    elif kind == "needs" and names == ["postgres"]:
        code = _postgres(monkeypatch, request)(code)
    elif kind == "needs" and names == ["redis"]:
        code = _redis(monkeypatch, request)(code)
    elif kind == "needs" and names == ["service"]:
        url, key = request.getfixturevalue("service")
        monkeypatch.setenv("CONVMEM_API_KEY", key)
        code = code.replace("http://127.0.0.1:8000", url)
    elif kind == "given":
        namespace.update(_given(names, code))
    if re.search(r"^# process 2\b", code, re.M):  # the README says another process: run it in one
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout or "print(" not in code
        return
    with warnings.catch_warnings():
        # RunnableWithMessageHistory and LangGraph's create_react_agent are deprecated upstream but still shipped,
        # and what their users run today; nothing else may warn.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"langgraph|langchain")
        warnings.filterwarnings("ignore", message=r".*(create_react_agent|RunnableWithMessageHistory).*")
        try:
            execute(code, namespace)
        finally:
            _close_sdk_clients(namespace)
    assert capsys.readouterr().out or "print(" not in code  # a block that prints, printed


def _close_sdk_clients(namespace: dict[str, Any]) -> None:
    """Close the provider SDK clients a block made (a reader's process would just exit)."""
    for value in namespace.values():
        if type(value).__module__.startswith("openai") and callable(getattr(value, "close", None)):
            value.close()


def test_a_failing_block_fails_the_test(workdir: Path) -> None:
    with pytest.raises(AssertionError):
        execute("from convmem import Memory\nassert Memory('gpt-4o').budget == 1\n", {})
    with pytest.raises(NameError):
        execute("print(undefined_name)", {})


def test_top_level_await_runs() -> None:
    namespace: dict[str, Any] = {}
    execute("import asyncio\nawait asyncio.sleep(0)\ndone = True\n", namespace)
    assert namespace["done"] is True


# -- the CLI lines --------------------------------------------------------------------------------------------


def _cli_lines() -> list[str]:
    """Every ``convmem ...`` line of the CLI section (the service and MCP ones start servers: not run here)."""
    section = TEXT.split("\n## CLI\n", 1)[1].split("\n## ", 1)[0]
    return [
        line.split("#")[0].strip()
        for block in blocks(section, "sh")
        for line in block.code.splitlines()
        if line.startswith("convmem ")
    ]


@pytest.mark.parametrize("line", _cli_lines())
def test_every_cli_line_runs(line: str, workdir: Path) -> None:
    from convmem.cli import app

    argv = shlex.split(line)[1:]
    target = None
    if ">" in argv:
        at = argv.index(">")
        argv, target = argv[:at], argv[at + 1]
    argv = [str(workdir / "replay.db") if a == "sqlite:///tmp/demo.db" else a for a in argv]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert result.stdout.strip()
    if target is not None:
        Path(target).write_text(result.stdout)
        assert all(json.loads(x) for x in Path(target).read_text().splitlines())


def test_the_cli_section_has_lines() -> None:
    assert len(_cli_lines()) >= 5


# -- the set-up commands, the links and the figures ------------------------------------------------------------


def test_the_two_setup_commands_come_first_and_exist() -> None:
    first = [block.code.strip() for block in blocks(TEXT, "sh")[:2]]
    assert first == ["python3 scripts/dev.py demo", "python3 scripts/dev.py test"]
    assert TEXT.index("python3 scripts/dev.py demo") < TEXT.index("```python")
    dev = (ROOT / "scripts" / "dev.py").read_text()
    for word in ('command == "demo"', 'command == "test"', '"--quick"', '"not slow'):
        assert word in dev


def test_every_extra_is_listed_with_what_it_enables() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    rows = set(re.findall(r"^\| `([\w-]+)` \|", TEXT, re.M))
    assert set(extras) <= rows, f"extras missing from the README table: {sorted(set(extras) - rows)}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", markdown, re.M)}


def test_every_link_resolves_inside_the_repository() -> None:
    links = re.findall(r"\]\(([^)]+)\)", TEXT)
    assert links
    for link in links:
        assert not link.startswith(("http:", "https:", "/", "..")), f"{link} leaves the repository"
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        assert target.exists(), f"{link}: no such file"
        if anchor:
            assert anchor in _anchors(target.read_text()), f"{link}: no such heading"


def test_nothing_refers_to_files_outside_the_repository() -> None:
    for word in ("DESIGN.md", "shared/", "/work/", "../", "the issues", "closing note"):
        assert word not in TEXT, word
    for path in re.findall(r"`((?:src|tests|bench|docs|examples|scripts)/[\w./-]+)`", TEXT):
        assert (ROOT / path).exists(), path


def _figures(text: str) -> set[str]:
    """Numbers that are measurements: with a decimal point, a thousands comma, a unit or a percent sign."""
    found = re.findall(r"(?<![\w.])(\d[\d,]*\.\d+|\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?(?=x\b| ?%| ?ms| ?µs))", text)
    return {f for f in found if not re.fullmatch(r"\d+\.\d+\.\d+", f)}


def test_every_figure_is_copied_from_bench_readme() -> None:
    bench = BENCH.read_text()
    figures = TEXT.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
    table = TEXT.split("What each integration adds", 1)[1].split("Known limits", 1)[0]
    quoted = _figures(figures) | _figures(table)
    assert len(quoted) > 30  # guards the extractor
    missing = sorted(f for f in quoted if f not in bench)
    assert missing == [], f"figures in README.md that bench/README.md does not have: {missing}"
    # Each figure line names the command that produced it, as bench/README.md gives it.
    for item in re.findall(r"^- \*\*.+?(?=^- \*\*|\Z)", figures, re.M | re.S):
        commands = re.findall(r"`(\.venv/bin/python [^`]+)`", item)
        assert commands, f"no command for: {item[:60]}"
        assert all(c in bench for c in commands), commands


def test_the_figure_check_catches_a_made_up_figure() -> None:
    assert "23.4 ms" not in BENCH.read_text()
    assert "23.4" in _figures("llama-index takes about 23.4 ms per turn")
    assert "1,234" in _figures("it read 1,234 rows")
    assert "7" in _figures("a 7% gain")
