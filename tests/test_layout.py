"""The package's shape: no import cycles, lower layers never import higher ones, small modules.

Imports are read from the source with ``ast``, every one of them: at module
level, inside functions (lazy imports) and under ``TYPE_CHECKING``. A cycle
hidden behind a lazy import is still a cycle for whoever reads the code.
The layers are those of ``docs/design.md``, lowest first.
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
    ("errors", "_lazy", "_effects"),
    ("messages", "limits", "formats", "tokens", "usage", "session"),
    ("policy",),
    ("longterm",),
    ("stores", "llm"),
    ("memory",),
    ("cli", "testing", "server", "client", "integrations", "mcp", "__init__", "__main__"),
]


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
    """The convmem modules ``name`` imports (``from pkg import sub`` names the submodule)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "convmem")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "convmem":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if sub in MODULES else target


GRAPH = {name: {t for t in _imports(name, path) if t in MODULES and t != name} for name, path in MODULES.items()}


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"{module} belongs to no layer: add its top-level name to LAYERS and to docs/design.md")


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
    assert "convmem.messages" in GRAPH["convmem.formats.openai"]
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
