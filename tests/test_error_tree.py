"""The error tree as drawn (``convmem.errors``' docstring, docs/design.md section 9) is the tree as defined.

Every class of the drawing exists, sits under the class drawn above it, has
the builtin bases drawn beside it (``(ValueError)``), and the drawing names
every class of the tree.
"""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import pytest

import convmem.errors as errors
from convmem.errors import PROBLEMS, ConvmemError, ServiceError

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design.md"
BRANCH = re.compile(r"^(?P<indent>[ |]*)[|`]- (?P<rest>.*)$")


def drawn(text: str) -> list[tuple[str, str, list[str]]]:
    """(class, drawn parent, builtin bases drawn beside it) for every class of the drawing."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "ConvmemError")
    margin = len(lines[start]) - len(lines[start].lstrip())
    parents = ["ConvmemError"]
    found: list[tuple[str, str, list[str]]] = []
    for line in lines[start + 1 :]:
        match = BRANCH.match(line)
        if match is None:
            break
        depth = (len(match["indent"]) - margin - 1) // 4  # a branch every four columns
        items = re.split(r"\s{2,}", match["rest"].strip())[0]  # the names; what follows is a note
        names = []
        for item in items.split(", "):
            name, _, aside = item.partition(" (")
            bases = [aside.rstrip(")")] if hasattr(builtins, aside.rstrip(")")) else []
            found.append((name, parents[depth], bases))
            names.append(name)
        del parents[depth + 1 :]
        parents.append(names[-1])
    return found


def every_class() -> set[type[ConvmemError]]:
    found, pending = set(), [ConvmemError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return {cls for cls in found if cls.__module__ == "convmem.errors"}


@pytest.mark.parametrize(
    "text",
    [errors.__doc__ or "", DESIGN.read_text().split("## 9. Errors", 1)[1]],
    ids=["errors.py", "design.md"],
)
def test_the_drawn_tree_is_the_defined_one(text: str) -> None:
    tree = drawn(text)
    assert len(tree) > 10
    for name, parent, bases in tree:
        cls = getattr(errors, name)
        assert getattr(errors, parent) in cls.__bases__, f"{name} is drawn under {parent}"
        for base in bases:
            assert issubclass(cls, getattr(builtins, base)), f"{name} is drawn as a {base}"
    assert {name for name, _, _ in tree} | {"ConvmemError"} == {cls.__name__ for cls in every_class()}


def test_the_table_and_the_tree_agree() -> None:
    assert set(PROBLEMS) | {ServiceError} == every_class()
