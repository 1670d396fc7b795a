"""Tool-call ids as each provider takes them: unique in a request, in its characters and length, reversibly.

What comes in: the ids of a conversation's tool calls, as their makers spelled them. Local servers number
calls per turn (``call_0`` in every turn), OpenAI-compatible ones emit ``functions.get_weather:0``, agents
make ids longer than 64 characters. What the providers take: Anthropic, ``^[a-zA-Z0-9_-]+$`` and no id twice
in a request; Responses, a ``call_id`` of at most 64 characters, no id twice. What happens: an id a provider
takes is sent as it is; any other becomes one of three spellings, each starting ``cmx`` (and an id that
itself looks like one is spelled too, so that nothing is ambiguous):

* ``cmx_`` + an escape of the id: ``_`` + two hex digits for each byte that is not a letter, digit or ``-``;
* ``cmx<k>_`` + that escape: the ``k``-th call (k >= 2) of one request with this id;
* ``cmxh_`` (``cmxh<k>_``) + the first 40 hex digits of the id's SHA-256: an id whose spelling is too long.

:func:`original_id` inverts the first two exactly; the third is one way, and :class:`SentIds` keeps its
inverse for the request it spells (a reply never echoes an old id: only the application's own records
would hold it). What goes out: the id each call and result is sent with::

    to_anthropic_id("functions.get_weather:0")  # 'cmx_functions_2eget_5fweather_3a0'
    original_id("cmx2_call_5f0")                 # 'call_0' (its second call in the request)
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

__all__ = ["RULES", "IdRule", "SentIds", "from_anthropic_id", "original_id", "to_anthropic_id"]

_PLAIN = re.compile(r"[a-zA-Z0-9-]")
_OURS = re.compile(r"cmx(h?)([0-9]*)_(.*)", re.DOTALL)
_ESCAPE = re.compile(r"(?:[a-zA-Z0-9-]|_[0-9a-f]{2})+")


@dataclass(frozen=True, slots=True)
class IdRule:
    """What a provider takes as a tool-call id: a character pattern (None: any), a length (None: any)."""

    pattern: re.Pattern[str] | None = None
    max_length: int | None = None

    def takes(self, call_id: str) -> bool:
        return (self.pattern is None or bool(self.pattern.fullmatch(call_id))) and (
            self.max_length is None or len(call_id) <= self.max_length
        )


#: Each format's rule; Chat Completions sends ids as they are (its servers take what they emitted).
RULES: dict[str, IdRule] = {
    "anthropic": IdRule(re.compile(r"[a-zA-Z0-9_-]+")),
    "responses": IdRule(None, 64),
}


def _escape(call_id: str) -> str:
    out = []
    for char in call_id:
        if _PLAIN.fullmatch(char):
            out.append(char)
        else:
            out += [f"_{byte:02x}" for byte in char.encode("utf-8")]
    return "".join(out)


def _unescape(body: str) -> str | None:
    if not _ESCAPE.fullmatch(body):
        return None
    raw = bytearray()
    i = 0
    while i < len(body):
        if body[i] == "_":
            raw.append(int(body[i + 1 : i + 3], 16))
            i += 3
        else:
            raw += body[i].encode()
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def spell(call_id: str, rule: IdRule, occurrence: int = 1) -> str:
    """The id sent for the ``occurrence``-th call with ``call_id`` in a request, under ``rule``."""
    if occurrence == 1 and rule.takes(call_id) and not _OURS.fullmatch(call_id):
        return call_id
    k = "" if occurrence == 1 else str(occurrence)
    escaped = f"cmx{k}_{_escape(call_id)}"
    if rule.takes(escaped):
        return escaped
    return f"cmxh{k}_{hashlib.sha256(call_id.encode('utf-8')).hexdigest()[:40]}"


def original_id(sent: str) -> str:
    """The id :func:`spell` was given for ``sent`` (an id it did not spell, or a hashed one, comes back as it is)."""
    match = _OURS.fullmatch(sent)
    if match is None or match.group(1) or match.group(2) in ("0", "1") or match.group(2).startswith("0"):
        return sent
    decoded = _unescape(match.group(3))
    if decoded is None:
        return sent
    occurrence = int(match.group(2) or 1)
    # Only a spelling spell() gives is ours (any rule it would use); else the id merely looks escaped.
    return decoded if any(spell(decoded, r, occurrence) == sent for r in (*RULES.values(), IdRule())) else sent


def to_anthropic_id(call_id: str) -> str:
    """``call_id`` as Anthropic takes it (the first call of a request with this id)."""
    return spell(call_id, RULES["anthropic"])


def from_anthropic_id(call_id: str) -> str:
    """The id :func:`to_anthropic_id` was given (other ids come back unchanged)."""
    return original_id(call_id)


@dataclass
class SentIds:
    """The ids one request sends, for one provider's rule: each call's, and its results' (the latest call's).

    Walk the conversation in order: :meth:`call` for each call, :meth:`result` for each result.
    ``originals`` maps every id spelled differently back to the one it stands for.
    """

    rule: IdRule
    uses: dict[str, int] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    originals: dict[str, str] = field(default_factory=dict)

    def call(self, call_id: str) -> str:
        occurrence = self.uses.get(call_id, 0) + 1
        self.uses[call_id] = occurrence
        sent = spell(call_id, self.rule, occurrence)
        self.latest[call_id] = sent
        if sent != call_id:
            self.originals[sent] = call_id
        return sent

    def result(self, call_id: str) -> str:
        """The id a result of ``call_id`` is sent with: its call's (a result without a call: spelled alone)."""
        return self.latest.get(call_id) or spell(call_id, self.rule)
