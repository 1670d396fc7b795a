"""Drop-in memory for the agent frameworks people already use.

Each module translates one framework's memory interface into calls on a memory of the
one protocol (:mod:`convmem.memory.protocol`: ``Memory``, ``AsyncMemory``, ``Client`` or
``AsyncClient``) and back; none holds policy of its own (the budget, eviction, summaries
and tool-call safety are the memory's)::

    framework history in  ->  the messages the memory does not hold -> memory.add_many(...)
                              (known by a durable identity, _identity.py: stored once, however
                              often a restart, a checkpointer or a retry hands them again)
    framework asks        ->  memory.context(...)       within the exact budget, tool calls whole
    context out           ->  the framework's own message or item types

Modules, and the extra each needs:

* ``integrations.agents``: ``ConvmemSession``, an OpenAI Agents SDK ``Session`` (``convmem[agents]``).
* ``integrations.langchain``: ``ConvmemChatMessageHistory`` and the LangGraph
  ``budgeted_messages_hook`` (``convmem[langchain]``).
* ``integrations.langgraph_store``: ``ConvmemStore``, a LangGraph ``BaseStore`` whose items are the
  user's convmem facts (``convmem[langchain]``).
* ``integrations.langgraph_checkpoint``: ``ConvmemSaver``, a LangGraph ``BaseCheckpointSaver`` keeping thread
  state in a convmem SQLite, PostgreSQL or Redis store (``convmem[langchain]``, and the store's own extra).
* ``integrations.llamaindex``: ``ConvmemMemory``, a LlamaIndex ``BaseMemory`` (``convmem[llamaindex]``).
* ``integrations.pydantic_ai``: ``ConvmemHistory``, a Pydantic AI capability and history processor
  (``convmem[pydantic-ai]``).
* ``integrations.agent_framework``: ``ConvmemHistoryProvider`` and ``ConvmemContextProvider``, Microsoft Agent
  Framework's history provider and a context provider of the user's long-term memory (``convmem[agent-framework]``).
* ``integrations.adk``: ``ConvmemSessionService``, ``ConvmemMemoryService`` and ``ConvmemContextPlugin``,
  Google ADK's session and memory services over a convmem store (``convmem[adk]``).

A module imports its framework when it is imported itself (never on ``import convmem``);
a missing framework raises :class:`~convmem.errors.ConfigurationError` naming the exact
``pip install`` command. The MCP server is :mod:`convmem.mcp`.
"""

from __future__ import annotations

from ..errors import ConfigurationError

__all__ = ["missing"]


def missing(package: str, extra: str) -> ConfigurationError:
    """The error an integration raises when its framework is not installed (raise it ``from`` the ImportError)."""
    return ConfigurationError(
        f"this integration needs {package!r}, which is not installed: pip install 'convmem[{extra}]'"
    )
