"""``LiteLLMChat``: the chat backend for users who already route their calls through LiteLLM.

LiteLLM (extra ``convmem[litellm]``) speaks to a hundred providers behind
the OpenAI call shape, so this adapter is small: it sends the same request
body as :class:`~convmem.llm.client.OpenAIChat` to ``litellm.completion`` /
``litellm.acompletion`` with LiteLLM's own retries off, and applies the same
:class:`~convmem.llm.client.RetryPolicy` and the same error conversion
(LiteLLM's exceptions carry ``status_code`` and a ``response``, as the
OpenAI SDK's do). ``litellm`` is imported on first use; a missing package is
a :class:`~convmem.errors.ConfigurationError` with the exact install command.

Example::

    from convmem.llm import LiteLLMChat, OpenAICompatibleSummarizer

    chat = LiteLLMChat("anthropic/claude-3-5-haiku-20241022")
    summarizer = OpenAICompatibleSummarizer(chat=chat, max_input_tokens=50_000)
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from importlib import import_module
from types import ModuleType
from typing import Any

from ..errors import ConfigurationError
from .client import RetryingChat, RetryPolicy, _Calls

__all__ = ["PIP_HINT", "LiteLLMChat"]

PIP_HINT = "pip install 'convmem[litellm]'"


def _litellm() -> ModuleType:
    try:
        return import_module("litellm")  # optional and untyped: looked up by name, on first use
    except ImportError:
        raise ConfigurationError(f"LiteLLMChat needs the litellm package: {PIP_HINT}") from None


class LiteLLMChat(RetryingChat):
    """A :class:`~convmem.llm.client.ChatBackend` over ``litellm.completion`` (sync and async).

    Args:
        model: a LiteLLM model string, e.g. ``"ollama/llama3.1"`` or ``"anthropic/claude-3-5-haiku-20241022"``.
        timeout: seconds per attempt.
        retry: the :class:`~convmem.llm.client.RetryPolicy`.
        seed: seeds the jitter, for reproducible tests.
        **options: passed to every ``litellm.completion`` call (``api_key``, ``api_base``, ...).

    Raises:
        ConfigurationError: the ``litellm`` package is not installed.
    """

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        **options: Any,
    ) -> None:
        self._litellm = _litellm()  # looked up once: a missing package is a ConfigurationError here, not a retry
        self.model = model
        base = options.get("api_base") or options.get("base_url")
        self.endpoint = f"litellm {base or 'provider default'}"
        api_key = str(options.get("api_key") or "")
        self._calls = _Calls(model, self.endpoint, api_key, timeout, retry or RetryPolicy(), random.Random(seed), {})
        self._options = options

    def __repr__(self) -> str:
        return f"LiteLLMChat(model={self.model!r})"

    def _request(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int, response_format: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        body = self._calls.body(messages, max_tokens, response_format)
        return {**body, **self._options, "timeout": self._calls.timeout, "num_retries": 0}

    def _send(self, request: dict[str, Any]) -> Any:
        return self._litellm.completion(**request)

    async def _asend(self, request: dict[str, Any]) -> Any:
        return await self._litellm.acompletion(**request)
