"""docs/design.md stays true: every path it names exists, its layout lists every module of the package, and its
layers are the ones tests/test_layout.py enforces."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layout import LAYERS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "convmem"
DESIGN = (ROOT / "docs" / "design.md").read_text()


def _section(text: str, number: int) -> str:
    start = text.index(f"\n## {number}. ")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def named_paths(text: str) -> set[str]:
    """Paths named in backticks or in the layout: ``a/b.py``, ``src/convmem/...``, ``tests/...``, ``x.md``."""
    paths = set(re.findall(r"`([\w./-]+/[\w./-]*\w|[\w-]+\.(?:py|md|toml))`", text))
    paths |= set(re.findall(r"(?<![\w/])((?:src|tests|bench|docs|examples)/[\w./-]*\w)", text))
    return {p for p in paths if not p.startswith(("http", "/", "v1/"))}


def missing_paths(text: str) -> list[str]:
    """The named paths that exist neither from the repository root nor from the package."""
    return sorted(p for p in named_paths(text) if not (ROOT / p).exists() and not (PACKAGE / p).exists())


def layout_files(text: str) -> set[Path]:
    """Every ``name.py`` of section 6's layout block, resolved against the directory its line belongs to."""
    block = re.search(r"```\n(.*?)```", _section(text, 6), re.S)
    assert block is not None
    found: set[Path] = set()
    directory = PACKAGE
    top = PACKAGE
    for line in block.group(1).splitlines():
        head = line.split()[0] if line.strip() else ""
        if line.startswith("src/convmem/"):
            top = directory = ROOT / head.rstrip("/") if head.endswith("/") else PACKAGE
            if head.endswith(".py"):
                directory = PACKAGE
        elif re.match(r"^  \w+/\s", line):  # a backend subpackage under the last directory
            directory = top / head.rstrip("/")
        elif not line.startswith(" "):
            directory = PACKAGE
        body = line if not line.startswith("src/convmem/") else line[len(head) :]
        body = re.sub(r"static/ \(.*?\)", "", body)
        for name in re.findall(r"(?<![\w/.])(_?\w+\.py)\b", body):
            found.add(directory / name)
    return found


def test_every_path_the_design_doc_names_exists() -> None:
    assert len(named_paths(DESIGN)) > 20  # guards the extractor
    assert missing_paths(DESIGN) == []


def test_the_layout_lists_every_module_and_only_real_ones() -> None:
    listed = layout_files(DESIGN)
    files = set(PACKAGE.rglob("*.py"))
    modules = {p for p in files if p.name != "__init__.py"}  # a package's __init__ may go unnamed
    assert sorted(str(p.relative_to(PACKAGE)) for p in listed - files) == []
    assert sorted(str(p.relative_to(PACKAGE)) for p in modules - listed) == []


def test_the_layers_table_is_the_one_the_layout_test_enforces() -> None:
    rows = re.findall(r"^\| (\d) [^|]*\| ([^|]+) \|", _section(DESIGN, 5), re.M)
    assert [int(number) for number, _ in rows] == list(range(len(LAYERS)))
    documented = []
    for _, packages in rows:
        names = set(re.findall(r"`([\w.]+)`", packages))  # dotted prefixes: `memory.aio`
        if "convmem" in names:  # "the root `convmem`": the package's __init__ and __main__
            names = (names - {"convmem"}) | {"__init__", "__main__"}
        documented.append(names)
    assert documented == [set(layer) for layer in LAYERS]


def test_the_checks_catch_a_wrong_path_and_a_missing_module() -> None:
    assert missing_paths("see `longterm/no_such_module.py` and src/convmem/nowhere/") == [
        "longterm/no_such_module.py",
        "src/convmem/nowhere",
    ]
    shortened = DESIGN.replace("rewriter.py, litellm.py", "litellm.py")
    assert PACKAGE / "llm" / "rewriter.py" not in layout_files(shortened)
    assert PACKAGE / "llm" / "rewriter.py" in layout_files(DESIGN)
    assert PACKAGE / "stores" / "redis" / "_rsearch.py" in layout_files(DESIGN)
