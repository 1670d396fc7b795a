"""The package's shape: no import cycles, lower layers never import higher ones, an I/O-free core, small modules.

Imports are read from the source with ``ast``, every one of them: at module
level, inside functions (lazy imports) and under ``TYPE_CHECKING``. A cycle
hidden behind a lazy import is still a cycle for whoever reads the code.
The layers are those of ``docs/design.md``, lowest first, each a list of
dotted prefixes of module names below ``convmem`` (the longest prefix that
matches a module decides its layer; a package's own module is
``<package>.__init__``, the root's ``__init__``). The memory's core is a
layer of its own below the adapters: it may import no store, no LLM client,
nothing that users touch, and no module that does I/O (:data:`NOT_IN_CORE`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "convmem"
MAX_LINES = 400

# docs/design.md, "Layers": each entry may import its own layer and the ones before it.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "_redact", "_lazy", "_effects"),
    ("messages", "limits", "formats", "tokens", "usage", "session"),
    ("policy",),
    ("longterm",),
    ("memory",),  # the I/O-free core: every module of convmem/memory/ but the composition root of layer 6
    ("stores", "llm", "telemetry"),
    ("memory.__init__", "memory.aio", "memory._base", "memory._longterm"),
    ("cli", "testing", "server", "client", "integrations", "mcp", "__init__", "__main__"),
]
CORE = LAYERS.index(("memory",))

# What the core may not import, by dotted prefix: the adapters and what users touch (whatever the layers
# say, so a reordered table cannot let them in), and every module that does I/O or waits on it:
# sockets and protocols, event loops (the core runs unchanged under the sync and the async twin),
# processes and threads (the locks are the twins'), files and databases, sleeping (retries wait in the
# drivers), and the drivers and clients convmem's extras bring. ``os`` stays allowed: the core takes the
# entropy of its message ids from it and re-seeds them after a fork, and neither is I/O.
NOT_IN_CORE: tuple[str, ...] = (
    *(f"convmem.{name}" for name in ("stores", "llm", "server", "client", "cli", "mcp", "integrations", "testing")),
    *("socket", "ssl", "select", "selectors", "http", "urllib.request", "ftplib", "smtplib", "asyncio"),
    *("subprocess", "multiprocessing", "concurrent", "threading", "time"),
    *("sqlite3", "dbm", "shelve", "shutil", "tempfile", "pathlib", "mmap"),
    *("psycopg", "psycopg_pool", "psycopg2", "redis", "hiredis", "aiosqlite", "httpx", "requests", "aiohttp"),
    *("urllib3", "openai", "anthropic", "litellm", "fastapi", "starlette", "uvicorn", "mcp"),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["convmem", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every module ``name`` imports, convmem's or not.

    ``from pkg import sub`` names the submodule when it is a convmem module, else ``pkg``; outside
    convmem it names ``pkg.sub`` too, which may be a module (``from urllib import request``).
    """
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    yield sub
                    continue
                yield target
                if target.split(".")[0] != "convmem":
                    yield sub


IMPORTS = {name: set(_imports(name, path)) for name, path in MODULES.items()}
GRAPH = {name: {t for t in imported if t in MODULES and t != name} for name, imported in IMPORTS.items()}


def _key(module: str) -> str:
    """The name layers are matched against: below ``convmem``, a package's own module as ``<package>.__init__``."""
    relative = module.split(".", 1)[1] if "." in module else ""
    path = MODULES.get(module)
    if path is not None and path.name == "__init__.py":
        return f"{relative}.__init__" if relative else "__init__"
    return relative or "__init__"


def _layer(module: str) -> int:
    """The layer of the longest prefix in LAYERS that matches ``module`` at a dot."""
    key = _key(module)
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if key == prefix or key.startswith(prefix + ".")
    ]
    if not matches:
        raise AssertionError(f"{module} belongs to no layer: add its name to LAYERS and to docs/design.md")
    return max(matches)[1]


def _in_core(module: str) -> bool:
    return module in MODULES and _layer(module) == CORE


def _core_imports(imports: dict[str, set[str]]) -> list[str]:
    """``module imports name`` for every import of a core module that :data:`NOT_IN_CORE` forbids."""
    return [
        f"{module} imports {name}"
        for module, imported in sorted(imports.items())
        if _in_core(module)
        for name in sorted(imported)
        if any(name == banned or name.startswith(banned + ".") for banned in NOT_IN_CORE)
    ]


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_real_imports() -> None:
    # Guards the checker itself: a parser that found no edges would pass every test below.
    assert "convmem.messages" in GRAPH["convmem.formats.openai._parse"]
    assert "convmem.stores.sqlite._sql" in GRAPH["convmem.stores.sqlite.store"]
    assert "convmem.formats" in GRAPH["convmem.memory._intake"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_lower_layers_never_import_higher_ones() -> None:
    offending = [
        f"{source} (layer {_layer(source)}) imports {target} (layer {_layer(target)})"
        for source, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if _layer(target) > _layer(source)
    ]
    assert offending == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name: str) -> None:
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by responsibility"


def test_the_checks_catch_a_cycle_and_an_upward_import() -> None:
    GRAPH["convmem.errors"].add("convmem.memory")
    try:
        assert any("convmem.errors" in c and "convmem.memory" in c for c in _cycles())
        assert _layer("convmem.memory") > _layer("convmem.errors")
    finally:
        GRAPH["convmem.errors"].discard("convmem.memory")


def test_layers_go_by_the_longest_dotted_prefix() -> None:
    assert _key("convmem") == "__init__"
    assert _key("convmem.memory") == "memory.__init__"
    assert _key("convmem.memory._core") == "memory._core"
    assert _layer("convmem.memory") == _layer("convmem.memory.aio") == _layer("convmem.memory._base") == CORE + 2
    assert _layer("convmem.memory._core") == _layer("convmem.memory._flows") == _layer("convmem.memory.options") == CORE
    assert _layer("convmem._effects") == 0  # a prefix matches at a dot: "_effects" is not "memory._effects"
    assert _layer("convmem.memory._effects") == CORE
    assert _layer("convmem.stores.sqlite.store") == CORE + 1


def test_the_core_does_no_io() -> None:
    core = sorted(m for m in MODULES if _in_core(m))
    assert {"convmem.memory._core", "convmem.memory._flows", "convmem.memory._staging"} <= set(core)
    assert "convmem.memory" not in core
    assert "convmem.memory.aio" not in core
    assert _core_imports(IMPORTS) == []


def test_the_core_check_catches_a_store_a_client_a_driver_and_a_socket() -> None:
    planted = {
        "convmem.memory._core": "convmem.stores.sqlite",  # a store
        "convmem.memory._flows": "convmem.llm.client",  # an LLM client
        "convmem.memory._staging": "psycopg",  # a driver
        "convmem.memory.options": "socket",  # a socket
        "convmem.memory._intake": "urllib.request",  # a submodule, as `from urllib import request` reads
        "convmem.memory.aio": "asyncio",  # the composition root may: it is no core module
        "convmem.stores.memory": "threading",  # nor is a store
    }
    added = {module: name for module, name in planted.items() if name not in IMPORTS[module]}
    for module, name in added.items():
        IMPORTS[module].add(name)
    try:
        found = _core_imports(IMPORTS)
    finally:
        for module, name in added.items():
            IMPORTS[module].discard(name)
    assert found == [
        "convmem.memory._core imports convmem.stores.sqlite",
        "convmem.memory._flows imports convmem.llm.client",
        "convmem.memory._intake imports urllib.request",
        "convmem.memory._staging imports psycopg",
        "convmem.memory.options imports socket",
    ]


def test_the_import_reader_sees_a_from_import_of_a_foreign_submodule(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def later():\n    from urllib import request, parse\n    import sqlite3\n")
    found = set(_imports("convmem.probe", source))
    assert {"urllib.request", "urllib.parse", "sqlite3"} <= found
