"""An OpenAI Agents SDK ``Session`` kept by convmem: the history stays within the budget, tool calls whole.

The SDK's own sessions (``SQLiteSession`` and the rest) hand the model every item
ever stored, so a long conversation outgrows the context window. This one stores
every item in a :class:`~convmem.Memory` and hands back the memory's budgeted
context as Responses items::

    Runner.run(agent, input, session=ConvmemSession(memory))
      get_items()      ->  memory.context(format="responses").messages   (fits the budget)
      add_items(items) ->  memory.add_many(items parsed as one Responses batch)
      pop_item()       ->  the newest item of the context, deleted from the store
      clear_session()  ->  memory.clear(keep_system=False)               (archived, not deleted)

Within one ``Runner.run`` the SDK sends the model the history it read once plus the
items of the run so far, so a long tool loop still grows past the budget. Pass
:meth:`ConvmemSession.call_model_input_filter` as ``RunConfig(call_model_input_filter=...)``
and every model call is re-fitted: the SDK saves each step's items before the next
call, so the memory already holds what the call would send, and the agent's
instructions are counted in the budget as part of the request.

Example::

    from agents import Agent, RunConfig, Runner
    from convmem import AsyncMemory
    from convmem.integrations.agents import ConvmemSession

    session = ConvmemSession(AsyncMemory(model="gpt-4o", max_tokens=16_000, max_output_tokens=1_000))
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    result = await Runner.run(agent, "Hi!", session=session, run_config=config)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ..errors import ConfigurationError, SessionNotFoundError
from ..formats import parse_messages, render
from ..memory import AsyncMemory
from ..session import LoadedSession
from . import missing
from ._bridge import AnyMemory, aadd_many, aclear, acontext, detached

try:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("openai-agents", "agents") from exc

__all__ = ["ConvmemSession"]

_UNFOLDED_LIMIT = 10_000  # as Memory.open: a folding memory re-reads the archived rows a failed summary left


class ConvmemSession:
    """A ``Session`` (the SDK's protocol) over a :class:`~convmem.Memory` or :class:`~convmem.AsyncMemory`.

    Args:
        memory: holds the items; its budget, strategy and store apply. Its ``session_id`` is the session's.
        session_settings: the SDK's settings; a ``limit`` there keeps only the newest items of the context.
    """

    def __init__(self, memory: AnyMemory, *, session_settings: SessionSettings | None = None) -> None:
        self.memory = memory
        self.session_id = memory.session_id
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The budgeted context as Responses input items (the newest ``limit`` of them, if given)."""
        items = (await acontext(self.memory, format="responses")).messages
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return cast(list[TResponseInputItem], detached(items))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items in one write; a bad item raises InvalidMessageError and nothing is stored."""
        # Parsed as one batch: the SDK hands parallel function_call items and their outputs together,
        # and only a batch parse makes the calls one assistant message (Memory.add_many parses item by
        # item, so the second call would be refused while the first awaits its result). Issue 13 moves
        # this batch parse into add_many.
        await aadd_many(self.memory, parse_messages([_plain(item) for item in items], format="responses"))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item of the context from the store and return it (None when there is none).

        The newest item is the last one its message renders to. When that message renders to
        several items (parallel calls, a reasoning item), the others are stored again as one
        message, so only the returned item is gone.
        """
        memory = self.memory
        try:
            loaded = await _load(memory)
        except SessionNotFoundError:  # the store creates a session on its first message
            return None
        live = sorted([*loaded.pinned, *loaded.window], key=lambda stored: stored.seq)
        if not live:
            return None
        newest = live[-1]
        items = cast(list[dict[str, Any]], render([newest.message], "responses"))
        await _delete(memory, newest.seq)
        memory._restore(await _load(memory, unfolded=True))  # the window is rebuilt from the store, as on open
        if len(items) > 1:
            await aadd_many(memory, parse_messages(items[:-1], format="responses"))
        return cast(TResponseInputItem, items[-1])

    async def clear_session(self) -> None:
        """Empty the context; the items stay archived in the store (convmem never deletes history)."""
        await aclear(self.memory)

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Fit each model call of a run into the budget, the agent's instructions included.

        Use it as ``RunConfig(call_model_input_filter=session.call_model_input_filter)`` together with
        ``session=`` this session: it replaces the call's input with the memory's context.

        Raises:
            ConfigurationError: the call's newest item is not this memory's newest item (the filter is
                used without this session, or the SDK sends items it has not saved yet).
        """
        given = data.model_data
        instructions = given.instructions
        # The instructions travel in their own field, but they are part of the request: pass them as the
        # context's input (irreducible, counted) and take them off the rendered items again.
        extra = [{"role": "system", "content": instructions}] if instructions else None
        ctx = await acontext(self.memory, extra, format="responses")
        items = ctx.messages[:-1] if extra else ctx.messages
        if given.input and not ctx.truncated and (not items or dict(given.input[-1]) != items[-1]):
            raise ConfigurationError(
                "call_model_input_filter: the model input ends with an item this session has not stored; "
                "pass the same ConvmemSession as session= to Runner.run"
            )
        return ModelInputData(input=cast(list[TResponseInputItem], detached(items)), instructions=instructions)


def _plain(item: object) -> Mapping[str, Any]:
    """SDK items are dicts; a pydantic output item (from a custom runner) is dumped as the API would send it."""
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return cast(Mapping[str, Any], dump(exclude_unset=True, mode="json"))
    return cast(Mapping[str, Any], item)


async def _load(memory: AnyMemory, *, unfolded: bool = False) -> LoadedSession:
    folds = unfolded and getattr(memory.strategy, "summarizer", None) is not None
    limit = _UNFOLDED_LIMIT if folds else 0
    if isinstance(memory, AsyncMemory):
        return await memory.store.load(memory.session_id, user_id=memory.user_id, unfolded_limit=limit)
    return memory.store.load(memory.session_id, user_id=memory.user_id, unfolded_limit=limit)


async def _delete(memory: AnyMemory, seq: int) -> None:
    if isinstance(memory, AsyncMemory):
        await memory.store.delete_messages(memory.session_id, [seq], user_id=memory.user_id)
    else:
        memory.store.delete_messages(memory.session_id, [seq], user_id=memory.user_id)
