"""convmem: memory for LLM conversations and agents.

convmem holds a conversation and answers one question on every turn: which
messages, summaries and recalled memories go into the next request, and
within what token budget. It counts every message once with the model's own
tokenizer, evicts whole units so a tool call is never split from its
results, archives what it evicts, and renders the context for OpenAI Chat
Completions, Anthropic Messages or the OpenAI Responses API.

Example::

    from convmem import Memory

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory.add({"role": "user", "content": "What is the capital of France?"})
    ctx = memory.context()
    ctx.request()       # {"messages": [...]}, within budget
    ctx.account         # tokens per part, and what was left out and why

Names are imported lazily, so ``import convmem`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy
from .errors import (
    AmbiguousSessionError,
    BlockEditError,
    ConfigurationError,
    ConflictError,
    ContextOverflowError,
    ConvmemError,
    InvalidMessageError,
    LLMError,
    SessionLostError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
    UnknownModelError,
)
from .messages import AudioPart, FilePart, ImagePart, Message, TextPart, ToolCall

if TYPE_CHECKING:
    from .client import AsyncClient, Client
    from .longterm.blocks.base import Block, CallableBlock, StaticBlock, WorkingBlock
    from .longterm.facts.block import FactsBlock
    from .longterm.facts.book import AsyncFacts, Facts
    from .longterm.recall.block import RecallBlock
    from .longterm.recall.index import RecallIndex
    from .memory import AsyncMemory, Memory
    from .policy.context import Context, LeftOut
    from .policy.repair import repair_messages
    from .policy.strategies import Compaction, SlidingWindow, Summarizer, SummaryBuffer, TokenBudget
    from .stores.memory import AsyncMemoryStore, MemoryStore
    from .tokens import TokenCounter, counter_for, lookup_model
    from .usage import Stats

__version__ = "0.1.0"

_LAZY = {
    "AsyncClient": "client",
    "Client": "client",
    "AsyncMemory": "memory",
    "Memory": "memory",
    "Stats": "usage",
    "Context": "policy.context",
    "LeftOut": "policy.context",
    "Compaction": "policy.strategies",
    "SlidingWindow": "policy.strategies",
    "Summarizer": "policy.strategies",
    "SummaryBuffer": "policy.strategies",
    "TokenBudget": "policy.strategies",
    "repair_messages": "policy.repair",
    "Block": "longterm.blocks",
    "CallableBlock": "longterm.blocks",
    "StaticBlock": "longterm.blocks",
    "WorkingBlock": "longterm.blocks",
    "FactsBlock": "longterm.facts.block",
    "RecallBlock": "longterm.recall.block",
    "AsyncFacts": "longterm.facts.book",
    "Facts": "longterm.facts.book",
    "RecallIndex": "longterm.recall.index",
    "AsyncMemoryStore": "stores.memory",
    "MemoryStore": "stores.memory",
    "TokenCounter": "tokens",
    "counter_for": "tokens",
    "lookup_model": "tokens",
}

__all__ = [
    "AmbiguousSessionError",
    "AsyncClient",
    "AsyncFacts",
    "AsyncMemory",
    "AsyncMemoryStore",
    "AudioPart",
    "Block",
    "BlockEditError",
    "CallableBlock",
    "Client",
    "Compaction",
    "ConfigurationError",
    "ConflictError",
    "Context",
    "ContextOverflowError",
    "ConvmemError",
    "Facts",
    "FactsBlock",
    "FilePart",
    "ImagePart",
    "InvalidMessageError",
    "LLMError",
    "LeftOut",
    "Memory",
    "MemoryStore",
    "Message",
    "RecallBlock",
    "RecallIndex",
    "SessionLostError",
    "SessionNotFoundError",
    "SlidingWindow",
    "StaleSessionError",
    "StaticBlock",
    "Stats",
    "StoreError",
    "Summarizer",
    "SummaryBuffer",
    "TextPart",
    "TokenBudget",
    "TokenCounter",
    "ToolCall",
    "UnknownModelError",
    "WorkingBlock",
    "__version__",
    "counter_for",
    "lookup_model",
    "repair_messages",
]


__getattr__ = lazy(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
