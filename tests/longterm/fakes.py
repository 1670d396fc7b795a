"""Deterministic fact extractors for the long-term tests.

``RuleExtractor`` understands two sentence shapes, so tests can script a
conversation whose facts change over time:

* ``"remember <subject> = <value>"`` adds the fact ``"<subject> is <value>"``,
  or updates the open fact about ``<subject>`` if there is one;
* ``"forget <subject>"`` invalidates the open fact about ``<subject>``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from convmem import Message
from convmem.errors import LLMError
from convmem.longterm.facts.model import Fact, FactAdd, FactInvalidate, FactOperation, FactUpdate

_REMEMBER = re.compile(r"remember (\w+) = (.+)")
_FORGET = re.compile(r"forget (\w+)")


class RuleExtractor:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []

    def extract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> list[FactOperation]:
        self.calls.append(([m.id or "" for m in messages], [f.id for f in facts]))
        by_subject = {f.subject: f for f in facts}
        ops: list[FactOperation] = []
        for message in messages:
            text, source = message.text, (message.id or "",)
            if m := _REMEMBER.search(text):
                subject, value = m.group(1), m.group(2).strip()
                old = by_subject.get(subject)
                if old is None:
                    ops.append(FactAdd(f"{subject} is {value}", source, subject))
                else:
                    ops.append(FactUpdate(old.id, f"{subject} is {value}", source, subject))
            elif m := _FORGET.search(text):
                old = by_subject.get(m.group(1))
                if old is not None:
                    ops.append(FactInvalidate(old.id, "user asked to forget", source))
        return ops


class AsyncRuleExtractor(RuleExtractor):
    async def aextract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> list[FactOperation]:
        return self.extract(messages, facts, user_id=user_id)


class FailingExtractor:
    def __init__(self, exc: Exception | None = None) -> None:
        self.exc = exc or LLMError("HTTP 500 from the extraction model")

    def extract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> list[FactOperation]:
        raise self.exc


class HallucinatingExtractor:
    """Names a fact id that does not exist, next to a valid add."""

    def extract(
        self, messages: Sequence[Message], facts: Sequence[Fact], *, user_id: str | None = None
    ) -> list[FactOperation]:
        return [FactInvalidate("no-such-fact", "made up"), FactAdd("sky is blue", ("m",), "sky")]
