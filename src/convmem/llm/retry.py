"""When a failed LLM call is retried, and how long to wait: the policy, free of I/O.

* :class:`RetryPolicy` -- exponential backoff with jitter: retry ``n`` waits
  ``min(maximum, initial * multiplier**n)``, of which the last ``jitter``
  fraction is random, so clients that failed together do not retry together.
* :func:`retryable` -- 408, 409, 429, every 5xx, connection errors and
  timeouts are worth retrying; other statuses (400, 401, 403, 404, 422) and
  malformed replies are not: they would fail the same way again.
* :func:`retry_after` -- the server's own delay: ``retry-after-ms`` (OpenAI),
  ``Retry-After`` in seconds or as an HTTP date.

The helpers read exceptions by duck typing (``status_code``, ``response``),
so they serve the OpenAI SDK and LiteLLM alike without importing either.

Example::

    policy = RetryPolicy(max_retries=3, initial=0.2)
    if retryable(exc) and attempt < policy.max_retries:
        time.sleep(retry_after(exc) or policy.backoff(attempt, rng))
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass

from ..errors import ConfigurationError

__all__ = ["RetryPolicy", "is_connection_error", "is_timeout", "retry_after", "retryable", "root_cause", "status_of"]

_RETRY_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed call.

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        initial: the first backoff delay, in seconds.
        multiplier: growth of the delay per attempt.
        maximum: the largest computed delay.
        jitter: the fraction of each delay drawn at random, in ``[0, 1]``.
        max_retry_after: the longest ``Retry-After`` honoured; a longer one fails the call at once.
    """

    max_retries: int = 4
    initial: float = 0.5
    multiplier: float = 2.0
    maximum: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.initial < 0 or self.maximum < 0 or self.max_retry_after < 0:
            raise ConfigurationError("retry delays and counts must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigurationError(f"jitter must be in [0, 1], got {self.jitter!r}")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """The delay before retry number ``attempt + 1`` when the server gave no Retry-After."""
        base = min(self.maximum, self.initial * self.multiplier**attempt)
        return base * (1.0 - self.jitter) + base * self.jitter * rng.random()


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_timeout(exc: BaseException) -> bool:
    return type(exc).__name__ in ("APITimeoutError", "Timeout") or isinstance(exc, TimeoutError)


def is_connection_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"APIConnectionError", "APITimeoutError", "ServiceUnavailableError"}) or isinstance(
        exc, (ConnectionError, TimeoutError)
    )


def root_cause(exc: BaseException) -> str:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    return str(seen) or type(seen).__name__


def retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is worth retrying: 408, 409, 429, 5xx, connection errors and timeouts."""
    status = status_of(exc)
    return is_connection_error(exc) or status in _RETRY_STATUSES or (status is not None and status >= 500)
