"""Each extra installs what its error message promises.

Statically, for every install hint in the package (an ``except ImportError`` that raises with
``pip install 'convmem[extra]'``): the extra exists in ``pyproject.toml`` and names, among its own
direct requirements, a distribution that provides each module the ``try`` imports. A module that
only arrives as a dependency of a dependency is not enough: that is how ``[openai]`` stopped
installing what ``OpenAIEmbedder`` imports (openai 3 moved from httpx to httpx2). And once for real,
slowly: ``[openai]`` alone in a fresh venv (no system site-packages), from PyPI, enables what it says.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "convmem"
HINT = re.compile(r"convmem\[([a-z0-9_-]+)\]")
_DISTRIBUTIONS = importlib.metadata.packages_distributions()


def _extras() -> dict[str, set[str]]:
    """Each extra's direct requirements, as normalized distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        extra: {_normal(re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]) for requirement in requirements}
        for extra, requirements in project["optional-dependencies"].items()
    }


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _constants(tree: ast.Module) -> dict[str, str]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _hints() -> list[tuple[str, int, str, str]]:
    """(file, line, extra, module) for every module a hinted ``try`` imports."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            catches = [h for h in node.handlers if "ImportError" in ast.unparse(h.type or ast.Name("BaseException"))]
            texts = [
                n.value if isinstance(n, ast.Constant) else constants.get(n.id, "")
                for h in catches
                for n in ast.walk(h)
                if (isinstance(n, ast.Constant) and isinstance(n.value, str)) or isinstance(n, ast.Name)
            ]
            extras = {m for text in texts if isinstance(text, str) for m in HINT.findall(text)}
            modules = {
                alias.name.split(".")[0]
                for stmt in node.body
                for n in ast.walk(stmt)
                if isinstance(n, ast.Import)
                for alias in n.names
            } | {
                n.module.split(".")[0]
                for stmt in node.body
                for n in ast.walk(stmt)
                if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
            }
            out += [
                (str(path.relative_to(ROOT)), node.lineno, e, m)
                for e in sorted(extras)
                for m in sorted(modules)
                if m != "convmem"
            ]
    return out


def test_the_hints_are_found() -> None:
    hinted = {(extra, module) for _, _, extra, module in _hints()}
    # A sample the scan must see, so a scan that finds nothing cannot pass.
    assert {("openai", "httpx"), ("redis", "redis"), ("postgres", "psycopg")} <= hinted


@pytest.mark.parametrize(("where", "line", "extra", "module"), _hints())
def test_every_install_hint_names_an_extra_that_installs_the_module_it_imports(
    where: str, line: int, extra: str, module: str
) -> None:
    extras = _extras()
    assert extra in extras, f"{where}:{line} hints convmem[{extra}], which pyproject.toml does not define"
    # What provides the module: the installed distributions that do, else (an extra the dev environment
    # leaves out, e.g. torch's) the distribution named like it.
    providers = {_normal(d) for d in _DISTRIBUTIONS.get(module, [])} or {_normal(module)}
    assert providers & extras[extra], (
        f"{where}:{line}: convmem[{extra}] does not itself require {sorted(providers)}, which provide "
        f"{module!r}; its requirements are {sorted(extras[extra])}"
    )


@pytest.mark.slow
def test_the_openai_extra_alone_in_a_fresh_venv_enables_what_its_hints_promise(tmp_path: Path) -> None:
    target = tmp_path / "venv"
    venv.create(target, with_pip=True, system_site_packages=False)
    python = target / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{ROOT}[openai]"], capture_output=True, text=True, timeout=900
    )
    if install.returncode != 0 and "Could not find a version" in install.stderr + install.stdout:
        pytest.skip(f"PyPI is not reachable: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr[-2000:]
    probe = (
        "import httpx\n"  # what OpenAIEmbedder's install hint promises
        "from convmem.llm import OpenAIChat\n"
        "OpenAIChat(model='gpt-4o-mini', base_url='http://127.0.0.1:9', api_key='x').close()\n"
        "from convmem.errors import ConfigurationError\n"
        "try:\n"
        "    import convmem.longterm.recall.embedders\n"  # recall's (numpy): not this extra's, and it says so
        "except ConfigurationError as exc:\n"
        '    assert "convmem[recall]" in str(exc), exc\n'
        "else:\n"
        "    raise AssertionError('numpy came with [openai]: this probe no longer sees the extra alone')\n"
        "print('enabled')\n"
    )
    ran = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == "enabled"
    assert sys.prefix not in ran.stderr
