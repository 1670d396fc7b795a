"""The curated ``__all__`` of ``convmem`` and of every public package that has one.

Each is sorted (the isort-style order ruff's RUF022 keeps: constants, then
classes, then the rest, each in natural order), complete (every name the
package offers lazily is in it), importable name by name, free of private
names, and what ``dir()`` shows when the package defines ``__dir__``. The root
is also cheap to import and short: a user's first names, not the whole package.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from types import ModuleType

import pytest

import convmem


def isort_key(name: str) -> tuple[int, list[object]]:
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def lazy_names(package: ModuleType) -> set[str]:
    """The names a package's lazy ``__getattr__`` offers (``convmem._lazy.lazy`` keeps them in its closure)."""
    getattr_ = package.__dict__.get("__getattr__")
    cells = getattr(getattr_, "__closure__", None) or ()
    for cell in cells:
        if isinstance(cell.cell_contents, dict):
            return set(cell.cell_contents)
    return set()


def public_packages() -> list[str]:
    found = ["convmem"]
    for info in pkgutil.walk_packages(convmem.__path__, "convmem."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return [name for name in found if hasattr(importlib.import_module(name), "__all__")]


PACKAGES = public_packages()


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_importable_complete_and_public(name: str) -> None:
    package = importlib.import_module(name)
    exported = list(package.__all__)
    assert exported == sorted(exported, key=isort_key)
    assert len(exported) == len(set(exported))
    private = [n for n in exported if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))]
    assert not private
    assert lazy_names(package) <= set(exported), "a lazily offered name is missing from __all__"
    for member in exported:
        assert getattr(package, member) is not None  # a lazy name is imported here
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)  # the star import a user writes
    assert set(exported) <= set(namespace)
    if "__dir__" in package.__dict__:
        assert dir(package) == sorted(exported)


def test_the_root_offers_a_users_first_names_and_nothing_else() -> None:
    names = set(convmem.__all__)
    assert 30 <= len(names) <= 45
    for first in ("Memory", "AsyncMemory", "Message", "Context", "Strategy", "Limits", "Store", "open_store"):
        assert first in names
    for lower_level in ("MemoryStore", "repair_messages", "lookup_model", "counter_for", "TextPart", "LeftOut"):
        assert lower_level not in names
        with pytest.raises(AttributeError):
            getattr(convmem, lower_level)
    assert dir(convmem) == sorted(names)
    errors = importlib.import_module("convmem.errors")
    tree = {n for n in names if isinstance(getattr(convmem, n), type) and issubclass(getattr(convmem, n), Exception)}
    assert all(getattr(convmem, n) is getattr(errors, n) for n in tree)
    assert convmem.EvictionSink is importlib.import_module("convmem.memory").EvictionSink


def test_importing_the_root_imports_no_memory_store_or_client() -> None:
    code = "import sys, convmem; print(sorted(m for m in sys.modules if m.startswith('convmem')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("convmem.memory", "convmem.stores", "convmem.client", "convmem.longterm", "convmem.tokens"):
        assert f"'{heavy}'" not in loaded
