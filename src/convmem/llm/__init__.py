"""LLM adapters: summaries and fact extraction over OpenAI-compatible APIs, and an offline fallback.

* :class:`ExtractiveSummarizer` -- offline and deterministic: keeps the most
  salient sentences of the evicted messages. ``summary_buffer`` and
  ``compaction`` use it when no summarizer is given.
* :class:`OpenAICompatibleSummarizer` -- incremental, chunked running summaries
  by any OpenAI-compatible chat model (OpenAI, vLLM, Ollama, llama.cpp, a
  LiteLLM proxy). Extra ``convmem[openai]``.
* :class:`OpenAICompatibleFactExtractor` -- add / update / invalidate
  operations on a user's facts, as validated structured output.
* :class:`OpenAICompatibleQueryRewriter` -- optional query rewriting for recall
  (``RecallIndex(rewriter=...)``): the model turns a question into search strings.
* :class:`OpenAIChat` and :class:`RetryPolicy` -- the retrying client they use;
  :class:`LiteLLMChat` (extra ``convmem[litellm]``) routes through LiteLLM.

Only :class:`ExtractiveSummarizer` is imported eagerly; the rest load on first
use, so ``import convmem.llm`` works without the optional packages.

Example::

    from convmem import Memory
    from convmem.llm import OpenAICompatibleSummarizer

    memory = Memory("gpt-4o", strategy="summary_buffer",
                    summarizer=OpenAICompatibleSummarizer("gpt-4o-mini"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy
from .extractive import ExtractiveSummarizer

if TYPE_CHECKING:
    from .client import AsyncChatBackend, ChatBackend, Completion, OpenAIChat
    from .extractor import Extraction, OpenAICompatibleFactExtractor
    from .litellm import LiteLLMChat
    from .retry import RetryPolicy
    from .rewriter import OpenAICompatibleQueryRewriter
    from .summarizer import OpenAICompatibleSummarizer, Summary

__all__ = [
    "AsyncChatBackend",
    "ChatBackend",
    "Completion",
    "Extraction",
    "ExtractiveSummarizer",
    "LiteLLMChat",
    "OpenAIChat",
    "OpenAICompatibleFactExtractor",
    "OpenAICompatibleQueryRewriter",
    "OpenAICompatibleSummarizer",
    "RetryPolicy",
    "Summary",
]

_LAZY = {
    "AsyncChatBackend": "client",
    "ChatBackend": "client",
    "Completion": "client",
    "OpenAIChat": "client",
    "RetryPolicy": "retry",
    "Extraction": "extractor",
    "OpenAICompatibleFactExtractor": "extractor",
    "LiteLLMChat": "litellm",
    "OpenAICompatibleQueryRewriter": "rewriter",
    "OpenAICompatibleSummarizer": "summarizer",
    "Summary": "summarizer",
}


__getattr__ = lazy(__name__, _LAZY)
