"""Every error the package raises is in the ``ConvmemError`` tree, or is caught inside the package.

Each ``raise`` of ``src/convmem`` is read with ``ast`` and what it raises is
resolved against the imported module: a class, a function's or method's return
annotation (``raise corrupt(...)``, ``raise exc.at(index)``), both branches of a
conditional, a local variable's assignments. Re-raises (``raise``, ``raise exc``
of an ``except ... as exc``) are what they caught.

A class outside the tree is allowed when it cannot leave the package: raised
inside a ``try`` of the same function whose handler catches it (and does not
re-raise), or raised by a function every reference to which, in the whole
package, sits inside such a ``try`` or inside a function that is itself
covered that way (a decoder's ``ValueError`` that every reader turns into a
``StoreError``; a ``json.loads`` hook). A function nothing in the package
refers to is called by users or frameworks: what escapes it must be in the tree.

The allowlist is the protocols of Python and of the frameworks convmem plugs
into, which expect their own exception types:

* ``NotImplementedError`` as the whole body of a method a subclass overrides;
* ``AttributeError`` from ``__getattr__`` and ``TypeError`` from a dunder method;
* ``AssertionError("unreachable")`` after a loop that always returns or raises;
* typer's ``Exit``/``BadParameter`` in ``convmem.cli`` (exit codes, usage errors), Starlette's
  ``HTTPException`` in ``convmem.server`` (the ASGI body limit, answered as a problem), MCP's
  ``ToolError``/``ResourceError`` in ``convmem.mcp`` (answered as a tool or resource error);
* Google ADK's ``AlreadyExistsError``/``SessionNotFoundError`` in ``convmem.integrations.adk`` and LangGraph's
  ``InvalidNamespaceError`` in ``convmem.integrations.langgraph_store``: what those frameworks' own session
  services and stores raise, and what their callers catch.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import convmem
from convmem.errors import ConvmemError

Key = tuple[str, str]  # (module, qualified name) of a function

FRAMEWORKS = {
    "convmem.cli": ("click.", "typer."),
    "convmem.server": ("starlette.",),
    "convmem.mcp": ("mcp.",),
    "convmem.integrations.adk": ("google.adk.",),
    "convmem.integrations.langgraph_store": ("langgraph.",),
}


@dataclass
class Raise:
    module: str
    line: int
    text: str
    classes: list[type[BaseException]]
    allowed: bool  # by a protocol of the allowlist


@dataclass
class Function:
    raises: list[tuple[Raise, list[ast.Try]]] = field(default_factory=list)
    calls: list[tuple[Key, list[ast.Try]]] = field(default_factory=list)  # references to other functions
    # Where each parameter is used, and the functions passed to this one's parameters (callbacks): what a
    # callback raises leaves this function unless every use of its parameter is covered.
    params: dict[str, list[list[ast.Try]]] = field(default_factory=dict)
    passed: list[tuple[str, Key]] = field(default_factory=list)


class Unresolved(Exception):
    pass


class Reader(ast.NodeVisitor):
    """One module's raises and references to functions, each with the ``try`` blocks around it."""

    def __init__(self, module: ModuleType, functions: dict[Key, Function], raises: list[Raise]) -> None:
        self.module, self.functions, self.raises = module, functions, raises
        self.scopes: list[ast.AST] = []  # enclosing classes and functions, outermost first
        self.tries: list[ast.Try] = []
        self.handlers: list[ast.ExceptHandler] = []
        self.unresolved: list[str] = []
        self.resolving: set[tuple[ast.AST, str]] = set()
        self.callbacks: set[ast.expr] = set()

    # -- where we are ------------------------------------------------------------------------------
    def key(self, scopes: list[ast.AST] | None = None) -> Key:
        names, scopes = [], self.scopes if scopes is None else scopes
        for node in scopes:
            names.append(node.name)  # type: ignore[attr-defined]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.append("<locals>")
        qualname = ".".join(names[:-1] if names and names[-1] == "<locals>" else names)
        return self.module.__name__, qualname or "<module>"

    def here(self) -> Function:
        return self.functions.setdefault(self.key(), Function())

    def function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for node in reversed(self.scopes):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node
        return None

    def owner(self) -> Any:
        """The class object whose method we are in, if any."""
        for index in range(len(self.scopes) - 1, -1, -1):
            if isinstance(self.scopes[index], ast.ClassDef):
                obj: Any = self.module
                for node in self.scopes[: index + 1]:
                    obj = getattr(obj, node.name, None)  # type: ignore[attr-defined]
                return obj
        return None

    # -- walking ---------------------------------------------------------------------------------
    def scoped(self, node: ast.AST) -> None:
        self.scopes.append(node)
        tries, handlers, self.tries, self.handlers = self.tries, self.handlers, [], []
        self.generic_visit(node)
        self.scopes.pop()
        self.tries, self.handlers = tries, handlers

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = scoped

    def visit_Try(self, node: ast.Try) -> None:
        self.tries.append(node)
        for statement in node.body:
            self.visit(statement)
        self.tries.pop()
        for handler in node.handlers:
            self.handlers.append(handler)
            self.visit(handler)
            self.handlers.pop()
        for statement in node.orelse + node.finalbody:
            self.visit(statement)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_Raise(self, node: ast.Raise) -> None:
        self.generic_visit(node)
        if node.exc is None or self.bound(node.exc):
            return  # a re-raise: what was caught
        text = ast.unparse(node.exc)
        try:
            classes = self.classes(node.exc)
        except Unresolved as why:
            self.unresolved.append(f"{self.module.__name__}:{node.lineno}: raise {text} ({why})")
            return
        found = Raise(self.module.__name__, node.lineno, text, classes, self.protocol(node, classes))
        self.raises.append(found)
        self.here().raises.append((found, list(self.tries)))

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load) or node in self.callbacks:
            return
        function = self.function()
        if function is not None and node.id in _parameters(function):
            self.here().params.setdefault(node.id, []).append(list(self.tries))
        elif target := self.local_function(node.id) or self.target(node):
            self.here().calls.append((target, list(self.tries)))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and node not in self.callbacks and (target := self.target(node)):
            self.here().calls.append((target, list(self.tries)))

    def visit_Call(self, node: ast.Call) -> None:
        """A package function passed to a package function is called where that one uses its parameter."""
        callee = self.target(node.func)
        made = self.value(node.func)
        if callee is not None and inspect.isfunction(made):
            names = list(inspect.signature(made).parameters)
            base = node.func.value if isinstance(node.func, ast.Attribute) else None
            if isinstance(base, ast.Call) or getattr(base, "id", None) in ("self", "cls"):
                names = names[1:]  # bound: the instance is the first parameter
            given = [(names[i] if i < len(names) else None, arg) for i, arg in enumerate(node.args)]
            given += [(keyword.arg, keyword.value) for keyword in node.keywords]
            for name, arg in given:
                passed = self.target(arg) if isinstance(arg, ast.Name | ast.Attribute) else None
                if name is not None and passed is not None:
                    self.callbacks.add(arg)
                    self.functions.setdefault(callee, Function()).passed.append((name, passed))
        self.generic_visit(node)

    # -- resolving -------------------------------------------------------------------------------
    def bound(self, node: ast.expr) -> bool:
        """``node`` names the exception of an enclosing handler (``except ... as exc: raise exc``)."""
        return isinstance(node, ast.Name) and any(h.name == node.id for h in self.handlers)

    def value(self, node: ast.expr) -> Any:
        """The object an expression of names and attributes denotes, or None."""
        if isinstance(node, ast.Name):
            if node.id in ("self", "cls"):
                return self.owner()
            for handler in self.handlers:
                if handler.name == node.id and handler.type is not None:
                    caught = self.evaluate(handler.type)
                    return caught if isinstance(caught, type) else None
            local = self.assigned(node.id)
            if local is not None:
                return local
            return self.module.__dict__.get(node.id, getattr(builtins, node.id, None))
        if isinstance(node, ast.Call):  # an instance, looked up on its class: IdIndex(path).find
            made = self.value(node.func)
            return made if isinstance(made, type) else None
        if isinstance(node, ast.Attribute):
            base = self.value(node.value)
            return inspect.getattr_static(base, node.attr, None) if base is not None else None
        return None

    def assigned(self, name: str) -> Any:
        """The class a local variable holds when it is assigned from ``SomeClass(...)`` in this function."""
        function = self.function()
        if function is None or (function, name) in self.resolving:
            return None
        self.resolving.add((function, name))
        try:
            for value in _assignments(function).get(name, ()):
                if isinstance(value, ast.Call) and isinstance(made := self.value(value.func), type):
                    return made
            return None
        finally:
            self.resolving.discard((function, name))

    def evaluate(self, node: ast.expr) -> Any:
        try:
            return eval(ast.unparse(node), vars(self.module))
        except Exception:
            return None

    def classes(self, node: ast.expr) -> list[type[BaseException]]:
        if isinstance(node, ast.IfExp):
            return self.classes(node.body) + self.classes(node.orelse)
        if isinstance(node, ast.Name) and not self.module.__dict__.get(node.id):
            function = self.function()
            values = _assignments(function).get(node.id, []) if function else []
            if values:
                return [cls for value in values for cls in self.classes(value)]
        made = self.value(node.func if isinstance(node, ast.Call) else node)
        if isinstance(made, staticmethod | classmethod):
            made = made.__func__
        if isinstance(made, type) and issubclass(made, BaseException):
            return [made]
        if callable(made):
            return returned(made)
        raise Unresolved("cannot tell what it raises")

    def target(self, node: ast.expr) -> Key | None:
        made = self.value(node)
        if isinstance(made, staticmethod | classmethod):
            made = made.__func__
        if inspect.isfunction(made) and made.__module__.startswith("convmem"):
            made = inspect.unwrap(made)
            return made.__module__, made.__qualname__
        return None

    def local_function(self, name: str) -> Key | None:
        """A function defined inside an enclosing function, referred to by name."""
        for depth in range(len(self.scopes), 0, -1):
            scope = self.scopes[depth - 1]
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                child = _nested(scope).get(name)
                if child is not None:
                    return self.key([*self.scopes[:depth], child])
        return None

    def protocol(self, node: ast.Raise, classes: list[type[BaseException]]) -> bool:
        function = self.function()
        name = function.name if function else ""
        body = [s for s in function.body if not _is_docstring(s)] if function else []
        for cls in classes:
            if cls is NotImplementedError and body == [node]:
                continue
            if cls is AttributeError and name == "__getattr__":
                continue
            if cls is TypeError and name.startswith("__") and name.endswith("__"):
                continue
            if cls is AssertionError and ast.unparse(node.exc) == "AssertionError('unreachable')":  # type: ignore[arg-type]
                continue
            packages = [p for package, p in FRAMEWORKS.items() if self.module.__name__.startswith(package)]
            if any(cls.__module__.startswith(prefix) for group in packages for prefix in group):
                continue
            return False
        return True


_ASSIGNMENTS: dict[ast.AST, dict[str, list[ast.expr]]] = {}
_NESTED: dict[ast.AST, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}


def _assignments(function: ast.AST) -> dict[str, list[ast.expr]]:
    """The values assigned to each plain name inside ``function`` (read once per function)."""
    if function not in _ASSIGNMENTS:
        found: dict[str, list[ast.expr]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append(node.value)
        _ASSIGNMENTS[function] = found
    return _ASSIGNMENTS[function]


def _nested(function: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions defined inside ``function``, by name."""
    if function not in _NESTED:
        _NESTED[function] = {
            node.name: node
            for node in ast.walk(function)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node is not function
        }
    return _NESTED[function]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    arguments = function.args
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    return {a.arg for a in every} - {"self", "cls"}


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def returned(function: Any) -> list[type[BaseException]]:
    """The exception classes a function's return annotation names (a helper that builds the error)."""
    try:
        annotation = typing.get_type_hints(function)["return"]
    except Exception as exc:
        raise Unresolved(f"{function.__qualname__} has no readable return annotation") from exc
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, type(int | str)) else ()
    found = [a for a in options or (annotation,) if isinstance(a, type) and issubclass(a, BaseException)]
    if not found:
        raise Unresolved(f"{function.__qualname__} returns {annotation!r}, not an exception")
    return found


def catches(tries: list[ast.Try], cls: type[BaseException], module: ModuleType) -> bool:
    """One of these ``try`` blocks catches ``cls`` and does not raise it again."""
    for block in tries:
        for handler in block.handlers:
            types, again = _handler(handler, module)
            if not again and any(isinstance(t, type) and issubclass(cls, t) for t in types):
                return True
    return False


_HANDLERS: dict[ast.ExceptHandler, tuple[tuple[Any, ...], bool]] = {}


def _handler(handler: ast.ExceptHandler, module: ModuleType) -> tuple[tuple[Any, ...], bool]:
    """What a handler catches, and whether it raises what it caught again."""
    if handler not in _HANDLERS:
        caught = eval(ast.unparse(handler.type), vars(module)) if handler.type else BaseException
        again = any(
            isinstance(n, ast.Raise)
            and (n.exc is None or (handler.name is not None and getattr(n.exc, "id", None) == handler.name))
            for n in ast.walk(handler)
        )
        _HANDLERS[handler] = (caught if isinstance(caught, tuple) else (caught,), again)
    return _HANDLERS[handler]


def read(module: ModuleType, functions: dict[Key, Function], raises: list[Raise]) -> list[str]:
    """Read one module's source into ``functions`` and ``raises``; returns the raises it cannot resolve."""
    reader = Reader(module, functions, raises)
    reader.visit(ast.parse(Path(module.__file__ or "").read_text()))
    return reader.unresolved


def read_package() -> tuple[dict[Key, Function], list[Raise], list[str]]:
    functions: dict[Key, Function] = {}
    raises: list[Raise] = []
    unresolved: list[str] = []
    names = ["convmem", *sorted(info.name for info in pkgutil.walk_packages(convmem.__path__, "convmem."))]
    for name in names:
        unresolved += read(importlib.import_module(name), functions, raises)
    return functions, raises, unresolved


Escapes = dict[Key, set[tuple[type[BaseException], int]]]


def escapes(functions: dict[Key, Function], modules: dict[str, ModuleType]) -> Escapes:
    """For each function, the (class, id of the raise) pairs outside the tree that can leave it.

    A raise's class leaves its function unless a ``try`` around it catches it; it leaves each function
    that refers to that one unless a ``try`` around the reference catches it; a callback's leaves the
    function it was passed to unless every use of that parameter is covered. Repeated to a fixed point.
    """
    out: Escapes = {key: set() for key in functions}
    for key, function in functions.items():
        for found, tries in function.raises:
            for cls in [] if found.allowed else found.classes:
                if not issubclass(cls, ConvmemError) and not catches(tries, cls, modules[key[0]]):
                    out[key].add((cls, id(found)))
    changed = True
    while changed:
        changed = False
        for key, function in functions.items():
            module = modules[key[0]]
            arriving = [(callee, [tries]) for callee, tries in function.calls]
            arriving += [(callback, function.params.get(name, [])) for name, callback in function.passed]
            for source, uses in arriving:
                for cls, origin in list(out.get(source, ())):
                    if (cls, origin) not in out[key] and any(not catches(tries, cls, module) for tries in uses):
                        out[key].add((cls, origin))
                        changed = True
    return out


def leaks(functions: dict[Key, Function], raises: list[Raise], modules: dict[str, ModuleType]) -> list[str]:
    """The raises outside the tree that can leave a function nothing in the package refers to (one a user
    or a framework calls)."""
    referenced = {callee for f in functions.values() for callee, _ in f.calls}
    referenced |= {callback for f in functions.values() for _, callback in f.passed}
    by_id = {id(r): r for r in raises}
    found: dict[tuple[str, int], str] = {}
    for key, leaving in escapes(functions, modules).items():
        for cls, origin in leaving if key not in referenced else ():
            r = by_id[origin]
            found.setdefault(
                (r.module, r.line), f"{r.module}:{r.line}: raise {r.text} ({cls.__name__}) leaves {key[1]}"
            )
    return [found[where] for where in sorted(found)]


FUNCTIONS, RAISES, UNRESOLVED = read_package()
MODULES = {key[0]: importlib.import_module(key[0]) for key in FUNCTIONS}


def test_every_raise_is_understood() -> None:
    assert not UNRESOLVED, "\n".join(UNRESOLVED)


def test_every_error_that_can_leave_the_package_is_in_the_tree() -> None:
    found = leaks(FUNCTIONS, RAISES, MODULES)
    assert not found, "\n".join(found)


def test_the_reader_follows_helpers_and_signals() -> None:
    """``raise corrupt(...)`` is a StoreError by the helper's annotation; a decoder's ValueError leaves the
    decoder but every reader of the package catches it."""
    helper = [r for r in RAISES if r.module == "convmem.stores.codec" and r.text.startswith("corrupt(")]
    assert helper
    assert all(r.classes == [convmem.StoreError] for r in helper)
    leaving = escapes(FUNCTIONS, MODULES)
    assert {cls for cls, _ in leaving[("convmem.stores.codec", "decode_state")]} == {ValueError}
    assert not leaving[("convmem.stores.codec", "read_state")]


PLANTED = """
from convmem.errors import StoreError

def _decode(text):
    if not text:
        raise ValueError("empty")
    return text

def read(text):
    try:
        return _decode(text)
    except ValueError as exc:
        raise StoreError(f"corrupt: {exc}") from None

def leaky(text):
    return _decode(text)

def careless(items):
    raise KeyError(items[0])
"""


def test_a_planted_raise_outside_the_tree_is_found(tmp_path: Path) -> None:
    path = tmp_path / "planted.py"
    path.write_text(PLANTED)
    module = ModuleType("convmem_planted")
    module.__file__ = str(path)
    exec(compile(PLANTED, str(path), "exec"), module.__dict__)
    functions: dict[Key, Function] = {}
    raises: list[Raise] = []
    assert not read(module, functions, raises)
    found = leaks(functions, raises, {"convmem_planted": module})
    assert [line.split(" leaves ")[1] for line in found] == ["leaky", "careless"]
