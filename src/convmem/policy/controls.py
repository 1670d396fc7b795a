"""What a request carries besides its messages: its tool definitions and its cache controls.

What comes in: the tools of a turn, which :class:`ToolsForRequest` renders and counts for the format
(:class:`RequestTools`), and the memory's cache options (:class:`CacheControls`). What happens:
assembly spends the tools' tokens before anything else (every provider puts them first in its prompt,
so they are also the first part of a cached prefix), and the renderer places the cache marks
(:mod:`convmem.policy.render`). What goes out: the keyword arguments of the request beyond its
messages and tools (:meth:`CacheControls.params`): OpenAI's ``prompt_cache_key`` and
``prompt_cache_options``, Anthropic's top-level automatic ``cache_control``.

Example::

    CacheControls(ttl="1h", breakpoints="automatic").params("anthropic")
    # {"cache_control": {"type": "ephemeral", "ttl": "1h"}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeAlias

from ..errors import ConfigurationError
from ..formats.tool_definitions import ToolDefinition, render_tools, tools_key
from ..tokens import ModelInfo, TokenCounter
from ..tokens.tools import count_tools
from .context import LeftOut

__all__ = [
    "NO_TOOLS",
    "OPENAI_TTLS",
    "AnthropicTTL",
    "Breakpoints",
    "CacheControls",
    "RequestTools",
    "ToolsForRequest",
    "ephemeral",
]

Breakpoints: TypeAlias = bool | Literal["automatic"]
AnthropicTTL: TypeAlias = Literal["5m", "1h"] | None
#: The ``prompt_cache_options.ttl`` each OpenAI API takes (the SDK's types).
OPENAI_TTLS: Mapping[str, tuple[str, ...]] = {"openai": ("30m",), "responses": ("30m", "12h")}


class RequestTools(NamedTuple):
    """The tools a request sends, rendered for its format and counted.

    Attributes:
        rendered: the tool definitions in the format's shape (read-only: reused between turns).
        tokens: what they add to the request (the provider's tool-use prompt included).
        exact: whether ``tokens`` is the provider's own count (OpenAI's formula on a flat schema).
        key: their canonical text: a change of it moves the start of every cached prefix.
        left_out: the tools this format cannot carry, each with why.
    """

    rendered: Sequence[Mapping[str, Any]] = ()
    tokens: int = 0
    exact: bool = True
    key: str | None = None
    left_out: tuple[LeftOut, ...] = ()


NO_TOOLS = RequestTools()


class ToolsForRequest:
    """Tools rendered for a format and counted, by one model's counter.

    Counts are kept by what is sent (the rendered tools' text, a few sets per format), so the same tools,
    or equal ones given again, are counted once until a calibrated counter learns; the last tools of
    each format are not even rendered again.
    """

    KEPT = 16  # counted sets of tools kept, across formats

    def __init__(self, counter: TokenCounter, info: ModelInfo | None) -> None:
        self.counter, self.info = counter, info
        self._last: dict[str, tuple[tuple[ToolDefinition, ...], Any, RequestTools]] = {}
        self._counted: dict[tuple[str, str], tuple[Any, RequestTools]] = {}

    def __call__(self, tools: tuple[ToolDefinition, ...], format: str) -> RequestTools:
        if not tools:
            return NO_TOOLS
        version = getattr(self.counter, "version", None)  # a calibrated counter's counts change as it learns
        last = self._last.get(format)
        if last is not None and last[0] is tools and last[1] == version:
            return last[2]
        rendered, refused = render_tools(tools, format)
        key = tools_key(rendered)
        left_out = tuple(LeftOut("tool_unsupported", detail=r.reason) for r in refused)
        counted = self._counted.get((format, key))
        if counted is not None and counted[0] == version:  # what is sent is the same
            result = counted[1]._replace(left_out=left_out)
        else:
            count = count_tools(self.counter, rendered, format, self.info)
            result = RequestTools(tuple(rendered), count.tokens, count.exact, key, left_out)
            self._counted[(format, key)] = (version, result)
            if len(self._counted) > self.KEPT:
                del self._counted[next(iter(self._counted))]
        self._last[format] = (tools, version, result)
        return result


class CacheControls(NamedTuple):
    """How a request asks the provider's prompt cache for what it will send again.

    Attributes:
        breakpoints: mark where the stable parts end (Anthropic ``cache_control``, OpenAI
            ``prompt_cache_breakpoint`` for the models that take them); ``"automatic"`` also sends
            Anthropic's top-level ``cache_control``, which marks the request's last block; False marks nothing.
        ttl: the Anthropic lifetime of convmem's marks (``"1h"`` writes cost 2x the input price,
            ``"5m"`` 1.25x; None sends no ``ttl``, which is 5 minutes).
        openai_breakpoints: the model takes ``prompt_cache_breakpoint`` parts (GPT-5.6 and later).
        prompt_cache_key: OpenAI's ``prompt_cache_key``, sent in Chat and Responses requests.
        prompt_cache_options: OpenAI's ``prompt_cache_options`` (``mode``, ``ttl``), sent as given.
    """

    breakpoints: Breakpoints = True
    ttl: AnthropicTTL = None
    openai_breakpoints: bool = False
    prompt_cache_key: str | None = None
    prompt_cache_options: Mapping[str, Any] | None = None

    def marks(self, format: str) -> bool:
        """Whether convmem places cache marks in a request of ``format``."""
        if not self.breakpoints:
            return False
        return format == "anthropic" or self.openai_breakpoints or self.prompt_cache_options is not None

    def openai_limit(self) -> int:
        """Explicit breakpoints one OpenAI request writes: 4, or 3 beside the implicit one (mode ``implicit``)."""
        options = self.prompt_cache_options or {}
        return 4 if options.get("mode") == "explicit" else 3

    def params(self, format: str) -> dict[str, Any]:
        """The request's keyword arguments for these controls in ``format``.

        Raises:
            ConfigurationError: a ``prompt_cache_options.ttl`` the format's API does not take.
        """
        if format == "anthropic":
            if self.breakpoints != "automatic":
                return {}
            return {"cache_control": ephemeral(self.ttl)}
        out: dict[str, Any] = {}
        if self.prompt_cache_key is not None:
            out["prompt_cache_key"] = self.prompt_cache_key
        options = self.prompt_cache_options
        if options is not None:
            ttl = options.get("ttl")
            if ttl is not None and ttl not in OPENAI_TTLS[format]:
                api = "Chat Completions" if format == "openai" else "Responses"
                takes = " or ".join(map(repr, OPENAI_TTLS[format]))
                raise ConfigurationError(f"prompt_cache_options.ttl {ttl!r}: the {api} API takes {takes}")
            out["prompt_cache_options"] = dict(options)
        return out


def ephemeral(ttl: str | None) -> dict[str, str]:
    """An Anthropic ``cache_control`` of lifetime ``ttl`` (None: the API's default, 5 minutes)."""
    return {"type": "ephemeral", "ttl": ttl} if ttl is not None else {"type": "ephemeral"}
