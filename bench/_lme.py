"""The LongMemEval-S dev slice for the benchmarks: where it is, its haystacks as messages, evidence labels, archiving.

The data is read in place and never copied: ``$CONVMEM_LME_DIR`` if set, else the first
``shared/data/longmemeval/lme_s_dev.json.gz`` found above this folder (its ``SOURCE.txt`` describes it:
120 of LongMemEval-S's 500 questions, MIT-licensed; the other 380 stay held out).

Each question has its own haystack (~48 sessions, ~490 turns, user and assistant), so each question is
its own user here: one ``Memory`` per haystack session under the question's user, one ``add_many`` per
session, a sliding window of one message, then ``clear()`` (as ``bench/_locomo.py`` archives LoCoMo).
A turn is named ``"<session id>:<turn index>"``; the evidence turns are those labelled ``has_answer``.
Dates are LongMemEval's own ``"2023/05/20 (Sat) 02:21"``; a turn is said at its session's date plus one
second per turn, and the question is asked at ``question_date`` ("now").
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from convmem import Memory, Message
from convmem.longterm.recall.index import RecallIndex

FILE = "lme_s_dev.json.gz"


def lme_path() -> Path:
    """The dev slice's file (it may not exist: callers check)."""
    root = os.environ.get("CONVMEM_LME_DIR")
    if root:
        return Path(root) / FILE
    here = Path(__file__).resolve().parent
    for parent in here.parents:
        candidate = parent / "shared" / "data" / "longmemeval" / FILE
        if candidate.exists():
            return candidate
    return here.parents[1] / "shared" / "data" / "longmemeval" / FILE


LME = lme_path()


def load() -> list[dict[str, Any]]:
    with gzip.open(LME, "rt") as handle:
        data: list[dict[str, Any]] = json.load(handle)
    return data


def parse_date(text: str) -> datetime:
    """``'2023/05/20 (Sat) 02:21'`` -> an aware datetime (UTC; LongMemEval gives no zone)."""
    day, _, clock = text.partition(")")
    return datetime.strptime(f"{day.split(' (')[0]} {clock.strip()}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


def turn_id(session_id: str, index: int) -> str:
    return f"{session_id}:{index}"


def sessions(record: dict[str, Any]) -> list[tuple[str, datetime, list[dict[str, Any]]]]:
    """(session id, date, turns) of one question's haystack, in its order (mostly by time; a few are not)."""
    out, seen = [], set()
    for sid, date, turns in zip(
        record["haystack_session_ids"], record["haystack_dates"], record["haystack_sessions"], strict=True
    ):
        name, copy = str(sid), 1
        while name in seen:  # two haystacks repeat a session: the copy gets a name of its own
            copy += 1
            name = f"{sid}#{copy}"
        seen.add(name)
        out.append((name, parse_date(date), turns))
    return out


def evidence(record: dict[str, Any]) -> set[str]:
    """The question's evidence turns (``has_answer``); empty for the abstention questions."""
    return {
        turn_id(sid, i) for sid, _, turns in sessions(record) for i, turn in enumerate(turns) if turn.get("has_answer")
    }


def archive(data: Sequence[dict[str, Any]], recall: RecallIndex) -> dict[str, str]:
    """Archive every question's haystack through a ``Memory`` per session whose sink is ``recall``.

    Returns message id -> turn id. The question's id is its user id; a session's id is LongMemEval's.
    Empty turns (a handful) are not messages and cannot be recalled.
    """
    names: dict[str, str] = {}
    for record in data:
        for sid, date, turns in sessions(record):
            kept = [(i, t) for i, t in enumerate(turns) if str(t.get("content", "")).strip()]
            if not kept:
                continue
            memory = Memory(
                max_tokens=1_000_000,
                user_id=record["question_id"],
                session_id=sid,
                strategy="sliding_window",
                strategy_options={"max_messages": 1},
                sinks=[recall],
            )
            batch = [
                Message(role=t["role"], content=t["content"], created_at=date + timedelta(seconds=i)) for i, t in kept
            ]
            stored = memory.add_many(batch)
            names.update({s.id or "": turn_id(sid, i) for s, (i, _) in zip(stored, kept, strict=True)})
            memory.clear()
            memory.close()
    recall.flush()
    return names
