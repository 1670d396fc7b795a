"""Lazy package attributes: a public name is imported from its module on first use.

Packages list ``name -> module`` and assign ``__getattr__ = lazy(__name__, names)``,
so ``import convmem`` (or ``convmem.stores``) stays cheap and an optional
extra is needed only by whoever uses what needs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy"]


def lazy(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``names[name]`` (relative to ``package``) and caches the value."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
