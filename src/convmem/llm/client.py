"""A retrying chat-completions client for any OpenAI-compatible endpoint.

OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio and a LiteLLM proxy all
speak ``POST {base_url}/chat/completions``, so one client serves them all. It
is built on the official ``openai`` SDK (extra ``convmem[openai]``) with the
SDK's own retries switched off, because the policy here must be explicit and
testable:

* **Retries** on 408, 409, 429, every 5xx, connection errors and timeouts, up
  to ``RetryPolicy.max_retries`` times, with exponential backoff and jitter
  (the policy lives in :mod:`convmem.llm.retry`).
* **Retry-After** (seconds or an HTTP date, and OpenAI's ``retry-after-ms``)
  replaces the computed delay. A server asking for more than
  ``max_retry_after`` seconds gets no retry: blocking ``Memory.add`` for
  minutes is worse than archiving now and summarizing at the next eviction.
* **One conversion point**: every SDK, HTTP and decoding failure becomes an
  :class:`~convmem.errors.LLMError` in :meth:`_Calls.error`, naming the
  endpoint, the model and the HTTP status (``None`` when no response came).
  The API key is never part of the message, and provider text that echoes a
  (masked) key is redacted; the SDK exception is not chained, since its text
  may hold the key fragment.

The I/O-free part (:class:`_Calls`: request body, retry decision, reply
parsing, error conversion) is shared by the sync and async paths, which only
add the sleeping and the awaiting.

Example::

    chat = OpenAIChat.from_env(model="gpt-4o-mini")   # or base_url="http://localhost:11434/v1"
    completion = chat.complete([{"role": "user", "content": "Hi"}], max_tokens=50)
    completion.text, completion.usage
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._effects import Flow, adrive, drive
from ..errors import ConfigurationError, InvalidMessageError, LLMError, redact
from ..usage import ModelUsage, parse_usage
from .retry import RetryPolicy, is_connection_error, is_timeout, retry_after, retryable, root_cause, status_of

__all__ = [
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "AsyncChatBackend",
    "ChatBackend",
    "Completion",
    "OpenAIChat",
    "RetryPolicy",
]

ENV_BASE_URL = "CONVMEM_LLM_BASE_URL"
ENV_API_KEY = "CONVMEM_LLM_API_KEY"
ENV_MODEL = "CONVMEM_LLM_MODEL"
OPENAI_BASE_URL = "https://api.openai.com/v1"
PIP_HINT = "pip install 'convmem[openai]'"
# Provider messages sometimes echo the key they rejected, masked ("sk-ab****1234"); drop such tokens.


@dataclass(frozen=True, slots=True)
class Completion:
    """The text of one reply, with its usage and why it ended."""

    text: str
    usage: ModelUsage | None
    finish_reason: str | None = None


@runtime_checkable
class ChatBackend(Protocol):
    """What the summarizer and the extractor call: one chat completion, retried, errors as LLMError."""

    model: str
    endpoint: str

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion: ...


@runtime_checkable
class AsyncChatBackend(Protocol):
    """The async twin of :class:`ChatBackend`."""

    model: str
    endpoint: str

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion: ...


@dataclass(frozen=True, slots=True)
class Sleep:
    """A retry flow's wait before its next try."""

    seconds: float


@dataclass
class _Calls:
    """The I/O-free half of a client: request bodies, retry decisions, parsing, error conversion."""

    model: str
    endpoint: str
    api_key: str = field(repr=False)
    timeout: float
    retry: RetryPolicy
    rng: random.Random
    extra_body: Mapping[str, Any]

    def body(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int, response_format: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": 0,  # summaries and extractions should be as repeatable as the server allows
            **self.extra_body,
        }
        if response_format is not None:
            body["response_format"] = dict(response_format)
        return body

    def attempts(self, request: dict[str, Any]) -> Flow[dict[str, Any] | Sleep, Completion]:
        """Send ``request`` until it is answered or fails for good: yields the request for the caller to send
        (its failure thrown back in) and a :class:`Sleep` between tries; returns the parsed completion."""
        attempt = 0
        while True:
            failure: Exception | None = None
            try:
                raw = yield request
            except Exception as exc:  # converted (or retried) in one place: delay / error
                failure = exc
            if failure is None:
                return self.parse(raw)
            # Outside the except block: the LLMError it may raise chains no SDK exception (which may echo the key).
            yield Sleep(self.delay(attempt, failure))
            attempt += 1

    def delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait before retrying after ``exc``; raises the converted LLMError when it is final."""
        if not retryable(exc) or attempt >= self.retry.max_retries:
            raise self.error(exc, attempts=attempt + 1)
        after = retry_after(exc)
        if after is None:
            return self.retry.backoff(attempt, self.rng)
        if after > self.retry.max_retry_after:
            raise self.error(exc, attempts=attempt + 1, note=f"the server asked to retry after {after:g} s")
        return after

    def error(self, exc: BaseException, *, attempts: int = 1, note: str | None = None) -> LLMError:
        """The one place where SDK, HTTP and decoding failures become LLMError."""
        status = status_of(exc)
        if status is not None:
            what = f"HTTP {status}" + (f" {code}" if (code := _error_code(exc)) else "")
            reason = _provider_message(exc)
        elif is_timeout(exc):
            what, reason = "no HTTP status", f"timed out after {self.timeout:g} s"
        elif is_connection_error(exc):
            what, reason = "no HTTP status", f"cannot connect ({root_cause(exc)})"
        elif isinstance(exc, ValueError):  # the body was not JSON (json.JSONDecodeError) or not a completion
            what, reason = "HTTP 200", f"malformed response: {exc}"
        else:
            what, reason = "no HTTP status", f"{type(exc).__name__}: {exc}"
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        extra = f"; {note}" if note else ""
        message = f"{self.endpoint} (model {self.model!r}): {what}: {self.redact(reason)}{tries}{extra}"
        return LLMError(message, endpoint=self.endpoint, status=status)

    def redact(self, text: str) -> str:
        return redact(text, self.api_key)[:300]

    def parse(self, raw: Any) -> Completion:
        """The text, usage and finish reason of a reply; a reply that is not a chat completion raises LLMError."""
        choices = getattr(raw, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise self.error(ValueError(f"no choices in the reply ({_shape(raw)})"))
        choice = choices[0]
        content = getattr(getattr(choice, "message", None), "content", None)
        if content is not None and not isinstance(content, str):
            raise self.error(ValueError(f"message content is {type(content).__name__}, not text"))
        usage = None
        if getattr(raw, "usage", None) is not None:
            try:
                usage = ModelUsage(self.model, parse_usage(raw.usage))
            except InvalidMessageError:  # a server that reports usage oddly still gave a usable answer
                usage = None
        return Completion(content or "", usage, getattr(choice, "finish_reason", None))


class RetryingChat:
    """What every convmem chat client shares: one request body, the policy's retries as one flow (see
    :meth:`_Calls.attempts`), and the sync/async twins over it. A client gives ``_send`` and ``_asend``."""

    _calls: _Calls

    def _request(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int, response_format: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return self._calls.body(messages, max_tokens, response_format)

    def _send(self, request: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def _asend(self, request: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _perform(self, effect: dict[str, Any] | Sleep) -> Any:
        return time.sleep(effect.seconds) if isinstance(effect, Sleep) else self._send(effect)

    async def _aperform(self, effect: dict[str, Any] | Sleep) -> Any:
        return await asyncio.sleep(effect.seconds) if isinstance(effect, Sleep) else await self._asend(effect)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One completion, retried per the policy; raises LLMError."""
        return drive(self._calls.attempts(self._request(messages, max_tokens, response_format)), self._perform)

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """The async twin of :meth:`complete`."""
        flow = self._calls.attempts(self._request(messages, max_tokens, response_format))
        return await adrive(flow, self._aperform)


class OpenAIChat(RetryingChat):
    """A chat-completions client for one model at one OpenAI-compatible endpoint (sync and async).

    Args:
        model: the model name; default ``$CONVMEM_LLM_MODEL``.
        base_url: e.g. ``http://localhost:11434/v1``; default ``$CONVMEM_LLM_BASE_URL``, else OpenAI.
        api_key: default ``$CONVMEM_LLM_API_KEY``, else ``$OPENAI_API_KEY``; local servers need none.
        timeout: seconds for one attempt (connect, send and read).
        retry: the :class:`RetryPolicy`.
        seed: seeds the jitter, for reproducible tests.
        extra_body: more request fields, e.g. ``{"max_completion_tokens": ...}`` or provider options.

    Raises:
        ConfigurationError: no model, no key for the OpenAI API, or the ``openai`` extra is missing.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        _require_openai()
        model = model or os.environ.get(ENV_MODEL)
        if not model:
            raise ConfigurationError(f"no LLM model: pass model=... or set {ENV_MODEL}")
        base_url = (base_url or os.environ.get(ENV_BASE_URL) or OPENAI_BASE_URL).rstrip("/")
        api_key = api_key or os.environ.get(ENV_API_KEY) or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if base_url == OPENAI_BASE_URL:
                raise ConfigurationError(f"no API key for {OPENAI_BASE_URL}: pass api_key=... or set {ENV_API_KEY}")
            api_key = "unused"  # local servers (Ollama, vLLM, llama.cpp) ignore it, but the SDK needs one
        if timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, got {timeout!r}")
        self.model = model
        self.base_url = base_url
        self.endpoint = f"POST {redact(base_url, api_key)}/chat/completions"  # errors and reprs never hold it
        self._calls = _Calls(
            model, self.endpoint, api_key, timeout, retry or RetryPolicy(), random.Random(seed), dict(extra_body or {})
        )
        self._sync: Any = None
        self._async: Any = None

    @classmethod
    def from_env(cls, **options: Any) -> OpenAIChat:
        """Build from the ``CONVMEM_LLM_*`` variables, with ``options`` taking precedence."""
        return cls(**options)

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.model!r}, base_url={redact(self.base_url, self._calls.api_key)!r})"

    def _sdk(self, *, asynchronous: bool) -> Any:
        """The SDK client of that kind, made on first use (``max_retries=0``: the retries are the policy's)."""
        if (self._async if asynchronous else self._sync) is None:
            import openai

            kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
            made = kind(api_key=self._calls.api_key, base_url=self.base_url, timeout=self._calls.timeout, max_retries=0)
            if asynchronous:
                self._async = made
            else:
                self._sync = made
        return self._async if asynchronous else self._sync

    def _send(self, request: dict[str, Any]) -> Any:
        return self._sdk(asynchronous=False).chat.completions.create(**request)

    async def _asend(self, request: dict[str, Any]) -> Any:
        return await self._sdk(asynchronous=True).chat.completions.create(**request)

    def close(self) -> None:
        """Close the sync HTTP connections (the async ones need :meth:`aclose`)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        """Close both the async and the sync HTTP connections."""
        if self._async is not None:
            await self._async.close()
            self._async = None
        self.close()


def _require_openai() -> None:
    try:
        import openai  # noqa: F401
    except ImportError:
        raise ConfigurationError(f"the OpenAI-compatible LLM client needs the openai package: {PIP_HINT}") from None


def _body_error(exc: BaseException) -> Mapping[str, Any]:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        return inner if isinstance(inner, Mapping) else {"message": str(inner)}
    return {}


def _error_code(exc: BaseException) -> str | None:
    code = _body_error(exc).get("code")
    return str(code) if code else None


def _provider_message(exc: BaseException) -> str:
    message = _body_error(exc).get("message")
    if isinstance(message, str) and message:
        return message
    response = getattr(exc, "response", None)
    reason = getattr(response, "reason_phrase", None)
    return str(reason) if reason else "error"


def _shape(raw: Any) -> str:
    if isinstance(raw, str):
        return f"a text body: {raw[:60]!r}"
    dump = getattr(raw, "model_dump", None)
    try:
        keys = sorted(dump(exclude_none=True)) if callable(dump) else type(raw).__name__
    except Exception:  # pydantic may refuse odd extras; the type name is enough then
        keys = type(raw).__name__
    return f"got {json.dumps(keys) if isinstance(keys, list) else keys}"
