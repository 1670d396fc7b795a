"""Each integration names its exact pip install line when its framework is missing."""

from __future__ import annotations

import importlib
import sys

import pytest

from convmem import ConfigurationError

CASES = [
    ("convmem.integrations.agents", "agents", "agents"),
    ("convmem.integrations.langchain", "langchain_core", "langchain"),
    ("convmem.integrations.langgraph_store", "langgraph", "langchain"),
    ("convmem.integrations.langgraph_checkpoint", "langgraph", "langchain"),
    ("convmem.integrations.llamaindex", "llama_index", "llamaindex"),
    ("convmem.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("convmem.integrations.adk", "google.adk", "adk"),
    ("convmem.integrations.agent_framework", "agent_framework", "agent-framework"),
    ("convmem.mcp.server", "mcp", "mcp"),
]


@pytest.mark.parametrize(("module", "package", "extra"), CASES)
def test_a_missing_framework_names_the_extra(
    module: str, package: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules makes the import raise ImportError
    monkeypatch.setitem(sys.modules, package, None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ConfigurationError) as caught:
        importlib.import_module(module)
    assert f"pip install 'convmem[{extra}]'" in str(caught.value)


def test_import_convmem_imports_no_framework() -> None:
    import subprocess

    code = (
        "import sys, convmem, convmem.integrations, convmem.mcp; "
        "print([m for m in ('agents', 'langchain_core', 'llama_index', 'pydantic_ai', 'google.adk', "
        "'agent_framework', 'mcp') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
