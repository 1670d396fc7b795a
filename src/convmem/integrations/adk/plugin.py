"""``ConvmemContextPlugin``: each model call's contents replaced by the session memory's context, within budget."""

from __future__ import annotations

from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin

from ._events import contents_of, signature, text_of, tools_of
from .sessions import ConvmemSessionService

__all__ = ["ConvmemContextPlugin"]


class ConvmemContextPlugin(BasePlugin):
    """Replaces each model call's contents with the session memory's context, within the exact budget.

    The agent's instruction and tools are counted as part of the request (the instruction as
    the context's input, the function declarations as its tools); convmem's system parts (the
    pinned messages, the blocks, the running summary) join the instruction. Contents of the
    request that are no session event's (``PreloadMemoryTool``'s memories, an instruction sent
    as user content) are counted too and kept where ADK placed them.

    Known limit: in a multi-agent app ADK shows one agent the others' events rewritten as user
    contents ("For context: [agent] said ..."); they match no stored event, so they are treated as
    transient and sent beside the memory's own copy of the same turns. It is tested with one agent.
    """

    def __init__(self, sessions: ConvmemSessionService, name: str = "convmem_context") -> None:
        super().__init__(name=name)
        self.sessions = sessions
        self.last_account: Any = None  # the account of the newest context (what it cost, part by part)

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        session = callback_context.session
        memory = self.sessions.memory(session)
        memory.refresh()  # another process may have stored events of this session since
        known = {signature(e.content) for e in session.events if e.content is not None}
        transient = [
            (index, content) for index, content in enumerate(llm_request.contents) if signature(content) not in known
        ]
        instruction = text_of(llm_request.config.system_instruction)
        extra = [{"role": "system", "content": instruction}] if instruction else []
        extra += [{"role": "user", "content": text_of(content)} for _, content in transient]
        ctx = memory.context(extra or None, format="openai", tools=tools_of(llm_request))
        self.last_account = ctx.account
        rendered = list(ctx.messages)[: len(ctx.messages) - len(extra)]
        system = [str(m.get("content") or "") for m in rendered if m["role"] in ("system", "developer")]
        contents = contents_of([m for m in rendered if m["role"] not in ("system", "developer")])
        for index, content in transient:  # the same distance from the end as ADK placed it
            after = len(llm_request.contents) - index - 1 - sum(1 for i, _ in transient if i > index)
            contents.insert(max(0, len(contents) - after), content)
        llm_request.contents = contents
        if system:
            llm_request.config.system_instruction = "\n\n".join([*system, instruction] if instruction else system)
        return None
