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

The root names what a user reaches for first, grouped below in that order:
the memory and its context; messages; strategies and limits; blocks, facts
and recall; stores; the client; the errors. Everything else is one package
down (``convmem.messages`` for message parts, ``convmem.tokens`` for counters
and the model registry, ``convmem.stores`` for every backend,
``convmem.errors`` for the whole error tree). Names are imported lazily, so
``import convmem`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy
from .errors import (
    BlockEditError,
    ConfigurationError,
    ConflictError,
    ContextOverflowError,
    ConvmemError,
    InvalidFactError,
    InvalidIdError,
    InvalidMessageError,
    LLMError,
    ServiceError,
    SessionLostError,
    SessionNotFoundError,
    StoreError,
    UnknownModelError,
)
from .messages import Message, ToolCall

if TYPE_CHECKING:
    from .client import Client
    from .client.aio import AsyncClient
    from .limits import Limits
    from .longterm.blocks.base import Block, CallableBlock, StaticBlock, WorkingBlock
    from .longterm.facts.block import FactsBlock
    from .longterm.facts.book import AsyncFacts, Facts
    from .longterm.recall.block import RecallBlock
    from .longterm.recall.index import RecallIndex
    from .memory import AsyncEvictionSink, AsyncMemory, EvictionSink, Memory
    from .policy.context import Context
    from .policy.strategies import Compaction, SlidingWindow, Strategy, SummaryBuffer, TokenBudget
    from .stores import open_store
    from .stores.base import Store

__version__ = "0.1.0"

# Messages (Message, ToolCall) and the errors are imported above: they are small, and every module needs them.
_LAZY = {
    # the memory and its context
    "Memory": "memory",
    "AsyncMemory": "memory",
    "EvictionSink": "memory",
    "AsyncEvictionSink": "memory",
    "Context": "policy.context",
    # strategies and limits
    "Strategy": "policy.strategies",
    "TokenBudget": "policy.strategies",
    "SlidingWindow": "policy.strategies",
    "SummaryBuffer": "policy.strategies",
    "Compaction": "policy.strategies",
    "Limits": "limits",
    # blocks, facts, recall
    "Block": "longterm.blocks",
    "StaticBlock": "longterm.blocks",
    "CallableBlock": "longterm.blocks",
    "WorkingBlock": "longterm.blocks",
    "Facts": "longterm.facts.book",
    "AsyncFacts": "longterm.facts.book",
    "FactsBlock": "longterm.facts.block",
    "RecallIndex": "longterm.recall.index",
    "RecallBlock": "longterm.recall.block",
    # stores
    "Store": "stores.base",
    "open_store": "stores",
    # the client
    "Client": "client",
    "AsyncClient": "client.aio",
}

__all__ = [
    "AsyncClient",
    "AsyncEvictionSink",
    "AsyncFacts",
    "AsyncMemory",
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
    "EvictionSink",
    "Facts",
    "FactsBlock",
    "InvalidFactError",
    "InvalidIdError",
    "InvalidMessageError",
    "LLMError",
    "Limits",
    "Memory",
    "Message",
    "RecallBlock",
    "RecallIndex",
    "ServiceError",
    "SessionLostError",
    "SessionNotFoundError",
    "SlidingWindow",
    "StaticBlock",
    "Store",
    "StoreError",
    "Strategy",
    "SummaryBuffer",
    "TokenBudget",
    "ToolCall",
    "UnknownModelError",
    "WorkingBlock",
    "__version__",
    "open_store",
]


__getattr__ = lazy(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
