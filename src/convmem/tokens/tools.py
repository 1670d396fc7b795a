"""What a request's tool definitions cost, in its format, for its model.

What comes in: the tools as rendered for the request (:func:`convmem.formats.tool_definitions.render_tools`),
the format, the counter and the model's registry entry. What happens, by format and counter:

* **Chat and Responses, counted by tiktoken** (OpenAI's models): the formula of OpenAI's cookbook ("How to
  count tokens with tiktoken", ``num_tokens_for_tools``), which OpenAI checks against the API's
  ``prompt_tokens``. Per function: ``func_init`` plus the tokens of ``name:description`` (one trailing
  period dropped); when its parameters have properties, ``prop_init`` once and per property ``prop_key``
  plus the tokens of ``key:type:description``, and an enum adds ``enum_init`` once and ``enum_item`` plus
  the item's tokens per item; ``func_end`` once per request. The constants are the cookbook's: gpt-4o's
  ``(7, 3, 3, -3, 3, 12)`` for ``o200k_base`` models, gpt-4's ``(10, 3, 3, -3, 3, 12)`` for ``cl100k_base``
  ones. The formula reads only those fields, so the count is exact (``exact=True``) for a flat schema
  (properties with a string ``type``, a ``description`` and string ``enum`` items); what it does not read
  (nested objects, ``items``, ``anyOf``, ``defer_loading``...) and a provider's own tool are added as the
  tokens of their JSON, and the count says ``exact=False``.
* **Anthropic**: the tool-use system prompt Anthropic adds whenever a request has tools, from the
  registry (:attr:`~convmem.tokens.ModelInfo.tool_prompt_tokens`; the larger of its two counts, as
  ``tool_choice`` is the caller's), plus each tool's JSON counted by the model's counter (calibrated
  from the reported usage: ``exact=False``).
* **Any other counter** (a calibrated one, a Hugging Face tokenizer): each tool's JSON counted by it,
  ``exact=False``: the chat template's rendering of tools is the model's own.

What goes out: a :class:`ToolsCount`.

Example::

    count_tools(counter_for("gpt-4o"), rendered, "openai", lookup_model("gpt-4o"))   # ToolsCount(101, True, 0)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ._modelinfo import ModelInfo
from .counter import TiktokenCounter, TokenCounter

__all__ = ["OPENAI_TOOL_CONSTANTS", "ToolsCount", "count_tools", "openai_tool_tokens"]

#: The cookbook's (func_init, prop_init, prop_key, enum_init, enum_item, func_end), by vocabulary.
OPENAI_TOOL_CONSTANTS: Mapping[str, tuple[int, int, int, int, int, int]] = {
    "o200k_base": (7, 3, 3, -3, 3, 12),
    "cl100k_base": (10, 3, 3, -3, 3, 12),
}
_FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_PARAMETER_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
_PROPERTY_KEYS = frozenset({"type", "description", "enum"})


class ToolsCount(NamedTuple):
    """The tokens of a request's tools: the definitions and ``prompt``, the provider's tool-use prompt."""

    tokens: int
    exact: bool
    prompt: int = 0


NO_TOOLS = ToolsCount(0, True)


def count_tools(
    counter: TokenCounter, tools: Sequence[Mapping[str, Any]], format: str, info: ModelInfo | None
) -> ToolsCount:
    """The tokens ``tools`` (rendered for ``format``) add to a request; see the module docstring."""
    if not tools:
        return NO_TOOLS
    if format in ("openai", "responses") and isinstance(counter, TiktokenCounter):
        constants = OPENAI_TOOL_CONSTANTS.get(counter.encoding.name)
        if constants is not None:
            tokens, exact = openai_tool_tokens(counter.count_text, tools, constants)
            return ToolsCount(tokens, exact)
    prompt = 0
    if format == "anthropic" and info is not None and info.tool_prompt_tokens is not None:
        prompt = max(info.tool_prompt_tokens)
    return ToolsCount(prompt + sum(counter.count_text(_json(tool)) for tool in tools), False, prompt)


def openai_tool_tokens(
    count: Callable[[str], int], tools: Sequence[Mapping[str, Any]], constants: tuple[int, int, int, int, int, int]
) -> tuple[int, bool]:
    """OpenAI's formula over Chat or Responses tools: the tokens, and whether the formula read all of them."""
    func_init, prop_init, prop_key, enum_init, enum_item, func_end = constants
    total, exact = 0, True
    for tool in tools:
        function = tool.get("function") if "function" in tool else tool
        if tool.get("type") != "function" or not isinstance(function, Mapping):  # a provider's own tool
            total += count(_json(tool))
            exact = False
            continue
        total += func_init + count(f"{function['name']}:{_without_period(function.get('description') or '')}")
        unread = {k: v for k, v in function.items() if k not in _FUNCTION_KEYS}
        parameters = function.get("parameters") or {}
        unread.update({k: v for k, v in parameters.items() if k not in _PARAMETER_KEYS})
        properties = parameters.get("properties") or {}
        if properties:
            total += prop_init
            for key, schema in properties.items():
                total += prop_key
                if not isinstance(schema, Mapping):
                    unread[key] = schema
                    continue
                enum = schema.get("enum")
                if enum is not None:
                    total += enum_init
                    for item in enum:
                        total += enum_item + count(item if isinstance(item, str) else json.dumps(item))
                    exact = exact and all(isinstance(item, str) for item in enum)
                kind = schema.get("type")
                exact = exact and isinstance(kind, str)
                kind_text = kind if isinstance(kind, str) else json.dumps(kind)
                description = schema.get("description")
                exact = exact and (description is None or isinstance(description, str))
                text = description if isinstance(description, str) else ""
                total += count(f"{key}:{kind_text}:{_without_period(text)}")
                rest = {k: v for k, v in schema.items() if k not in _PROPERTY_KEYS}
                if rest:
                    unread[key] = rest
        if unread:
            total += count(_json(unread))
            exact = False
    return total + func_end, exact


def _without_period(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
