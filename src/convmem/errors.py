"""The one error hierarchy of convmem, and the one table of how each error travels over HTTP.

Every exception convmem raises on purpose derives from :class:`ConvmemError`.
Driver exceptions (sqlite3, psycopg, redis, openai, ...) are converted where
they enter the library, in one place per adapter::

    ConvmemError
     |- InvalidMessageError (ValueError)   names the field and the message index
     |- InvalidFactError (ValueError)      a fact (or an operation on one) is malformed
     |- InvalidIdError (ValueError)        a session or user id breaks the one rule every backend keeps
     |- TranscriptError                    a transcript file the CLI cannot replay, by file and line
     |- ContextOverflowError               the irreducible context does not fit
     |- UnknownModelError (KeyError)       suggests close model names
     |- ConfigurationError                 e.g. a missing extra
     |- BlockEditError (ValueError)        a working-block edit over its limit, or whose target is absent
     |- StoreError
     |   |- SessionNotFoundError (KeyError)
     |   |- AmbiguousSessionError          lists the matching ids
     |   |- SessionLostError               a session a writer was using vanished (reset server, deleted)
     |   |- DamagedSessionError            a stored session no add could have made (names the session)
     |   |- MissingDatabaseError           a read-only command pointed at a database that does not exist
     |   |- DecryptionError                encrypted data the keys given cannot open: a lost or wrong key, or altered
     |   `- ConflictError                  an optimistic check lost, or a message id holds other content
     |       `- StaleSessionError          another writer changed the session first: catch up, retry
     |- LLMError                           summarizer, extractor or embedder failed
     `- ServiceError                       the service refused a request itself (a key, a limit, a seq)

:data:`PROBLEMS` gives each class its HTTP status, problem ``type`` and title,
and the attributes that travel with it. ``convmem.server.problems`` reads it to
write an RFC 9457 problem document for an error, ``convmem.client`` reads it to
raise the same class with the same attributes from that document; a
:class:`ServiceError` carries its own status, type and title instead.

Example::

    try:
        memory.add({"role": "tool", "content": "42"})
    except InvalidMessageError as exc:
        print(exc.field, exc.index)   # "tool_call_id", None
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._redact import redact  # re-exported: the errors that carry URLs and replies use them

__all__ = [
    "PROBLEMS",
    "AmbiguousSessionError",
    "BlockEditError",
    "ConfigurationError",
    "ConflictError",
    "ContextOverflowError",
    "ConvmemError",
    "DamagedSessionError",
    "DecryptionError",
    "InvalidFactError",
    "InvalidIdError",
    "InvalidMessageError",
    "LLMError",
    "MissingDatabaseError",
    "Problem",
    "ServiceError",
    "SessionLostError",
    "SessionNotFoundError",
    "StaleSessionError",
    "StoreError",
    "TranscriptError",
    "UnknownModelError",
    "class_of",
    "problem_for",
    "redact",
    "unchained",
]


class ConvmemError(Exception):
    """Root of every error convmem raises on purpose.

    Attributes:
        message_ids: the ids of the messages of the call that failed, when ``convmem.Client`` raises it
            (sending them again with the same ids stores each once); empty otherwise.
    """

    message_ids: tuple[str, ...] = ()


class InvalidMessageError(ConvmemError, ValueError):
    """A message (or one of its parts) is malformed.

    Attributes:
        reason: what is wrong, without the location.
        field: the dotted path of the offending field, e.g. ``tool_calls[0].arguments``.
        index: the position of the message in the batch being added, if any.
    """

    def __init__(self, reason: str, *, field: str | None = None, index: int | None = None) -> None:
        self.reason = reason
        self.field = field
        self.index = index
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.index is not None:
            where.append(f"message {self.index}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.reason}" if where else self.reason

    def at(self, index: int) -> InvalidMessageError:
        """Return a copy of this error located at message ``index`` of a batch."""
        return InvalidMessageError(self.reason, field=self.field, index=index)

    def __str__(self) -> str:
        return self._render()


class InvalidFactError(ConvmemError, ValueError):
    """A fact, or an operation on one (add, update, invalidate), is malformed: the message names the field."""


class InvalidIdError(ConvmemError, ValueError):
    """A session or user id breaks the one rule every backend keeps (``convmem.limits.check_id``).

    The id itself is not repeated: it may be huge, or not printable.

    Attributes:
        field: which id, e.g. ``session_id`` or ``user_id``.
        reason: what is wrong with it, and the limit.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field} {reason}")


class TranscriptError(ConvmemError):
    """A transcript line the CLI cannot replay, located by file and 1-based line number.

    Attributes:
        path: the transcript's path, as text.
        line: the 1-based line number, or None when the whole file is at fault.
        reason: what is wrong with it.
    """

    def __init__(self, path: object, line: int | None, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        at = f", line {line}" if line is not None else ""
        super().__init__(f"{path}{at}: {reason}")


class ContextOverflowError(ConvmemError):
    """The irreducible part of the context (pinned + newest unit) exceeds the budget."""

    def __init__(self, reason: str, *, needed: int, budget: int) -> None:
        self.needed = needed
        self.budget = budget
        super().__init__(f"{reason} (needs {needed} tokens, budget {budget})")


class UnknownModelError(ConvmemError, KeyError):
    """The model name matches no registry entry."""

    def __init__(self, model: str, suggestions: Sequence[str] = ()) -> None:
        self.model = model
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(repr(s) for s in self.suggestions)}?" if suggestions else ""
        super().__init__(
            f"unknown model {model!r}{hint} "
            "(pass counter='calibrated' to count it with o200k_base calibrated on the usage you record)"
        )

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


class ConfigurationError(ConvmemError):
    """convmem was configured in a way that cannot work (e.g. a missing extra)."""


class BlockEditError(ConvmemError, ValueError):
    """A working-block edit was refused (over the block's token limit, or the text to replace is absent).

    The message is written for the agent that made the edit: it says what to do instead.
    """


class StoreError(ConvmemError):
    """A storage backend failed; the message names the backend and the location."""


class SessionNotFoundError(StoreError, KeyError):
    """No session has this id (or id prefix) for this user."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session not found: {session_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class AmbiguousSessionError(StoreError):
    """An id prefix matches more than one session."""

    def __init__(self, prefix: str, matches: Sequence[str]) -> None:
        self.prefix = prefix
        self.matches = tuple(matches)
        super().__init__(f"session prefix {prefix!r} is ambiguous; it matches: {', '.join(self.matches)}")


class SessionLostError(StoreError):
    """A session this writer was writing to no longer exists in the store; nothing was written.

    Raised instead of re-creating the session silently: a Redis restarted
    without persistence, an expired TTL, or a delete by another process.
    """


class DamagedSessionError(StoreError):
    """A stored session that no ``add`` could have made (a window that starts at a tool result, a result that
    answers no call): written around the library. Opening it is refused, naming the session; nothing is changed.
    """

    def __init__(self, session_id: str, reason: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r}: {reason}")


class MissingDatabaseError(StoreError):
    """A command that only reads was pointed at a database that does not exist (nothing was created)."""


class DecryptionError(StoreError):
    """Encrypted data that the key ring given cannot open: its key is lost or wrong, or the data was altered.

    Raised instead of returning anything: a row is either decrypted and authenticated or refused. The
    text names what was read (the kind, the user, the session or row) and why, never a key.
    """


class ConflictError(StoreError):
    """A write was refused because the store holds something else: a newer state, or other content under an id."""


class StaleSessionError(ConflictError):
    """Another writer appended to (or saved) the session after this writer last read it; nothing was written.

    ``Memory`` handles it itself: it catches up with the store and retries.
    """


class LLMError(ConvmemError):
    """A summarizer, fact extractor or embedder failed.

    Attributes:
        endpoint: the endpoint that failed (e.g. ``POST http://host/v1/chat/completions``), if any.
        status: the HTTP status, or None when no response came (connection error, timeout).
        usage: the usage of the calls that did complete before the failure (``convmem.usage.ModelUsage``
            items); they were billed, so the memory adds them to its stats.
    """

    def __init__(
        self, message: str, *, endpoint: str | None = None, status: int | None = None, usage: Sequence[Any] = ()
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        self.usage: tuple[Any, ...] = tuple(usage)
        super().__init__(message)


class ServiceError(ConvmemError):
    """The convmem service refused a request for a reason of its own, with the status and problem type it chose.

    A missing or revoked API key (401), a fact, block or key it does not have
    (404), a seq past the session's end or a malformed export (422), a body
    over the size limit (413), a request over the time limit (503). Errors of
    the library keep their own class over HTTP; this one is the service's.

    Attributes:
        status: the HTTP status.
        kind: the problem type's last segment, e.g. ``unauthorized``.
        title: the problem's title.
        detail: what went wrong (also the message).
        extra: the problem document's other members, e.g. ``errors`` for an invalid request.
    """

    def __init__(self, status: int, kind: str, title: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.kind, self.title, self.detail, self.extra = status, kind, title, detail, extra


# -- the error table -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Problem:
    """How the errors of one class travel over HTTP, as an RFC 9457 problem document.

    Attributes:
        status: the HTTP status.
        type: the last segment of the problem's ``type`` URI.
        title: the problem's title.
        fields: the attributes sent as members of the document (under the same names), and set again on
            the client.
        renamed: the member name of an attribute whose own name is one of the document's standard members.
        hidden: the detail sent instead of the error's own text, which may name a host, a path or a driver.
    """

    status: int
    type: str
    title: str
    fields: tuple[str, ...] = ()
    renamed: Mapping[str, str] = field(default_factory=dict)
    hidden: str | None = None

    def member(self, attribute: str) -> str:
        """The document member that carries ``attribute``."""
        return self.renamed.get(attribute, attribute)


PROBLEMS: Mapping[type[ConvmemError], Problem] = {
    ConvmemError: Problem(500, "internal", "Internal error"),
    InvalidMessageError: Problem(422, "invalid-message", "Invalid message", ("reason", "field", "index")),
    InvalidFactError: Problem(422, "invalid-fact", "Invalid fact"),
    InvalidIdError: Problem(422, "invalid-id", "Invalid id", ("field", "reason")),
    TranscriptError: Problem(422, "invalid-transcript", "Invalid transcript", ("path", "line", "reason")),
    ContextOverflowError: Problem(422, "context-overflow", "Context does not fit", ("needed", "budget")),
    UnknownModelError: Problem(422, "unknown-model", "Unknown model", ("model", "suggestions")),
    ConfigurationError: Problem(422, "invalid-options", "Invalid options"),
    BlockEditError: Problem(422, "block-edit", "Block edit refused"),
    StoreError: Problem(
        503, "store-unavailable", "Store unavailable", hidden="the store could not complete the request; retry later"
    ),
    SessionNotFoundError: Problem(404, "not-found", "Not found", ("session_id",)),
    AmbiguousSessionError: Problem(409, "ambiguous-session", "Ambiguous session id", ("prefix", "matches")),
    SessionLostError: Problem(409, "session-lost", "Session lost"),
    DamagedSessionError: Problem(409, "damaged-session", "Damaged session", ("session_id",)),
    MissingDatabaseError: Problem(404, "missing-database", "No such database", hidden="the database does not exist"),
    DecryptionError: Problem(
        500, "undecryptable", "Stored data cannot be decrypted", hidden="the stored data cannot be decrypted"
    ),
    ConflictError: Problem(409, "conflict", "Conflict"),
    StaleSessionError: Problem(409, "stale-session", "Another writer changed the session"),
    LLMError: Problem(
        502, "llm-failed", "Model call failed", ("endpoint", "status", "usage"), renamed={"status": "llm_status"}
    ),
}

_BY_TYPE = {problem.type: cls for cls, problem in PROBLEMS.items()}


def problem_for(error: ConvmemError) -> Problem:
    """The table's row for ``error``: its class's, or its nearest base's; a :class:`ServiceError`'s own."""
    if isinstance(error, ServiceError):
        return Problem(error.status, error.kind, error.title)
    return next(PROBLEMS[cls] for cls in type(error).__mro__ if cls in PROBLEMS)


def class_of(kind: str) -> type[ConvmemError] | None:
    """The class whose problem type is ``kind`` (the last segment of the URI), or None: a service's own."""
    return _BY_TYPE.get(kind)


# -- redaction (convmem/_redact.py: the one function every message, repr and log line passes through) --
F = TypeVar("F", bound=Callable[..., Any])


def unchained(fn: F) -> F:
    """Let the ConvmemErrors ``fn`` raises chain no exception: a driver's may hold a password (psycopg's does)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ConvmemError as error:
                error.__cause__ = error.__context__ = None
                raise

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConvmemError as error:
            error.__cause__ = error.__context__ = None
            raise

    return wrapper  # type: ignore[return-value]
