"""When a client sends a request again, and after how long: a bounded, backed-off retry, without I/O.

What comes in: a :class:`~convmem.client._core.Call` and what its last attempt got
(a status and its ``Retry-After``, or no answer at all: a timeout, a dropped
connection). What happens: a call that is safe to repeat is retried on the
failures that say nothing about whether it happened (503, 502, 504, 429 and no
answer), at most ``attempts`` times in all, after ``base x 2^n`` seconds with
jitter, never longer than ``max_delay`` (a ``Retry-After`` the service sends is
honoured within that bound). What goes out: the delay before the next attempt,
or None to give up and raise.

Only calls that are idempotent are repeated: reads, a context, adds (whose
message ids the client stamps, so a repeated add is a retry the store
recognises and stores nothing), and the writes whose repetition changes
nothing. A call that is not idempotent is sent once: its failure is raised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import ConfigurationError

__all__ = ["RETRY_STATUSES", "Retry"]

#: Answers that say the service did not (or may not have) done the work: try again later.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Retry:
    """How a client retries.

    Attributes:
        attempts: how many times a call is sent at most (1: never retried).
        base: the first delay, in seconds; each next one doubles.
        max_delay: no wait is longer than this, a ``Retry-After`` included.
    """

    attempts: int = 4
    base: float = 0.25
    max_delay: float = 4.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base < 0 or self.max_delay < 0:
            raise ConfigurationError("Retry needs attempts >= 1 and delays of 0 seconds or more")

    def delay(self, attempt: int, *, status: int | None, retry_after: str | None = None) -> float | None:
        """The wait before sending again after attempt number ``attempt`` (1 for the first) failed.

        Args:
            attempt: the attempt that just failed.
            status: its HTTP status, or None when no answer came (timeout, dropped connection).
            retry_after: the answer's ``Retry-After`` header, if any.

        Returns:
            Seconds to wait, or None when the failure is final (not retryable, or no attempt left).
        """
        if attempt >= self.attempts or (status is not None and status not in RETRY_STATUSES):
            return None
        backoff: float = self.base * 2.0 ** (attempt - 1)
        wait: float = backoff / 2 + random.uniform(0, backoff / 2)  # jitter, not a secret
        given = _seconds(retry_after)
        if given is not None:
            wait = max(wait, given)
        return min(wait, self.max_delay)


def _seconds(retry_after: str | None) -> float | None:
    """A ``Retry-After`` in seconds (an HTTP date is not worth parsing for waits this short)."""
    if retry_after is None:
        return None
    try:
        value = float(retry_after)
    except ValueError:
        return None
    return value if value >= 0 else None
