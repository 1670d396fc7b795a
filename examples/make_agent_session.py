"""Write ``agent_session.jsonl``: a long, realistic agent session in OpenAI Chat Completions format.

A data engineer asks a coding/data agent why the revenue dashboard dropped. Over
~25 user turns the agent reads code, queries the warehouse, searches logs and
calls APIs (often 2-4 tools in parallel), gets large outputs (logs, CSV and JSON
dumps, source files), looks at screenshots, writes a fix and an incident report.

The script is deterministic: re-running it rewrites the same bytes. Run it from
anywhere::

    python examples/make_agent_session.py            # writes examples/agent_session.jsonl
    python examples/make_agent_session.py --check    # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_followups import INSERTS
from _agent_story import FINAL, PHASES, SYSTEM
from _agent_story2 import PHASES2
from _agent_world import rng

OUT = Path(__file__).resolve().parent / "agent_session.jsonl"


class Session:
    """Builds the message list; call ids come from a seeded generator."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._ids = rng("call-ids")

    def _call_id(self) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "call_" + "".join(self._ids.choice(alphabet) for _ in range(24))

    def add(self, step: dict[str, Any]) -> None:
        kind = step["kind"]
        if kind == "system":
            self.messages.append({"role": "system", "content": step["text"]})
        elif kind == "user":
            self._user(step)
        elif kind == "assistant":
            self.messages.append({"role": "assistant", "content": step["text"]})
        else:
            self._tools(step)

    def _user(self, step: dict[str, Any]) -> None:
        images = step.get("images", ())
        if not images:
            self.messages.append({"role": "user", "content": step["text"]})
            return
        parts: list[dict[str, Any]] = [{"type": "text", "text": step["text"]}]
        for url, detail in images:
            parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
        self.messages.append({"role": "user", "content": parts})

    def _tools(self, step: dict[str, Any]) -> None:
        calls = []
        results = []
        for name, args, output in step["calls"]:
            call_id = self._call_id()
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))},
                }
            )
            results.append({"role": "tool", "tool_call_id": call_id, "content": output})
        self.messages.append({"role": "assistant", "content": step.get("text"), "tool_calls": calls})
        # Parallel results come back in completion order, not call order.
        if step.get("reverse"):
            results.reverse()
        self.messages.extend(results)


def build() -> list[dict[str, Any]]:
    session = Session()
    session.add({"kind": "system", "text": SYSTEM})
    for phase in [*PHASES, *PHASES2, FINAL]:
        for follow in [phase, *INSERTS.get(phase.__name__, [])]:
            for step in follow():
                session.add(step)
    return session.messages


def render(messages: list[dict[str, Any]]) -> bytes:
    lines = (json.dumps(m, ensure_ascii=False) for m in messages)
    return ("\n".join(lines) + "\n").encode("utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = render(build())
    if args.check:
        same = args.out.exists() and args.out.read_bytes() == data
        print(f"{args.out}: {'up to date' if same else 'STALE: re-run make_agent_session.py'}")
        return 0 if same else 1
    args.out.write_bytes(data)
    count = data.count(b"\n")
    print(f"wrote {args.out} ({len(data):,} bytes, {count:,} messages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
