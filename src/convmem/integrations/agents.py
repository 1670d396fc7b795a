"""An OpenAI Agents SDK ``Session`` kept by convmem: the history stays within the budget, tool calls whole.

The SDK's own sessions (``SQLiteSession`` and the rest) hand the model every item
ever stored, so a long conversation outgrows the context window. This one stores
every item in a convmem memory and hands back the memory's budgeted context as
Responses items::

    Runner.run(agent, input, session=ConvmemSession(memory))
      get_items()      ->  memory.context(format="responses").messages   (fits the budget)
      add_items(items) ->  memory.add_many(the items it does not hold, parsed as one Responses batch)
      pop_item()       ->  the newest item of the context, deleted from the store
      clear_session()  ->  memory.clear(keep_system=False)               (archived, not deleted)

The memory is anything with its protocol (:mod:`convmem.memory.protocol`): ``Memory``,
``AsyncMemory``, ``Client`` or ``AsyncClient`` (``pop_item`` deletes from a store, so it
needs a memory in this process). The items the memory holds are known by a durable
identity (:mod:`convmem.integrations._identity`: a fingerprint chained to the message
before, read back from the memory), not by this object, so items the SDK saves again
(a retried run, a new session object or process over the same memory) are stored once.
Item ids are not used for it: the SDK gives items of chat-completions models one
placeholder id.

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
from ..memory import AsyncMemory, Memory
from ..session import LoadedSession
from . import missing
from ._bridge import AnyMemory, MemoryFlow, arun, detached, on
from ._identity import Ledger, read_ledger, sync

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
        self._ledger: Ledger | None = None  # what the memory holds, read from it on first use

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The budgeted context as Responses input items (the newest ``limit`` of them, if given)."""
        items = (await arun(self.memory, _context())).messages
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return cast(list[TResponseInputItem], detached(items))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items the memory does not hold, in one write; a bad item raises InvalidMessageError and
        nothing is stored."""
        # Parsed as one batch: the SDK hands parallel function_call items and their outputs together,
        # and only a batch parse makes the calls one assistant message.
        batch = parse_messages([_plain(item) for item in items], format="responses")
        await arun(self.memory, self._add(batch))

    def _add(self, batch: list[Any]) -> MemoryFlow[None]:
        if self._ledger is None:
            self._ledger = yield from read_ledger()
        yield from sync(batch, [None] * len(batch), self._ledger, history=False)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item of the context from the store and return it (None when there is none).

        The newest item is the last one its message renders to. When that message renders to
        several items (parallel calls, a reasoning item), the others are stored again as one
        message, so only the returned item is gone.
        """
        memory = self.memory
        if not isinstance(memory, (Memory, AsyncMemory)):
            raise ConfigurationError(
                f"pop_item deletes a message from the store, which a {type(memory).__name__} cannot reach; "
                "use a Memory or AsyncMemory in this process"
            )
        self._ledger = None  # what the memory holds changes under it: read it again on the next add
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
            await arun(memory, self._add(parse_messages(items[:-1], format="responses")))
        return cast(TResponseInputItem, items[-1])

    async def clear_session(self) -> None:
        """Empty the context; the items stay archived in the store (convmem never deletes history)."""
        await arun(self.memory, _clear())

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
        ctx = await arun(self.memory, _context(extra))
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


def _context(input: Any = None) -> MemoryFlow[Any]:
    return (yield on("context", input, format="responses"))


def _clear() -> MemoryFlow[None]:
    yield on("clear", keep_system=False)


async def _load(memory: Memory | AsyncMemory, *, unfolded: bool = False) -> LoadedSession:
    folds = unfolded and getattr(memory.strategy, "summarizer", None) is not None
    limit = _UNFOLDED_LIMIT if folds else 0
    if isinstance(memory, AsyncMemory):
        return await memory.store.load(memory.session_id, user_id=memory.user_id, unfolded_limit=limit)
    return memory.store.load(memory.session_id, user_id=memory.user_id, unfolded_limit=limit)


async def _delete(memory: Memory | AsyncMemory, seq: int) -> None:
    if isinstance(memory, AsyncMemory):
        await memory.store.delete_messages(memory.session_id, [seq], user_id=memory.user_id)
    else:
        memory.store.delete_messages(memory.session_id, [seq], user_id=memory.user_id)
