"""What ``Client`` and ``AsyncClient`` share: every request they make and every response they read, without I/O.

Each public method of the twins is three steps: build a :class:`Call` here,
send it (the only part that differs: ``client/__init__.py`` with httpx's
sync client, ``client/aio.py`` with its async one), read the answer here.
Messages are parsed and stamped on the client (id and one ``created_at`` per
batch, as ``Memory.add_many`` does) and sent in convmem's codec, so the server
stores exactly the ``Message`` the client returns, and a retried batch carries
the same ids. A call says whether it may be sent again (:mod:`convmem.client._retry`
decides when): reads, contexts and adds may, and so may a session's creation
(the client picks its id) and a reply's add (under an ``Idempotency-Key``).
A problem document comes back as the error it was written from: the error
table (``convmem.errors.PROBLEMS``) gives the class of its ``type`` and the
attributes it carries (:func:`error_from`), and the error names the ids of the
messages the call sent (``message_ids``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import PROBLEMS, ConfigurationError, ConvmemError, LLMError, ServiceError, StoreError, class_of
from ..formats import parse_items
from ..formats.openai import to_openai
from ..memory._intake import keyed_by_id
from ..messages import Message
from ..policy.context import Account, Context, LeftOut, Truncation
from ..stores.codec import decode_message, encode_message
from ..usage import ModelUsage, Stats, Usage
from ._retry import Retry

__all__ = ["Call", "ClientCore", "answer_of", "error_from", "httpx_module", "never_sent", "options_body"]

_OPTIONS = (
    "max_tokens",
    "max_output_tokens",
    "strategy",
    "strategy_options",
    "summary_max_tokens",
    "on_overflow",
    "format",
)


@dataclass(frozen=True, slots=True)
class Call:
    """One request, and what to do when it fails.

    Attributes:
        method, path, params, json: the request.
        retry: whether sending it again is safe (it is idempotent, or made so by ids or a key).
        headers: headers of its own (an ``Idempotency-Key``).
        ids: the ids of the messages it sends, named by the error it may raise.
        landed: when a repeated attempt gets this status, the first attempt did the work
            (a session created, a session deleted): the answer is then ``landed_call``'s (None: no body).
        landed_call: the call that reads what the first attempt made.
    """

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    retry: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    ids: tuple[str, ...] = ()
    landed: int | None = None
    landed_call: Call | None = None


def options_body(model: str | None, session_id: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``POST /v1/sessions`` body for ``Memory``-style options; objects (a summarizer, blocks) cannot travel."""
    unknown = sorted(set(options) - {*_OPTIONS, "title", "metadata"})
    if unknown:
        raise ConfigurationError(
            f"the service cannot take {', '.join(unknown)}: only {', '.join(_OPTIONS)}, title and metadata travel"
        )
    body = {k: v for k, v in options.items() if v is not None}
    if model is not None:
        body["model"] = model
    if session_id is not None:
        body["id"] = session_id
    return body


def httpx_module() -> Any:
    """httpx, imported when a client is made (it is part of the ``server`` extra)."""
    try:
        import httpx
    except ImportError:
        raise ConfigurationError("the convmem client needs httpx: pip install 'convmem[server]'") from None
    return httpx


def never_sent(exc: Exception) -> bool:
    """Whether an httpx failure happened before the request left (no connection, or none free)."""
    httpx = httpx_module()
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


def answer_of(response: Any, call: Call | None = None) -> Any:
    """What an httpx response says: its JSON, an export's bytes, None for 204; a problem raises its error."""
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = None
        error = error_from(response.status_code, problem if isinstance(problem, dict) else None)
        if call is not None:
            error.message_ids = call.ids
        raise error
    if response.status_code == 204:
        return None
    if response.headers.get("content-type", "").startswith("application/x-ndjson"):
        return response.content
    return response.json()


class ClientCore:
    """The I/O-free half of a client bound to one session."""

    def __init__(self, base_url: str, api_key: str, *, user_id: str | None, retry: Retry | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.user_id = user_id
        self.session_id = ""
        self.model: str | None = None
        self.retry = retry if retry is not None else Retry()
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "convmem-client"}

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.base_url!r}, session_id={self.session_id!r}, user_id={self.user_id!r})"

    def _params(self) -> dict[str, Any]:
        return {"user_id": self.user_id} if self.user_id is not None else {}

    def _session(self, suffix: str = "") -> str:
        return f"/v1/sessions/{self.session_id}{suffix}"

    # -- calls -------------------------------------------------------------------------------
    def create_call(self, model: str | None, session_id: str | None, options: Mapping[str, Any]) -> Call:
        """Create the session; an id the client makes up lets a repeated creation find the first one's."""
        chosen = session_id is not None
        body = options_body(model, session_id or uuid.uuid4().hex, options)
        found = Call("GET", f"/v1/sessions/{body['id']}", self._params(), retry=True)
        # A chosen id may be another session's already: a 409 then is the caller's to see, not a retry's.
        landed = None if chosen else 409
        return Call("POST", "/v1/sessions", self._params(), body, retry=True, landed=landed, landed_call=found)

    def get_call(self, *, prefix: bool = False) -> Call:
        """The session's details; ``prefix``: the id may be a unique prefix (binding, as ``open`` does)."""
        return Call("GET", self._session(), {**self._params(), **({"prefix": "true"} if prefix else {})}, retry=True)

    def add_call(self, messages: Iterable[Any]) -> tuple[Call, list[Message]]:
        now = datetime.now(timezone.utc)
        # Parsed as a batch, as Memory.add_many does: parallel Responses items join their assistant
        # message and an Anthropic message with several tool results expands.
        parsed = parse_items(list(messages))
        keyed = [m if m.id is not None else keyed_by_id(m) or m for m in parsed]  # a dict's id key, as Memory
        batch = [m.with_identity(m.id or uuid.uuid4().hex, m.created_at or now) for m in keyed]
        body = {"messages": [encode_message(m) for m in batch], "format": "convmem"}
        ids = tuple(m.id or "" for m in batch)
        return Call("POST", self._session("/messages"), self._params(), body, retry=True, ids=ids), batch

    def context_call(self, input: Any, format: str | None) -> Call:
        if isinstance(input, Message):
            input = to_openai(input)  # the input is not stored, so it travels as a provider dict
        elif isinstance(input, Sequence) and not isinstance(input, (str, Mapping)):
            input = [to_openai(m) if isinstance(m, Message) else dict(m) for m in input]
        body = {"input": input, "format": format}
        return Call("POST", self._session("/context"), self._params(), body, retry=True)

    def messages_call(self, status: Any, cursor: int) -> Call:
        params = self._params() | {"cursor": cursor, "limit": 1000}
        if status is not None:
            params["status"] = [status] if isinstance(status, str) else list(status)
        return Call("GET", self._session("/messages"), params, retry=True)

    def response_call(self, response: Any, format: str | None) -> Call:
        """A reply's add, under a key of its own: the service derives its messages' ids from it."""
        body = response.model_dump(exclude_none=True) if hasattr(response, "model_dump") else dict(response)
        key = {"Idempotency-Key": uuid.uuid4().hex}
        path = self._session("/responses")
        return Call("POST", path, self._params(), {"response": body, "format": format}, retry=True, headers=key)

    def usage_call(self, usage: Any) -> Call:
        body = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
        return self.simple_call("POST", "/usage", {"usage": body})

    def simple_call(self, method: str, suffix: str, body: Any = None, *, retry: bool = False) -> Call:
        return Call(method, self._session(suffix), self._params(), body, retry=retry)

    # -- sending -----------------------------------------------------------------------------
    def wait_after(
        self, call: Call, attempt: int, *, status: int | None, retry_after: str | None = None, sent: bool = True
    ) -> float | None:
        """Seconds before sending ``call`` again after attempt ``attempt`` failed; None: raise.

        Args:
            call: the call that failed.
            attempt: its attempt that failed (1 for the first).
            status: the answer's status; None for no answer at all (a timeout, a dropped connection).
            retry_after: the answer's ``Retry-After``.
            sent: False when no connection was made: then even a call that may not be repeated
                is sent again, since the service never saw it.
        """
        if not call.retry and sent:
            return None
        return self.retry.delay(attempt, status=status, retry_after=retry_after)

    def unreachable(self, exc: Exception, call: Call | None = None) -> StoreError:
        """The error for a request that got no answer (the service's address, never its key)."""
        error = StoreError(f"convmem service at {self.base_url} unreachable: {type(exc).__name__}")
        if call is not None:
            error.message_ids = call.ids
        return error

    # -- answers -----------------------------------------------------------------------------
    def bind(self, body: Mapping[str, Any]) -> None:
        self.session_id = body["id"]
        self.model = body.get("model")

    @staticmethod
    def messages_of(body: Mapping[str, Any]) -> list[Message]:
        return [decode_message(m) for m in body["messages"]]

    @staticmethod
    def page_of(body: Mapping[str, Any]) -> tuple[list[Message], int | None]:
        return [decode_message(item["message"]) for item in body["items"]], body["next_cursor"]

    @staticmethod
    def context_of(body: Mapping[str, Any]) -> Context:
        a = body["account"]
        account = Account(
            a["budget"],
            a["reserved_output"],
            a["pinned"],
            a["summary"],
            dict(a["blocks"]),
            a["window"],
            a["input"],
            a["overhead"],
            a["exact"],
            a["counter"],
            a.get("reused", 0),
            tuple(a.get("breakpoints", ())),
        )
        return Context(
            body["format"],
            body["messages"],
            body["system"],
            account,
            tuple(LeftOut(**item) for item in body["left_out"]),
            tuple(Truncation(**item) for item in body["truncated"]),
            tuple(body["window"]) if body["window"] is not None else None,
            tuple(body["warnings"]),
        )

    @staticmethod
    def stats_of(body: Mapping[str, Any]) -> Stats:
        stats = dict(body["stats"])
        stats["warnings"] = tuple(stats.get("warnings", ()))
        return Stats(**stats)

    @staticmethod
    def usage_of(body: Mapping[str, Any]) -> Usage:
        return Usage(body["input_tokens"], body["output_tokens"], body.get("cached_input_tokens", 0))


_STANDARD = frozenset({"type", "title", "status", "detail", "instance"})


def error_from(status: int, problem: Mapping[str, Any] | None) -> ConvmemError:
    """The ConvmemError a problem document stands for: the class the error table gives its type, rebuilt
    with the attributes the document carries, or the :class:`ServiceError` the service raised itself."""
    problem = problem if isinstance(problem, Mapping) else {}
    kind = str(problem.get("type", "")).rsplit("/", 1)[-1]
    detail = str(problem.get("detail") or f"HTTP {status}")
    cls = class_of(kind)
    if cls is not None:
        row = PROBLEMS[cls]
        # A document without the class's members is another's of the same type: the service's own
        # "not-found" for a fact or a block, say, which carries no session_id.
        if all(row.member(name) in problem for name in row.fields):
            values = {name: _decoded(cls, name, problem[row.member(name)]) for name in row.fields}
            return _rebuilt(cls, detail, values)
    extra = {key: value for key, value in problem.items() if key not in _STANDARD}
    title = str(problem.get("title") or f"HTTP {status}")
    return ServiceError(status, kind or "http", title, detail, **extra)


def _decoded(cls: type[ConvmemError], name: str, value: Any) -> Any:
    """An attribute as the error holds it: JSON lists back to tuples, an LLMError's usage back to ModelUsage."""
    if issubclass(cls, LLMError) and name == "usage":
        return tuple(ModelUsage(item["model"], Usage(**item["usage"])) for item in value)
    return tuple(value) if isinstance(value, list) else value


def _rebuilt(cls: type[ConvmemError], detail: str, values: Mapping[str, Any]) -> ConvmemError:
    """An instance of ``cls`` with the service's text and these attributes (its ``__init__`` would reword the text)."""
    error = cls.__new__(cls)
    Exception.__init__(error, detail)
    for name, value in values.items():
        setattr(error, name, value)
    return error
