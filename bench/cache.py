"""What each request costs with the providers' prefix caching, for convmem and its peers on one workload.

Workloads (each replayed turn by turn; a *turn* ends wherever an app calls the model):

* ``agent``: the shipped agent session (examples/agent_session.jsonl: 307 messages, parallel tool calls,
  tool outputs of 2k-8k tokens);
* ``locomo``: the first LoCoMo dev conversation (../shared/data/locomo, read in place), speaker A as the
  user and B as the assistant, every 10th assistant turn a tool call whose result is that turn's text.

For every request: its tokens, the prefix it shares with the previous request, and its billed input cost
under OpenAI's automatic caching (gpt-4o prices), under OpenAI's caching with paid writes (gpt-5.6-terra
prices: writes at 1.25x the input price, reads at a tenth) and under Anthropic's ``cache_control`` caching
(Claude Sonnet 4.5 prices), as :mod:`bench._cachemodel` models them. Figures are taken once the budget
is full (the history no longer fits), as token-weighted means; ``fill`` is the mean request size over the input budget.

Run:  .venv/bin/python bench/cache.py [--budgets 4000,16000] [--workloads agent,locomo] [--json out.json]
      [--implicit-only] (convmem's OpenAI requests without its explicit breakpoints)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _cachemodel import Biller, Prices, Request, Tokens, anthropic_request, openai_request
from _locomo import LOCOMO
from convmem import Memory
from convmem.tokens import counter_for, lookup_model
from evidence import needles, questions, request_text

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "examples" / "agent_session.jsonl"
RESERVE = 256
EXPLICIT_BREAKPOINTS = True  # convmem's OpenAI requests carry its prompt_cache_breakpoint parts (--implicit-only: not)
SYSTEM = "You are a helpful assistant. Answer from the conversation and the memories you are given."

Step = list[dict[str, Any]]


# -- workloads ----------------------------------------------------------------------------------


def agent_steps() -> list[Step]:
    """The agent session cut where the model is called: after a user message or a completed tool unit."""
    messages = [json.loads(line) for line in AGENT.read_text().splitlines() if line.strip()]
    steps: list[Step] = []
    current: Step = []
    for index, message in enumerate(messages):
        current.append(message)
        following = messages[index + 1] if index + 1 < len(messages) else None
        ends_tools = message["role"] == "tool" and (following is None or following["role"] != "tool")
        if message["role"] == "user" or ends_tools:
            steps.append(current)
            current = []
    if current:
        steps.append(current)
    return steps


def _locomo_sample() -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(LOCOMO.read_text())[0]
    return sample


def locomo_steps() -> list[Step]:
    sample = _locomo_sample()
    conversation = sample["conversation"]
    speaker_a = conversation["speaker_a"]
    keys = sorted((k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
    steps: list[Step] = [[{"role": "system", "content": SYSTEM}]]
    assistant_turns = 0
    for key in keys:
        for turn in conversation[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn["speaker"] == speaker_a:
                steps[-1].append({"role": "user", "content": text})
                steps.append([])
                continue
            assistant_turns += 1
            if assistant_turns % 10 == 0:
                call = f"call_{assistant_turns}"
                steps[-1].append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": call, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                        ],
                    }
                )
                steps[-1].append({"role": "tool", "tool_call_id": call, "content": text})
                steps.append([])
            steps[-1].append({"role": "assistant", "content": text})
    return [s for s in steps if s]


WORKLOADS: dict[str, Callable[[], list[Step]]] = {"agent": agent_steps, "locomo": locomo_steps}


# -- the memories under test ----------------------------------------------------------------------


class Runner:
    """One memory fed step by step; ``request`` gives the next request in both providers' forms."""

    def add(self, step: Step) -> None:
        raise NotImplementedError

    def request(self) -> tuple[Request, Request, int]:
        """(OpenAI layout, Anthropic layout with breakpoints, tokens as convmem counts them)."""
        raise NotImplementedError

    def ask(self, question: str) -> str:
        """The text of the request this memory would send for ``question`` (changes nothing)."""
        raise NotImplementedError


class ConvmemRunner(Runner):
    """convmem; ``blocks``: a facts block (20 facts) and a recall block (``recall`` its options) at their default
    positions, fed by the memory's own sinks."""

    def __init__(
        self, budget: int, *, blocks: bool = False, recall: dict[str, Any] | None = None, **options: Any
    ) -> None:
        sinks: list[Any] = []
        memory_blocks: list[Any] = []
        if blocks:
            from convmem import Facts, FactsBlock, RecallBlock, RecallIndex

            index, facts = RecallIndex(), Facts(extractor=SentenceFacts())
            sinks = [index, facts]
            memory_blocks = [
                FactsBlock(facts, limit=20),
                RecallBlock(index, **({"k": 5} if recall is None else recall)),
            ]
        self.memory = Memory(
            "gpt-4o",
            max_tokens=budget,
            max_output_tokens=RESERVE,
            sinks=sinks,
            blocks=memory_blocks,
            # The explicit breakpoints a GPT-5.6 model gets (the same text: gpt-4o's bill does not change).
            prompt_cache_options={"mode": "implicit"} if EXPLICIT_BREAKPOINTS else None,
            **options,
        )

    def add(self, step: Step) -> None:
        self.memory.add_many(step)

    def ask(self, question: str) -> str:
        return request_text(self.memory.context(question).messages)

    def request(self) -> tuple[Request, Request, int]:
        openai = self.memory.context()
        anthropic = self.memory.context(format="anthropic").request()
        return (
            openai_request(openai.messages),
            anthropic_request(anthropic.get("system"), anthropic["messages"]),
            openai.account.total,
        )


class SentenceFacts:
    """A deterministic stand-in for an LLM fact extractor: first-person statements of the user become facts."""

    pattern = re.compile(r"\b(I am|I'm|I have|I've|I like|I love|my)\b", re.IGNORECASE)

    def extract(self, messages: Sequence[Any], facts: Sequence[Any], *, user_id: str | None = None) -> list[Any]:
        from convmem.longterm.facts.model import FactAdd

        out = []
        for message in messages:
            if message.role == "user" and self.pattern.search(message.text):
                sentence = re.split(r"(?<=[.!?])\s", message.text)[0][:200]
                out.append(FactAdd(sentence, (message.id,)))
        return out


class NaiveWindow(Runner):
    """Keep the newest messages that fit, dropping the oldest one at a time (never splitting a tool unit)."""

    def __init__(self, budget: int) -> None:
        self.counter = counter_for("gpt-4o")
        self.limit = budget - RESERVE - self.counter.reply_priming
        self.system: list[tuple[dict[str, Any], int]] = []
        self.history: list[tuple[dict[str, Any], int]] = []

    def add(self, step: Step) -> None:
        from convmem.formats import as_message

        for m in step:
            tokens = self.counter.count_message(as_message(m))
            (self.system if m["role"] == "system" else self.history).append((m, tokens))
        room = self.limit - sum(t for _, t in self.system)
        while sum(t for _, t in self.history) > room and len(self.history) > 1:
            self.history.pop(0)
            while self.history and self.history[0][0]["role"] == "tool":
                self.history.pop(0)

    def ask(self, question: str) -> str:
        return request_text([m for m, _ in self.system + self.history]) + "\n" + question

    def request(self) -> tuple[Request, Request, int]:
        messages = [m for m, _ in self.system + self.history]
        return _peer_requests(messages, sum(t for _, t in self.system + self.history) + self.counter.reply_priming)


class LangchainTrim(Runner):
    """langchain-core ``trim_messages`` over the whole history each turn (strategy last, start on a human)."""

    def __init__(self, budget: int) -> None:
        from langchain_core.messages import trim_messages

        self.trim = trim_messages
        self.counter = counter_for("gpt-4o")
        self.budget = budget - RESERVE
        self.history: list[Any] = []

    def add(self, step: Step) -> None:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

        for m in step:
            content = m.get("content") or ""
            if m["role"] == "system":
                self.history.append(SystemMessage(content))
            elif m["role"] == "user":
                self.history.append(HumanMessage(content))
            elif m["role"] == "tool":
                self.history.append(ToolMessage(content, tool_call_id=m["tool_call_id"]))
            else:
                calls = [
                    {"id": c["id"], "name": c["function"]["name"], "args": json.loads(c["function"]["arguments"])}
                    for c in m.get("tool_calls") or ()
                ]
                self.history.append(AIMessage(content, tool_calls=calls))

    def _count(self, messages: Sequence[Any]) -> int:
        return sum(self.counter.count_message(_lc_message(m)) for m in messages) + self.counter.reply_priming

    def ask(self, question: str) -> str:
        from langchain_core.messages import HumanMessage

        kept = self.trim(
            [*self.history, HumanMessage(question)],
            max_tokens=self.budget,
            token_counter=self._count,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        return request_text([_lc_dict(m) for m in kept])

    def request(self) -> tuple[Request, Request, int]:
        kept = self.trim(
            self.history,
            max_tokens=self.budget,
            token_counter=self._count,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        messages = [_lc_dict(m) for m in kept]
        return _peer_requests(messages, self._count(kept))


class LlamaIndexMemory(Runner):
    """llama-index-core ``Memory`` with a ``VectorMemoryBlock`` (its defaults: flushes 3,000 tokens at a time once
    the history passes 70% of ``token_limit``, top-2 retrieval, blocks inserted into the system message).
    Embeddings are a hashed bag of words (offline, deterministic): where the block goes and when the
    history is flushed decide what is reused, not how good the retrieval is."""

    def __init__(self, budget: int) -> None:
        import os

        from evidence import tiktoken_cache

        os.environ.setdefault("TIKTOKEN_CACHE_DIR", tiktoken_cache())
        import tiktoken
        from llama_index.core.memory import Memory as LlamaMemory
        from llama_index.core.memory import VectorMemoryBlock

        block = VectorMemoryBlock(
            name="retrieved", vector_store=_exact_store(), embed_model=_hashed_embedder(), priority=1
        )
        encoding = tiktoken.get_encoding("o200k_base")
        self.memory = LlamaMemory.from_defaults(
            session_id="cache", token_limit=budget - RESERVE, tokenizer_fn=encoding.encode, memory_blocks=[block]
        )
        self.counter = counter_for("gpt-4o")
        self.system: list[dict[str, Any]] = []

    def add(self, step: Step) -> None:
        from llama_index.core.base.llms.types import ChatMessage

        for m in step:
            if m["role"] == "system":
                self.system.append(m)
                continue
            kwargs: dict[str, Any] = {}
            if m.get("tool_calls"):
                kwargs["tool_calls"] = m["tool_calls"]
            if m.get("tool_call_id"):
                kwargs["tool_call_id"] = m["tool_call_id"]
            content = m.get("content") or ""
            if not isinstance(content, str):  # llama-index takes its own block types: the text parts go in
                content = "\n".join(p["text"] for p in content if p.get("type") == "text")
            self.memory.put(ChatMessage(role=m["role"], content=content, additional_kwargs=kwargs))

    def ask(self, question: str) -> str:
        got = self.memory.get(input=question)
        texts = ["\n".join(b.text for b in m.blocks if hasattr(b, "text")) for m in got]
        return "\n".join([*(m["content"] for m in self.system), *texts, question])

    def request(self) -> tuple[Request, Request, int]:
        from convmem.formats import as_message

        messages: list[dict[str, Any]] = []
        for m in self.memory.get():
            text = "\n".join(b.text for b in m.blocks if hasattr(b, "text"))
            out: dict[str, Any] = {"role": str(m.role.value), "content": text}
            out.update({k: v for k, v in m.additional_kwargs.items() if k in ("tool_calls", "tool_call_id")})
            if out["role"] == "assistant" and out.get("tool_calls") and not text:
                out["content"] = None
            messages.append(out)
        # The pinned system prompt first, merged with the system message llama-index puts its block in.
        if messages and messages[0]["role"] == "system" and self.system:
            messages[0] = {"role": "system", "content": self.system[0]["content"] + "\n\n" + messages[0]["content"]}
        else:
            messages = self.system + messages
        tokens = sum(self.counter.count_message(as_message(m)) for m in messages) + self.counter.reply_priming
        return _peer_requests(messages, tokens)


def _exact_store() -> Any:
    """An exact in-process vector store that keeps the node text (what VectorMemoryBlock requires)."""
    from llama_index.core.vector_stores.types import BasePydanticVectorStore, VectorStoreQueryResult
    from pydantic import Field

    class ExactStore(BasePydanticVectorStore):  # type: ignore[misc]
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
            q = query.query_embedding
            scored = sorted(
                ((sum(a * b for a, b in zip(n.embedding, q, strict=True)), i) for i, n in enumerate(self.nodes)),
                key=lambda x: (-x[0], x[1]),
            )[: query.similarity_top_k]
            chosen = [self.nodes[i] for _, i in scored]
            return VectorStoreQueryResult(
                nodes=chosen, similarities=[x for x, _ in scored], ids=[n.node_id for n in chosen]
            )

    return ExactStore()


def _hashed_embedder() -> Any:
    import hashlib as _hashlib

    from llama_index.core.base.embeddings.base import BaseEmbedding

    class Hashed(BaseEmbedding):  # type: ignore[misc]
        def _get_text_embedding(self, text: str) -> list[float]:
            vector = [0.0] * 256
            for word in re.findall(r"\w+", text.lower()):
                vector[_hashlib.blake2b(word.encode(), digest_size=2).digest()[0]] += 1.0
            norm = sum(x * x for x in vector) ** 0.5 or 1.0
            return [x / norm for x in vector]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

    return Hashed()


def _lc_message(m: Any) -> Any:
    from convmem.formats import as_message

    return as_message(_lc_dict(m))


def _lc_dict(m: Any) -> dict[str, Any]:
    role = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}[m.type]
    out: dict[str, Any] = {"role": role, "content": m.content if m.content else None}
    if role == "tool":
        out["tool_call_id"] = m.tool_call_id
    if role == "assistant" and m.tool_calls:
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
            for c in m.tool_calls
        ]
    if out["content"] is None and role != "assistant":
        out["content"] = ""
    return out


def _peer_requests(messages: list[dict[str, Any]], tokens: int) -> tuple[Request, Request, int]:
    """A peer places no cache breakpoints itself; it gets the usual hand-placed two (system, last message)."""
    from convmem.formats import as_message, render

    system = [m for m in messages if m["role"] == "system"]
    anthropic = render([as_message(m) for m in messages], "anthropic").kwargs()
    return (
        openai_request(messages),
        anthropic_request(anthropic.get("system") if system else None, anthropic["messages"], last_breakpoint=True),
        tokens,
    )


CONFIGS: dict[str, Callable[[int], Runner]] = {
    "convmem token_budget": lambda b: ConvmemRunner(b),
    "convmem + recall(k=5) + facts blocks": lambda b: ConvmemRunner(b, blocks=True),
    "convmem + recall(defaults) + facts blocks": lambda b: ConvmemRunner(b, blocks=True, recall={}),
    # Evidence per token (issue 30): the block's hits keep their lines; the relevance gate; a smaller reserved
    # share. (The block as a system message, measured then, is refused since issue 27: roles are earned.)
    "convmem + recall(stable) + facts": lambda b: ConvmemRunner(b, blocks=True, recall={"order": "stable"}),
    "convmem + recall(min_relevance=0.2) + facts": lambda b: ConvmemRunner(
        b, blocks=True, recall={"min_relevance": 0.2}
    ),
    **{
        f"convmem + recall(gate={g}) + facts": (lambda b, g=g: ConvmemRunner(b, blocks=True, recall={"gate": g}))
        for g in (0.2, 0.35, 0.5)
    },
    "convmem + recall(share=0.12) + facts": lambda b: ConvmemRunner(b, blocks=True, recall={"share": 0.12}),
    "convmem token_budget, low_watermark=1.0": lambda b: ConvmemRunner(b, strategy_options={"low_watermark": 1.0}),
    "naive sliding window (drop oldest)": NaiveWindow,
    "langchain-core trim_messages": LangchainTrim,
    "llama-index Memory + VectorMemoryBlock": LlamaIndexMemory,
}

#: ``--sweep``: eviction settings, each with the blocks on (recall k=5 + facts) and off.
SWEEP: dict[str, Callable[[int], Runner]] = {
    **{
        f"token_budget low_watermark={w}{' + blocks' if blocks else ''}": (
            lambda b, w=w, blocks=blocks: ConvmemRunner(b, blocks=blocks, strategy_options={"low_watermark": w})
        )
        for blocks in (False, True)
        for w in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    },
    "summary_buffer (extractive) + blocks": lambda b: ConvmemRunner(b, blocks=True, strategy="summary_buffer"),
    "summary_buffer (extractive)": lambda b: ConvmemRunner(b, strategy="summary_buffer"),
}


# -- the run ------------------------------------------------------------------------------------------


@dataclass
class Result:
    turns: int
    fill: float
    reuse: float
    openai_usd: float
    writes_usd: float  # OpenAI with paid cache writes (GPT-5.6 and later)
    anthropic_usd: float
    over_budget: int
    evidence: float | None = None  # LoCoMo: mean share of each question's evidence turns in the final request


def run(
    config: Callable[[int], Runner],
    steps: list[Step],
    budget: int,
    prices: Prices,
    tokens: Tokens,
    sample: dict[str, Any] | None = None,
) -> Result:
    runner = config(budget)
    biller = Biller(tokens, prices)
    counter = counter_for("gpt-4o")
    history = 0
    full: list[tuple[Any, int]] = []
    over = 0
    for step in steps:
        runner.add(step)
        history += sum(counter.count_text(json.dumps(m)) for m in step)
        openai, anthropic, counted = runner.request()
        bill = biller.bill(openai, anthropic)
        if counted + RESERVE > budget:
            over += 1
        if history > budget:
            full.append((bill, counted))
    if not full:
        raise SystemExit(f"the workload never fills a {budget}-token budget")
    total = sum(b.tokens for b, _ in full)
    evidence = None
    if sample is not None:
        texts = {dia: f"{text}" for dia, text in needles(sample).items()}
        shares = []
        for question, gold in questions(sample):
            text = runner.ask(question)
            shares.append(sum(1 for d in gold if d in texts and texts[d] in text) / len(gold))
        evidence = sum(shares) / len(shares)
    return Result(
        turns=len(full),
        fill=sum(c for _, c in full) / len(full) / (budget - RESERVE),
        reuse=sum(b.reused for b, _ in full) / total,
        openai_usd=sum(b.openai_usd for b, _ in full) / len(full),
        writes_usd=sum(b.openai_writes_usd for b, _ in full) / len(full),
        anthropic_usd=sum(b.anthropic_usd for b, _ in full) / len(full),
        over_budget=over,
        evidence=evidence,
    )


def reuse_ceiling(steps: list[Step], budget: int) -> float:
    """The most any memory can reuse on this workload: the share of the full requests that can repeat.

    What a turn adds (the new user message, the assistant's calls, a tool's output) is not in the previous
    request, so a memory that sends each turn's new messages whole (up to the input budget) and fills the
    budget completely still sends them anew; one that fills less reuses less. Counted over the turns after
    the history no longer fits, as ``run`` does.
    """
    counter = counter_for("gpt-4o")
    room = budget - RESERVE
    history, new, turns = 0, 0, 0
    for step in steps:
        added = sum(counter.count_text(json.dumps(m)) for m in step)
        history += added
        if history > budget:
            new += min(added, room)
            turns += 1
    return 1 - new / (turns * room)


def prices() -> Prices:
    """The registry's prices: gpt-4o (free writes), gpt-5.6-terra (paid writes), Claude Sonnet 4.5."""
    openai, writes, claude = (lookup_model(m) for m in ("gpt-4o", "gpt-5.6-terra", "claude-sonnet-4-5"))
    assert openai.input_price_per_mtok is not None
    assert openai.cached_input_price_per_mtok is not None
    assert writes.input_price_per_mtok is not None
    assert writes.cached_input_price_per_mtok is not None
    assert writes.cache_write_price_per_mtok is not None
    assert claude.input_price_per_mtok is not None
    assert claude.cached_input_price_per_mtok is not None
    assert claude.cache_write_price_per_mtok is not None
    return Prices(
        openai_input=openai.input_price_per_mtok,
        openai_cached=openai.cached_input_price_per_mtok,
        writes_input=writes.input_price_per_mtok,
        writes_cached=writes.cached_input_price_per_mtok,
        writes_write=writes.cache_write_price_per_mtok,
        anthropic_input=claude.input_price_per_mtok,
        anthropic_read=claude.cached_input_price_per_mtok,
        anthropic_write=claude.cache_write_price_per_mtok,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="4000,16000")
    parser.add_argument("--workloads", default="agent,locomo")
    parser.add_argument("--configs", default=None, help="comma-separated substrings of configuration names")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--sweep", action="store_true", help="eviction settings instead of the peers")
    parser.add_argument("--evidence", action="store_true", help="LoCoMo: evidence of each question in the request")
    parser.add_argument("--implicit-only", action="store_true", help="no explicit OpenAI breakpoints from convmem")
    args = parser.parse_args(argv)
    global EXPLICIT_BREAKPOINTS
    EXPLICIT_BREAKPOINTS = not args.implicit_only
    if not LOCOMO.exists() and "locomo" in args.workloads:
        sys.exit(f"LoCoMo data not found at {LOCOMO}")
    tokens, price = Tokens(), prices()
    rows = []
    print(
        f"{'workload':<7} {'budget':>6} | {'configuration':<46} | {'fill':>5} | {'reuse':>5} | "
        f"{'OpenAI $/1k turns':>17} | {'GPT-5.6 $/1k turns':>18} | {'Anthropic $/1k turns':>20} | over | evidence"
    )
    for workload in args.workloads.split(","):
        steps = WORKLOADS[workload]()
        for budget in (int(b) for b in args.budgets.split(",")):
            print(f"{workload:<7} {budget:>6} | reuse ceiling for any memory: {reuse_ceiling(steps, budget):.0%}")
            for name, config in (SWEEP if args.sweep else CONFIGS).items():
                if args.configs and not any(c in name for c in args.configs.split(",")):
                    continue
                sample = _locomo_sample() if workload == "locomo" and args.evidence else None
                result = run(config, steps, budget, price, tokens, sample)
                rows.append({"workload": workload, "budget": budget, "config": name, **vars(result)})
                print(
                    f"{workload:<7} {budget:>6} | {name[:46]:<46} | {result.fill:>5.0%} | {result.reuse:>5.0%} | "
                    f"{result.openai_usd * 1000:>17.2f} | {result.writes_usd * 1000:>18.2f} | "
                    f"{result.anthropic_usd * 1000:>20.2f} | "
                    f"{result.over_budget:>4} | {'-' if result.evidence is None else f'{result.evidence:.0%}'}"
                )
            sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
