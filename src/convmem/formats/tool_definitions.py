"""Tool definitions: a request's ``tools``, taken in any format's shape and sent in each.

What comes in: the tools an app gives ``Memory(tools=...)`` or ``context(tools=...)``, each a dict in one
format's shape: a Chat function tool ``{"type": "function", "function": {"name": ..., "parameters": ...}}``,
a Responses function tool ``{"type": "function", "name": ..., "parameters": ..., "strict": ...}``, an
Anthropic tool ``{"name": ..., "input_schema": ...}``, or a provider's own tool: an Anthropic server or
client tool (its ``type`` ends in a date, such as ``web_search_20250305`` or ``bash_20250124``), a
Responses hosted tool (``file_search``, ``web_search``, ``mcp``, ``custom``, ...) or a Chat ``custom``
tool. What happens: :func:`parse_tools` checks each one (a ``ConfigurationError`` names the tool and the
field) and keeps it as a :class:`ToolDefinition`: a function's name, description, JSON schema and
``strict`` are portable, and the other keys its own format takes are kept verbatim for that format; a
provider's own tool is kept whole, for its format only. What goes out: :func:`render_tools` gives the
tools in one format's shape (Chat ``{"type": "function", "function": {...}}``, Responses flat function
tools, Anthropic tools with ``input_schema``), and the tools that format cannot carry, each with why.

Example::

    tools = parse_tools([{"type": "function", "function": {"name": "get_weather", "parameters": schema}}])
    rendered, refused = render_tools(tools, "anthropic")   # [{"name": "get_weather", "input_schema": schema}]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import ConfigurationError
from ._common import copy_json
from ._detect import Format

__all__ = ["RefusedTool", "ToolDefinition", "parse_tools", "render_tools", "tools_key"]

_PORTABLE = ("name", "description", "parameters", "strict")
_ANTHROPIC_OWN = ("name", "description", "input_schema", "strict")
_DATED = re.compile(r"_\d{8}$")  # Anthropic's own tools are versioned by date: web_search_20250305
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}
_API = {"openai": "Chat Completions", "responses": "the Responses API", "anthropic": "Anthropic's Messages API"}


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One tool of a request, as given in ``format``'s shape.

    Attributes:
        format: the format it was given in.
        name: its name (a provider's own tool may have none: a Responses ``file_search``).
        description: a function's description.
        parameters: a function's JSON schema (Chat and Responses ``parameters``, Anthropic ``input_schema``).
        strict: a function's ``strict``, None when not given.
        kept: the other keys its own format takes (an Anthropic ``cache_control`` or ``defer_loading``, a
            Responses ``output_schema``), verbatim, sent only in that format.
        native: a provider's own tool, whole (None for a function), sent only in its format.
    """

    format: Format
    name: str | None
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    strict: bool | None = None
    kept: Mapping[str, Any] = field(default_factory=dict)
    native: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        """How an account names it: its name, or a nameless provider tool's type."""
        if self.name is not None:
            return self.name
        return str((self.native or {}).get("type", "tool"))


class RefusedTool(NamedTuple):
    """A tool a format cannot carry, and why."""

    tool: ToolDefinition
    reason: str


def parse_tools(
    tools: Sequence[Mapping[str, Any] | ToolDefinition] | None, where: str = "tools"
) -> tuple[ToolDefinition, ...]:
    """Check ``tools`` and keep each as a :class:`ToolDefinition` (see the module docstring); one given
    as a ``ToolDefinition`` already is kept as it is.

    Raises:
        ConfigurationError: not a list of JSON objects, a function without a name or with a field of the
            wrong type, or two tools of one name (every provider refuses that).
    """
    if tools is None:
        return ()
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ConfigurationError(f"{where} must be a list of tool definitions, got {type(tools).__name__}")
    parsed = tuple(_parse(tool, f"{where}[{index}]") for index, tool in enumerate(tools))
    seen: dict[str, int] = {}
    for index, tool in enumerate(parsed):
        if tool.name is not None:
            if tool.name in seen:
                raise ConfigurationError(
                    f"{where}[{index}]: a second tool named {tool.name!r} (first at {where}[{seen[tool.name]}])"
                )
            seen[tool.name] = index
    return parsed


def render_tools(tools: Sequence[ToolDefinition], format: str) -> tuple[list[dict[str, Any]], list[RefusedTool]]:
    """The tools in ``format``'s shape, and those it cannot carry (a provider's own tool of another format)."""
    rendered: list[dict[str, Any]] = []
    refused: list[RefusedTool] = []
    for tool in tools:
        if tool.native is not None:
            if tool.format == format:
                rendered.append(copy_json(dict(tool.native)))
            else:
                reason = f"{tool.label}: a tool of {_API[tool.format]}, which {_API.get(format, format)} has not"
                refused.append(RefusedTool(tool, reason))
            continue
        if format == "openai":
            rendered.append(_chat(tool))
        elif format == "responses":
            rendered.append(_responses(tool))
        else:
            rendered.append(_anthropic(tool))
    return rendered, refused


def tools_key(rendered: Sequence[Mapping[str, Any]]) -> str:
    """The rendered tools as one canonical string: equal strings, an equal prefix for a provider's cache."""
    return json.dumps(rendered, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- parsing -------------------------------------------------------------------------------------


def _parse(tool: Any, where: str) -> ToolDefinition:
    if isinstance(tool, ToolDefinition):
        return tool
    if not isinstance(tool, Mapping):
        raise ConfigurationError(f"{where} must be a JSON object (a tool definition), got {type(tool).__name__}")
    try:
        json.dumps(tool, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{where} is not JSON: {exc}") from None
    kind = tool.get("type")
    if "input_schema" in tool:
        return _function(tool, "anthropic", _ANTHROPIC_OWN, where)
    if kind == "function":
        if "function" in tool:
            return _chat_function(tool, where)
        return _function(tool, "responses", ("type", *_PORTABLE), where)
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(
            f"{where} is no tool definition: a function needs 'type': 'function' (Chat, Responses) or an "
            "'input_schema' (Anthropic), a provider's own tool a 'type'"
        )
    if _DATED.search(kind):
        return _native(tool, "anthropic", where)
    if kind == "custom" and "custom" in tool:
        return _native(tool, "openai", where)
    return _native(tool, "responses", where)


def _chat_function(tool: Mapping[str, Any], where: str) -> ToolDefinition:
    stray = sorted(set(tool) - {"type", "function"})
    if stray:
        raise ConfigurationError(f"{where}.{stray[0]}: a Chat function tool takes only 'type' and 'function'")
    function = tool["function"]
    if not isinstance(function, Mapping):
        raise ConfigurationError(f"{where}.function must be an object, got {type(function).__name__}")
    return _function(function, "openai", _PORTABLE, f"{where}.function")


def _function(d: Mapping[str, Any], format: Format, own: tuple[str, ...], where: str) -> ToolDefinition:
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{where}.name: a function needs a name (a non-empty string), got {name!r}")
    description = d.get("description")
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(f"{where}.description must be a string, got {type(description).__name__}")
    schema_key = "input_schema" if format == "anthropic" else "parameters"
    parameters = d.get(schema_key)
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ConfigurationError(f"{where}.{schema_key} must be a JSON schema object, got {type(parameters).__name__}")
    strict = d.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise ConfigurationError(f"{where}.strict must be true, false or null, got {strict!r}")
    kept = {key: copy_json(value) for key, value in d.items() if key not in own}
    if format == "responses":  # sent back as given: a Responses tool without "strict" stays without it
        kept.update({key: None for key in ("parameters", "strict") if key in d and d[key] is None})
    return ToolDefinition(
        format,
        name,
        description,
        copy_json(parameters) if parameters is not None else None,
        strict,
        kept,
    )


def _native(tool: Mapping[str, Any], format: Format, where: str) -> ToolDefinition:
    name = tool.get("name")
    if name is not None and not isinstance(name, str):
        raise ConfigurationError(f"{where}.name must be a string, got {type(name).__name__}")
    return ToolDefinition(format, name, native=copy_json(dict(tool)))


# -- rendering -------------------------------------------------------------------------------------


def _chat(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = copy_json(dict(tool.parameters))
    if tool.strict is not None:
        function["strict"] = tool.strict
    if tool.format == "openai":
        function.update(copy_json(dict(tool.kept)))
    return {"type": "function", "function": function}


def _responses(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    if tool.format == "responses":  # as given, "strict" and "parameters" included only when they were
        if tool.parameters is not None:
            out["parameters"] = copy_json(dict(tool.parameters))
        if tool.strict is not None:
            out["strict"] = tool.strict
        out.update(copy_json(dict(tool.kept)))
        return out
    # Both are required; a Chat or Anthropic function is not strict unless it says so (Responses' default is).
    out["parameters"] = copy_json(dict(tool.parameters)) if tool.parameters is not None else None
    out["strict"] = bool(tool.strict)
    return out


def _anthropic(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    schema = dict(tool.parameters) if tool.parameters is not None else dict(_EMPTY_SCHEMA)
    schema.setdefault("type", "object")  # Anthropic requires it; OpenAI reads a schema without it as an object
    out["input_schema"] = copy_json(schema)
    if tool.strict is not None:
        out["strict"] = tool.strict
    if tool.format == "anthropic":
        out.update(copy_json(dict(tool.kept)))
    return out
