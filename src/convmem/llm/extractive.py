"""``ExtractiveSummarizer``: an offline, deterministic running summary (no LLM).

It is *extractive*: the summary is made of sentences copied from the evicted
messages, never of generated text, and its first line says so. It is what
``summary_buffer`` and ``compaction`` use when no summarizer is given.

How it chooses, within the token cap:

1. Candidates are the sentences of the newly evicted messages plus the lines
   of the previous summary (so the summary stays incremental: the whole history
   is never re-read). Each tool call and its result make *one* line: the tool,
   its arguments, and the result's first line -- or, when the result is an
   error (an ``ERROR``/``Traceback``/``FAILED`` line, a failed test run), that
   line. Code blocks and table rows inside a message are left out: they are
   data, and the line that introduces them says what they showed.
2. Each candidate is scored by centrality, as in LexRank's degree centrality:
   the sum of its TF-IDF cosine similarity to every other candidate, computed
   in O(n) as a dot product with the sum of all normalized vectors.
   Centrality alone favours generic chat ("that's so great"), so the score
   adds informativeness: the IDF mass of the sentence's distinct words per
   40 characters, which favours specific statements (on LoCoMo, centrality
   alone keeps fewer QA evidence turns than the lead-N baseline; see
   ``bench/README.md``).
3. Tool errors are kept first, then the user's requests (the sentences of
   user messages without a ``name``: in a chat with an assistant the user
   asks, while named speakers are peers), then the sentences that carry a
   number, a name (a capitalized word inside the sentence, not a greeting's
   vocative), or a decision, finding, goal or task cue ("decided", "root
   cause", "because", "fixed", "deadline", ...); the rest fill the remaining
   room. A sentence needs two content words to qualify by a number or a cue,
   four by a name alone. A tool line never qualifies by its numbers: an
   output's figures are data until a message states what they mean. Requests
   may take 25% of the room and errors 30% until every other line has had its
   turn, so findings always find room.
4. Selection is greedy with a redundancy penalty (maximal marginal relevance)
   so near-duplicates do not crowd out other content; the chosen lines are
   written in their original order, each prefixed with its speaker.

Everything is integer- and sort-stable, so the same input gives the same
summary (invariant 5). Costs are counted with the memory's own counter (the
memory binds it), so the cap is exact.

Example::

    summarizer = ExtractiveSummarizer()
    text = summarizer.summarize(None, evicted_messages, max_tokens=300)
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ..messages import Message
from ._render import split_to_fit

__all__ = ["HEADER", "ExtractiveSummarizer"]

HEADER = "[extractive summary: sentences copied from earlier messages, no LLM]"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ABBREVIATION = re.compile(r"(?:^|\s|\()(?:e\.g|i\.e|etc|vs|cf|approx|Mr|Mrs|Ms|Dr|St|No)\.$", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_NUMBER = re.compile(r"\d")
# Decision, goal and task cues. Words every chat is full of ("will", "want", "need") are left out on
# purpose: on LoCoMo they put most sentences in the must-keep tier, which then keeps greetings.
_CUES = re.compile(
    r"\b(?:decid\w*|decision|agreed|chose|chosen|plan(?:s|ned|ning)?|let's|must|deadline|todo|to-do|"
    r"remind\w*|book(?:ed|ing)|schedul\w*|promis\w*|confirm\w*|next step|going to|goal\w*|"
    r"root cause|caus(?:e|ed|es|ing)|because|due to|turns out|found|fix(?:ed|es)?|broke\w*|regression|"
    r"the (?:problem|issue|reason|culprit)|go with)\b",
    re.IGNORECASE,
)
# A tool result is an error when one of its lines says so; that line is what the summary keeps.
_ERROR_LINE = re.compile(
    r"^\s*(?:ERROR\b|Error:|error:|Traceback\b|Exception\b|FAILED\b|fatal:|panic:)"
    r"|\b[1-9]\d* (?:failed|errors?)\b|\b(?:permission denied|timed out|not found|does not exist)\b",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^```.*?(?:^```[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$", re.MULTILINE)
_TOOL, _TOOL_ERROR, _USER = "tool", "tool error", "user"
_TOOL_LINE_CHARS = 160
# The share of the summary that requests and tool errors may take before the other lines had their turn.
_SHARES = {_USER: 0.25, _TOOL_ERROR: 0.3}
_VOCATIVE = re.compile(r"^(?:hey|hi|hello|thanks|thank|wow|oh|yeah|bye|dear)\W*$", re.IGNORECASE)
# Content words a must-keep sentence needs: a number or a decision says a lot in two words ("booked
# TP123"), a name needs more, so a greeting ("Thanks, Mel!") is not kept for its name.
_MIN_CUED_TERMS = 2
_MIN_NAMED_TERMS = 4
_STOPWORDS = """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off
    on once only or other our ours ourselves out over own same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves also yeah yes oh ok okay really
    thanks thank hey hi hello well im i'm it's that's don't dont i've you're get got like just so much"""
_STOP = frozenset(_STOPWORDS.split())
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'll", "I'd", "OK", "Ok"})


@dataclass(slots=True)
class _Candidate:
    order: int  # previous-summary lines first (negative), then the new sentences in message order
    who: str
    text: str
    terms: Counter[str]
    keep_first: bool
    score: float = 0.0
    vector: dict[str, float] | None = None

    @property
    def line(self) -> str:
        return f"{self.who}: {self.text}" if self.who else self.text


class ExtractiveSummarizer:
    """An offline running summary that keeps the most salient sentences (see the module docstring).

    Args:
        count_text: the counter for the cap; the memory binds its own with :meth:`bind`.
            Until then a shared exact ``o200k_base`` counter is used.
        redundancy: how strongly similarity to already chosen lines lowers a candidate, in ``[0, 1]``.
        previous_weight: the factor on the scores of the previous summary's lines, so that newer
            statements (a changed budget, a new decision) win ties against what they supersede.
        max_sentence_chars: longer sentences (often a pasted blob) are clipped with an ellipsis.
        max_candidates: only this many best-ranked candidates enter the (quadratic) redundancy step.
        whole_messages: a message of at most this many characters is one candidate, kept or dropped
            whole, so a kept chat turn stays recognisable verbatim (0: always split into sentences).
    """

    label = "extractive: convmem.llm.ExtractiveSummarizer, salient sentences of earlier messages (no LLM)"

    def __init__(
        self,
        count_text: Callable[[str], int] | None = None,
        *,
        redundancy: float = 0.5,
        previous_weight: float = 0.8,
        max_sentence_chars: int = 400,
        max_candidates: int = 400,
        whole_messages: int = 0,
    ) -> None:
        self._count = count_text
        self.redundancy = redundancy
        self.previous_weight = previous_weight
        self.max_sentence_chars = max_sentence_chars
        self.max_candidates = max_candidates
        self.whole_messages = whole_messages

    def bind(self, count_text: Callable[[str], int]) -> None:
        """Count with the memory's own counter, so the cap is exact and the core never truncates."""
        self._count = count_text

    @property
    def count_text(self) -> Callable[[str], int]:
        if self._count is None:
            from ..tokens import counter_for

            self._count = counter_for("gpt-4o").count_text
        return self._count

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        """The new summary: the most salient of the previous lines and the new sentences, within ``max_tokens``."""
        candidates = self._previous(previous) + self._sentences(messages)
        _score(candidates)
        for c in candidates:
            if c.order < 0:
                c.score *= self.previous_weight
        return self._select(candidates, max_tokens)

    # -- candidates ----------------------------------------------------------------------------
    def _previous(self, previous: str | None) -> list[_Candidate]:
        lines = [line.strip() for line in (previous or "").splitlines()]
        lines = [line for line in lines if line and line != HEADER]
        out = []
        for i, line in enumerate(lines):
            who, sep, text = line.partition(": ")
            if not sep or len(who) > 40:  # not one of our lines (e.g. an LLM summary): keep it whole
                who, text = "", line
            out.append(self._candidate(i - len(lines), who, text))
        return out

    def _sentences(self, messages: Sequence[Message]) -> list[_Candidate]:
        calls: dict[str, str] = {}  # call id -> "name(arguments)", so a result's line says what produced it
        answered = {m.tool_call_id for m in messages if m.role == "tool"}
        out: list[_Candidate] = []
        for message in messages:
            who = message.name or message.role
            if message.role == "tool":
                label = calls.pop(message.tool_call_id or "", f"{message.name or 'tool'}({message.tool_call_id or ''})")
                error, line = _tool_line(message.text)
                text = f"{label} → {line}" if line else label
                out.append(self._candidate(len(out), _TOOL_ERROR if error else _TOOL, text))
                continue
            request = message.role == "user" and message.name is None
            prose = _prose(message.text).strip()
            whole = 0 < len(prose) <= self.whole_messages and not message.tool_calls
            for sentence in [re.sub(r"\s*\n\s*", " ", prose)] if whole else _split(prose):
                candidate = self._candidate(len(out), _USER if request else who, sentence)
                if candidate.terms:  # "Okay!" or "---" carries nothing to keep
                    out.append(candidate)
            for call in message.tool_calls:
                called = f"{call.name}({_clip(_compact(call.arguments), 80)})"
                if call.id in answered:
                    calls[call.id] = called
                else:  # its result is not among these messages
                    out.append(self._candidate(len(out), _TOOL, f"called {called}"))
        return out

    def _candidate(self, order: int, who: str, text: str) -> _Candidate:
        if len(text) > self.max_sentence_chars:
            text = text[: self.max_sentence_chars - 1].rstrip() + "…"
        terms = Counter(w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP)
        if who == _TOOL:
            keep = False  # an output's numbers and names are data, not findings
        elif who in (_TOOL_ERROR, _USER):
            keep = len(terms) >= _MIN_CUED_TERMS
        else:
            cued = bool(_NUMBER.search(text) or _CUES.search(text)) and len(terms) >= _MIN_CUED_TERMS
            keep = cued or (len(terms) >= _MIN_NAMED_TERMS and _has_name(text))
        return _Candidate(order, who, text, terms, keep)

    # -- selection -----------------------------------------------------------------------------
    def _select(self, candidates: list[_Candidate], max_tokens: int) -> str:
        count = self.count_text
        room = max_tokens - count(HEADER) - 1
        ranked = sorted(candidates, key=lambda c: (not c.keep_first, -c.score, c.order))[: self.max_candidates]
        chosen: list[_Candidate] = []
        seen: set[str] = set()
        closest = [0.0] * len(ranked)  # each candidate's similarity to the closest chosen line
        # First the kept-first lines, requests and errors only up to their share (but at least one line
        # each), so findings always get room; then what a share held back, and the rest, fill what is left.
        shares = {kind: int(room * share) for kind, share in _SHARES.items()}
        first = [i for i, c in enumerate(ranked) if c.keep_first]
        rest = [i for i, c in enumerate(ranked) if not c.keep_first]
        deferred: list[int] = []
        for alive, capped in ((first, True), (rest, False)):
            alive += deferred if not capped else []
            while alive and room > 0:
                best = min(alive, key=lambda i: (_tier(ranked[i]), closest[i] - ranked[i].score, ranked[i].order))
                alive.remove(best)
                pick = ranked[best]
                cost = count(pick.line) + 1
                if cost > room or pick.line in seen or closest[best] > 0.9:
                    continue
                share = shares.get(pick.who)
                if capped and share is not None:
                    if cost > share and any(c.who == pick.who for c in chosen):
                        deferred.append(best)
                        continue
                    shares[pick.who] = share - cost
                chosen.append(pick)
                seen.add(pick.line)
                room -= cost
                for i in (*first, *rest, *deferred):
                    similarity = _cosine(ranked[i], pick) * self.redundancy
                    closest[i] = max(closest[i], similarity)
        if not chosen and ranked and room > 1:  # not one whole sentence fits: keep the head of the best one
            head, _ = split_to_fit(count, ranked[0].line, room - 1)
            return f"{HEADER}\n{head.rstrip()}…"
        chosen.sort(key=lambda c: c.order)
        text = "\n".join([HEADER, *(c.line for c in chosen)])
        # Per-line counts can be off by a token at a join; drop the least salient lines until exact.
        while len(chosen) > 1 and count(text) > max_tokens:
            chosen.remove(max(chosen, key=lambda c: (not c.keep_first, -c.score, c.order)))
            text = "\n".join([HEADER, *(c.line for c in chosen)])
        return text if chosen else ""


def _tier(candidate: _Candidate) -> int:
    """Tool errors, then the user's requests, then the other kept-first lines, then the rest."""
    if not candidate.keep_first:
        return 3
    return 0 if candidate.who == _TOOL_ERROR else 1 if candidate.who == _USER else 2


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and table rows (data; the sentence before them says what they show)."""
    if "```" in text:
        text = _FENCE.sub("", text)
    if "|" in text:
        text = _TABLE_ROW.sub("", text)
    return text


def _tool_line(output: str) -> tuple[bool, str]:
    """Whether a tool result is an error, and its one line: the error line, else the first line."""
    output = output.strip()
    if not output:
        return False, ""
    error = _ERROR_LINE.search(output)
    lines = output.splitlines()
    if error is not None:
        start = output.rfind("\n", 0, error.start()) + 1
        end = output.find("\n", error.end())
        return True, _clip(" ".join(output[start : end if end >= 0 else None].split()), _TOOL_LINE_CHARS)
    head = _clip(" ".join(lines[0].split()), _TOOL_LINE_CHARS)
    more = sum(1 for line in lines[1:] if line.strip())
    return False, f"{head} (+{more} lines)" if more else head


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _split(text: str) -> list[str]:
    text = text.strip()
    if not text:
        return []
    if text[0] in "{[":
        leaves = _json_leaves(text)
        if leaves is not None:
            return leaves
    out: list[str] = []
    for piece in _SENTENCE.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if out and _ABBREVIATION.search(out[-1]):  # "e.g. orders" does not end a sentence
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def _json_leaves(text: str, limit: int = 200) -> list[str] | None:
    """``key: value`` lines for the leaves of a JSON document, or None if ``text`` is not JSON."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    out: list[str] = []

    def walk(node: object, path: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, f"{path}[{i}]")
        else:
            out.append(f"{path}: {json.dumps(node, ensure_ascii=False)}" if path else json.dumps(node))

    walk(value, "")
    return out


def _compact(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return arguments


def _has_name(text: str) -> bool:
    words = text.split()
    return any(
        word[:1].isupper() and word.strip(".,!?;:'\"") not in _NOT_NAMES and not _VOCATIVE.match(before)
        for before, word in pairwise(words)
    )


def _score(candidates: list[_Candidate]) -> None:
    """Salience: degree centrality (summed cosine similarity to all others, via the centroid) plus informativeness."""
    documents = len(candidates)
    df: Counter[str] = Counter()
    for c in candidates:
        df.update(c.terms.keys())
    centroid: dict[str, float] = {}
    for c in candidates:
        weights = {t: (1 + math.log(n)) * math.log(1 + documents / df[t]) for t, n in c.terms.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        c.vector = {t: w / norm for t, w in weights.items()}
        for t, w in c.vector.items():
            centroid[t] = centroid.get(t, 0.0) + w
    scale = max(1, documents - 1)
    for c in candidates:
        assert c.vector is not None
        own = sum(w * w for w in c.vector.values())  # a candidate's similarity to itself is not centrality
        centrality = (sum(w * centroid[t] for t, w in c.vector.items()) - own) / scale
        informativeness = sum(math.log(1 + documents / df[t]) for t in c.terms) / (len(c.text) / 40 + 1)
        # Weights from bench/extractive.py on LoCoMo: both terms matter, informativeness most.
        c.score = 5 * centrality + informativeness / 10


def _cosine(a: _Candidate, b: _Candidate) -> float:
    va, vb = a.vector or {}, b.vector or {}
    if len(va) > len(vb):
        va, vb = vb, va
    return sum(w * vb.get(t, 0.0) for t, w in va.items())
