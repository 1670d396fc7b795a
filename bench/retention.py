"""Retention probe: do the facts a later turn needs survive in the summary?

Summaries are made at 10%, 20% and 30% of the summarized messages' tokens by three methods:

* ``lead-N``: the first lines of the transcript (``role: text``, tool calls as
  ``called name(args)``, tool results in full), cut at the cap;
* ``extractive v1``: the offline summarizer as it was before issue 19 (a frozen copy in
  ``bench/_extractive_v1.py``);
* ``extractive``: ``convmem.llm.ExtractiveSummarizer`` as it is now.

The facts are defined from the data, before and apart from any summarizer:

* **agent session** (``examples/agent_session.jsonl``): everything before the user's request for a
  final summary is summarized. Facts: every *user request* (each user message); every *finding*, i.e.
  each item of the agent's own final summary (the answer to that request, which lists what the session
  found, did and left open: the root cause, the missing revenue, the DST shift ...); every *error* a
  tool returned (a result with a line starting ``ERROR``, ``FAILED`` or ``Traceback``: the line).
* **LoCoMo dev** (read in place from ``../shared/data/locomo``, never copied): each session is one
  eviction; the facts are the turns that a QA item cites as evidence (as in ``bench/extractive.py``).

A fact survives when at least half of its *key words* appear in the summary: its up to 5 non-stopword
words that are rarest in the conversation (numbers count as words). The criterion is the one
``bench/extractive.py`` used before this probe existed; it was not adjusted to the new summarizer.

The agent session is also replayed through the demo's memory (``summary_buffer``, gpt-4o, 16,000
tokens) with each summarizer, and the facts are checked in the final running summary.

Usage::

    .venv/bin/python bench/retention.py [--locomo path/to/locomo_dev.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from convmem import Memory, Message
from convmem.formats import parse_messages
from convmem.llm import ExtractiveSummarizer
from convmem.llm._render import split_to_fit
from convmem.llm.extractive import _STOP
from convmem.tokens import counter_for

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "examples" / "agent_session.jsonl"
RATIOS = (0.1, 0.2, 0.3)
# The agent session is long (96k tokens): its summaries are also measured at the sizes a memory really
# keeps (the demo's running summary is about 1.7% of it).
AGENT_RATIOS = (0.02, 0.05, *RATIOS)
KEY_WORDS = 5
METHODS = ("lead-N", "extractive v1", "extractive")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_ERROR = re.compile(r"^\s*(?:ERROR|FAILED|Traceback)\b.*$", re.MULTILINE)
_ITEM = re.compile(r"^\s*(?:\d+\.|[-*])?\s*(?:\*\*[^*]+\*\*:?)?\s*")
COUNT = counter_for("gpt-4o").count_text


def _load_v1() -> Any:
    spec = importlib.util.spec_from_file_location("_extractive_v1", Path(__file__).with_name("_extractive_v1.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module.ExtractiveSummarizer


def default_locomo() -> Path:
    root = os.environ.get("CONVMEM_LOCOMO_DIR")
    base = Path(root) if root else ROOT.parent / "shared" / "data" / "locomo"
    if not base.exists():  # a worktree under /work/wt: the shared data sits next to the main checkout
        base = Path("/work/shared/data/locomo")
    return base / "locomo_dev.json"


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and (len(w) > 2 or w.isdigit())]


def key_words(text: str, df: Counter[str]) -> list[str]:
    return sorted(set(words(text)), key=lambda w: (df[w], w))[:KEY_WORDS]


def survives(keys: Sequence[str], summary_words: set[str]) -> bool:
    return sum(w in summary_words for w in keys) >= math.ceil(len(keys) / 2)


def transcript_lines(messages: Sequence[Message]) -> list[str]:
    lines = []
    for m in messages:
        who = m.name or m.role
        if m.text:
            lines.append(f"{who}: {m.text}")
        lines.extend(f"{who}: called {c.name}({c.arguments})" for c in m.tool_calls)
    return lines


def lead(lines: Sequence[str], cap: int) -> str:
    text = "\n".join(lines)
    if COUNT(text) <= cap:
        return text
    head, _ = split_to_fit(COUNT, text, cap)
    return head


# -- the agent session ------------------------------------------------------------------------
def agent_case() -> tuple[list[Message], dict[str, list[str]], Counter[str]]:
    """The summarized messages and the facts (kind -> texts), from the shipped session."""
    messages = parse_messages(json.loads(line) for line in AGENT.read_text().splitlines() if line.strip())
    final = max(i for i, m in enumerate(messages) if m.role == "user" and "final summary" in m.text.lower())
    answer = next(m for m in messages[final + 1 :] if m.role == "assistant")
    body = [m for m in messages[:final] if m.role not in ("system", "developer")]
    findings = [_ITEM.sub("", line).strip() for line in answer.text.splitlines()]
    facts = {
        "user requests": [m.text for m in body if m.role == "user" and m.text.strip()],
        "findings": [f for f in findings if len(words(f)) >= 4],
        "tool errors": [e.group(0).strip() for m in body if m.role == "tool" for e in [_ERROR.search(m.text)] if e],
    }
    df = Counter(w for m in messages for w in set(words(m.text)))
    return body, facts, df


def agent_table(summarizers: dict[str, Any]) -> list[str]:
    body, facts, df = agent_case()
    keys = {kind: [key_words(t, df) for t in texts] for kind, texts in facts.items()}
    lines = transcript_lines(body)
    total = COUNT("\n".join(lines))
    out = [
        f"Agent session: {len(body)} messages summarized ({total:,} tokens); facts: "
        + ", ".join(f"{len(v)} {k}" for k, v in facts.items()),
        "",
        "| cap | method | summary tokens | " + " | ".join(facts) + " | all facts |",
        "|---|---|---:|" + "---:|" * (len(facts) + 1),
    ]
    for ratio in AGENT_RATIOS:
        cap = int(total * ratio)
        texts = {"lead-N": lead(lines, cap)}
        texts |= {name: s.summarize(None, body, cap) for name, s in summarizers.items()}
        for name in METHODS:
            out.append(f"| {ratio:.0%} | {name} | {COUNT(texts[name]):,} | " + _row(texts[name], keys))
    out += ["", "The demo's memory (summary_buffer, gpt-4o, 16,000 tokens), facts in its final running summary:", ""]
    out += ["| summarizer | summary tokens | " + " | ".join(facts) + " | all facts |", "|---|---:|" + "---:|" * 4]
    for name, make in (("extractive v1", summarizers["extractive v1"]), ("extractive", summarizers["extractive"])):
        summary = demo_summary(body, make)
        out.append(f"| {name} | {COUNT(summary):,} | " + _row(summary, keys))
    return out


def demo_summary(body: Sequence[Message], summarizer: Any) -> str:
    memory = Memory("gpt-4o", max_tokens=16_000, strategy="summary_buffer", summarizer=summarizer)
    summarizer.bind(memory.counter.count_text)
    memory.add_many(body[:1])
    for message in body[1:]:
        memory.add(message)
    summary = memory.context().messages[0]["content"] if memory.stats().summaries else ""
    return str(summary)


def _row(summary: str, keys: dict[str, list[list[str]]]) -> str:
    present = set(words(summary))
    cells, kept_all, n_all = [], 0, 0
    for groups in keys.values():
        kept = sum(survives(k, present) for k in groups if k)
        n = sum(1 for k in groups if k)
        cells.append(f"{kept}/{n} ({kept / n:.0%})")
        kept_all, n_all = kept_all + kept, n_all + n
    return " | ".join(cells) + f" | {kept_all / n_all:.0%} |"


# -- LoCoMo -----------------------------------------------------------------------------------
def locomo_table(path: Path, summarizers: dict[str, Callable[..., Any]]) -> list[str]:
    data = json.loads(path.read_text())
    tally = {ratio: Counter[str]() for ratio in RATIOS}
    for sample in data:
        conversation = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]), v)
            for k, v in conversation.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
        )
        turns = {t["dia_id"]: t for _, ts in sessions for t in ts}
        df = Counter(w for t in turns.values() for w in set(words(t["text"])))
        evidence = {e for qa in sample["qa"] for e in qa.get("evidence", []) if e in turns}
        for _, session in sessions:
            messages = [
                Message(
                    role="user" if t["speaker"] == conversation["speaker_a"] else "assistant",
                    content=t["text"],
                    name=re.sub(r"[^A-Za-z0-9_-]", "_", t["speaker"]),
                )
                for t in session
            ]
            lines = transcript_lines(messages)
            total = COUNT("\n".join(lines))
            cited = [key_words(t["text"], df) for t in session if t["dia_id"] in evidence]
            cited = [k for k in cited if k]
            for ratio in RATIOS:
                cap = max(64, int(total * ratio))
                texts = {"lead-N": lead(lines, cap)}
                texts |= {name: s.summarize(None, messages, cap) for name, s in summarizers.items()}
                t = tally[ratio]
                t["sessions"] += 1
                t["facts"] += len(cited)
                for name, text in texts.items():
                    present = set(words(text))
                    t[name] += sum(survives(k, present) for k in cited)
                    t[f"{name} tokens"] += COUNT(text)
    out = [
        f"LoCoMo dev: {len(data)} conversations, {tally[RATIOS[0]]['sessions']} sessions, "
        f"{tally[RATIOS[0]]['facts']} evidence turns",
        "",
        "| cap | " + " | ".join(METHODS) + " | mean tokens (" + " / ".join(METHODS) + ") |",
        "|---|" + "---:|" * (len(METHODS) + 1),
    ]
    for ratio in RATIOS:
        t = tally[ratio]
        kept = " | ".join(f"{t[m] / t['facts']:.1%}" for m in METHODS)
        sizes = " / ".join(f"{t[f'{m} tokens'] / t['sessions']:.0f}" for m in METHODS)
        out.append(f"| {ratio:.0%} | {kept} | {sizes} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=default_locomo())
    args = parser.parse_args()
    summarizers = {"extractive v1": _load_v1()(COUNT), "extractive": ExtractiveSummarizer(COUNT)}
    print("\n".join(agent_table(summarizers)))
    print()
    if args.locomo.exists():
        print("\n".join(locomo_table(args.locomo, summarizers)))
    else:
        print(f"LoCoMo not found at {args.locomo} (pass --locomo or set CONVMEM_LOCOMO_DIR)", file=sys.stderr)


if __name__ == "__main__":
    main()
