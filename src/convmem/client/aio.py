"""``AsyncClient``: ``AsyncMemory`` served by a convmem service, the async twin of ``convmem.client.Client``.

``await AsyncClient.create(base_url, api_key=..., model=..., **options)``
creates a session with ``Memory``'s options; ``await AsyncClient.open(session_id,
...)`` binds to a stored one. Every request, every answer and every retry
decision is the sync client's (:mod:`convmem.client._core`, :mod:`convmem.client._longterm`);
only the sending (and the wait between attempts) is awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from ..longterm.recall.hits import RecallHit
from ..messages import Message
from ..policy.context import Context
from ..session import SessionInfo
from ..usage import Stats, Usage
from ._core import Call, ClientCore, answer_of, httpx_module, never_sent
from ._longterm import delete_call, hits_of, import_call, recall_call, session_of, sessions_call
from ._retry import Retry
from .longterm import AsyncClientBlocks, AsyncClientFacts

__all__ = ["AsyncClient"]


class AsyncClient(ClientCore):
    """The async twin of :class:`~convmem.client.Client` (``await AsyncClient.create(...)`` or ``.open(...)``)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        user_id: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
    ) -> None:
        super().__init__(base_url, api_key, user_id=user_id, retry=retry)
        self._http = httpx_module().AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout)
        self._timeout = timeout
        self.facts = AsyncClientFacts(self._send, self._params)
        self.blocks = AsyncClientBlocks(self._send, self._params, user_id)

    @classmethod
    async def create(
        cls,
        base_url: str,
        *,
        api_key: str,
        model: str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
        **options: Any,
    ) -> AsyncClient:
        """A client on a new session made with ``Memory``'s options."""
        client = cls(base_url, api_key=api_key, user_id=user_id, timeout=timeout, retry=retry)
        try:
            client.bind(await client._send(client.create_call(model, session_id, options)))
        except BaseException:
            await client.aclose()
            raise
        return client

    @classmethod
    async def open(
        cls,
        session_id: str,
        *,
        base_url: str,
        api_key: str,
        user_id: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
    ) -> AsyncClient:
        """Bind to a stored session (a unique id prefix is enough)."""
        client = cls(base_url, api_key=api_key, user_id=user_id, timeout=timeout, retry=retry)
        client.session_id = session_id
        try:
            client.bind(await client._send(client.get_call(prefix=True)))
        except BaseException:
            await client.aclose()
            raise
        return client

    async def _send(self, call: Call) -> Any:
        """See ``Client._send``."""
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self._http.request
                response = await request(
                    call.method, call.path, params=call.params, json=call.json, headers=call.headers
                )
            except httpx_module().HTTPError as exc:
                wait = self.wait_after(call, attempt, status=None, sent=not never_sent(exc))
                if wait is None:
                    raise self.unreachable(exc, call) from None
                await asyncio.sleep(wait)
                continue
            if attempt > 1 and call.landed is not None and response.status_code == call.landed:
                return await self._send(call.landed_call) if call.landed_call is not None else None
            if response.status_code >= 400:
                wait = self.wait_after(
                    call, attempt, status=response.status_code, retry_after=response.headers.get("retry-after")
                )
                if wait is not None:
                    await asyncio.sleep(wait)
                    continue
            return answer_of(response, call)

    # -- the session (AsyncMemory's API) -----------------------------------------------------
    async def add(self, message: Any) -> Message:
        return (await self.add_many([message]))[0]

    async def add_many(self, messages: Iterable[Any]) -> list[Message]:
        call, batch = self.add_call(messages)
        if not batch:
            return []
        await self._send(call)
        return batch

    async def add_response(self, response: Any, *, format: str | None = None) -> list[Message]:
        return self.messages_of(await self._send(self.response_call(response, format)))

    async def context(self, input: Any = None, *, format: str | None = None) -> Context:
        return self.context_of(await self._send(self.context_call(input, format)))

    async def messages(self, status: Any = None) -> list[Message]:
        out: list[Message] = []
        cursor: int | None = 0
        while cursor is not None:
            page, cursor = self.page_of(await self._send(self.messages_call(status, cursor)))
            out.extend(page)
        return out

    async def refresh(self) -> None:
        """Nothing to catch up with: the service reads the session anew for every call."""

    async def clear(self, *, keep_system: bool = True) -> None:
        await self._send(self.simple_call("POST", "/clear", {"keep_system": keep_system}, retry=True))

    async def rollback_incomplete(self) -> list[Message]:
        return self.messages_of(await self._send(self.simple_call("POST", "/rollback")))

    async def repair(self) -> list[Message]:
        return self.messages_of(await self._send(self.simple_call("POST", "/repair")))

    async def record_usage(self, usage: Any) -> Usage:
        return self.usage_of(await self._send(self.usage_call(usage)))

    async def stats(self) -> Stats:
        return self.stats_of(await self._send(self.get_call()))

    # -- the user's sessions -----------------------------------------------------------------
    async def list_sessions(self, *, limit: int = 50) -> list[SessionInfo]:
        return [session_of(s) for s in (await self._send(sessions_call(self._params(), limit, None)))["items"]]

    async def search_sessions(self, query: str, *, limit: int = 50) -> list[SessionInfo]:
        return [session_of(s) for s in (await self._send(sessions_call(self._params(), limit, query)))["items"]]

    async def fork(self, at_seq: int) -> AsyncClient:
        body = await self._send(self.simple_call("POST", "/fork", {"at_seq": at_seq}))
        return await self._other(body["id"])

    async def export(self) -> bytes:
        return bytes(await self._send(self.simple_call("GET", "/export", retry=True)))

    async def import_session(self, data: bytes | str, *, session_id: str | None = None) -> AsyncClient:
        body = await self._send(import_call(self._params(), data, session_id))
        return await self._other(body["id"])

    async def delete(self) -> None:
        await self._send(delete_call(self._params(), self.session_id))

    async def _other(self, session_id: str) -> AsyncClient:
        key = self._headers["Authorization"][7:]
        return await AsyncClient.open(
            session_id,
            base_url=self.base_url,
            api_key=key,
            user_id=self.user_id,
            timeout=self._timeout,
            retry=self.retry,
        )

    # -- the user's recall -------------------------------------------------------------------
    async def recall(
        self, query: str, *, k: int = 10, mode: str | None = None, session_id: str | None = None
    ) -> list[RecallHit]:
        return hits_of(await self._send(recall_call(self._params(), query, k, mode, session_id)), self.user_id)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
