"""The usage-calibrated counter: the default for models with no exact offline tokenizer.

The provider is a real HTTP server (tests/llm/server.py) reached through the real
``openai`` SDK; it reports ``prompt_tokens`` from its own "tokenizer" (cl100k_base
with a chat template and single-digit numbers, as Qwen and Mistral split them), so
the ratio to convmem's o200k_base base varies with the content.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convmem import Memory
from convmem.errors import ConfigurationError
from convmem.tokens import CalibratedCounter, Calibration, counter_for, lookup_model
from convmem.tokens import calibrated as calibrated_module
from convmem.tokens.calibrated import MIN_MARGIN, WARMUP, prior_for
from tests.llm.server import ChatServer, Reply, Request, completion

openai = pytest.importorskip("openai")

_CL100K = counter_for("gpt-4")


def provider_tokens(body: dict[str, Any]) -> int:
    """What the fake provider bills for a request: a Qwen-like template over cl100k, digits one token each."""
    total = 3  # <|im_start|>assistant\n
    for message in body.get("messages", []):
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = json.dumps(text)
        for call in message.get("tool_calls") or []:
            text += json.dumps(call["function"])
        digits = sum(ch.isdigit() for ch in text)
        total += 5 + _CL100K.count_text(text) + math.ceil(digits * 0.6)
    return total


@pytest.fixture(autouse=True)
def fresh_calibrations() -> Iterator[None]:
    """Each test starts as a new process would: nothing learned yet."""
    saved = dict(calibrated_module._REGISTRY)
    calibrated_module._REGISTRY.clear()
    yield
    calibrated_module._REGISTRY.clear()
    calibrated_module._REGISTRY.update(saved)


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    def reply(request: Request) -> Reply:
        return Reply.json(completion("ok", prompt_tokens=provider_tokens(request.body), completion_tokens=2))

    with ChatServer(default=reply) as server:
        yield server


def _turn_text(rng: random.Random, turn: int) -> str:
    words = ["deploy", "latency", "the", "cache", "region", "rollback", "error", "budget", "query", "index"]
    if turn % 5 == 4:  # a tool-like dump: numbers, where the provider's count grows fastest
        return "\n".join(",".join(str(rng.randint(0, 99_999)) for _ in range(6)) for _ in range(rng.randint(3, 12)))
    return " ".join(rng.choice(words) for _ in range(rng.randint(8, 90)))


def test_a_claude_memory_works_as_is_and_says_its_counts_are_not_exact() -> None:
    memory = Memory("claude-sonnet-4-5", max_output_tokens=1024)
    memory.add({"role": "user", "content": "hello"})
    account = memory.context().account
    assert account.exact is False
    assert account.counter.startswith("calibrated(o200k_base x1.200, 0 usages)")
    assert isinstance(memory.counter, CalibratedCounter)


@pytest.mark.slow  # a real local server and many requests; the full suite runs it
def test_usage_reported_by_a_local_server_calibrates_the_counter_and_the_budget_holds(provider: ChatServer) -> None:
    client = openai.OpenAI(base_url=provider.base_url, api_key="sk-test", max_retries=0)
    budget, reserve = 3_000, 400
    memory = Memory("qwen3", max_tokens=budget, max_output_tokens=reserve)
    rng = random.Random(7)
    reported: list[int] = []
    predicted: list[int] = []
    try:
        for turn in range(80):
            memory.add({"role": "user", "content": _turn_text(rng, turn)})
            ctx = memory.context()
            response = client.chat.completions.create(model="qwen3", **ctx.request())
            memory.record_usage(response)  # the SDK's response object, usage inside
            reported.append(response.usage.prompt_tokens)
            predicted.append(ctx.tokens)
            memory.add({"role": "assistant", "content": response.choices[0].message.content})
    finally:
        client.close()
    calibration = memory.counter.calibration  # type: ignore[attr-defined]
    assert calibration.observed == 80
    # What the provider billed never exceeded the input budget, and the prediction never fell short.
    assert max(reported) <= budget - reserve
    assert all(p >= r for p, r in zip(predicted, reported, strict=True))
    # Once warmed up, the surplus is the measured margin plus the spread of this deliberately mixed content
    # (prose, then number dumps the provider counts digit by digit); the prior alone would overcount more.
    late = sorted(p / r - 1 for p, r in zip(predicted[40:], reported[40:], strict=True))
    assert late[len(late) // 2] <= 0.30
    assert min(reported[40:]) >= 0.5 * (budget - reserve)  # the budget is used, not wasted
    # The learned factor is the provider's ratio plus a margin measured on these requests.
    assert calibration.estimate is not None
    assert 1.0 < calibration.estimate < calibration.factor
    assert calibration.margin >= MIN_MARGIN
    assert memory.stats().input_tokens == sum(reported)


def test_the_window_is_recounted_when_the_factor_changes() -> None:
    memory = Memory("llama-3.1", max_tokens=20_000, max_output_tokens=0)
    for i in range(6):
        memory.add({"role": "user", "content": f"message {i} " * 30})
    before = memory.stats().context_tokens
    ctx = memory.context()
    memory.record_usage({"prompt_tokens": int(ctx.tokens * 2.0), "completion_tokens": 1})
    memory.add({"role": "assistant", "content": "ok"})
    counter = memory.counter
    expected = sum(counter.count_message(m) for m in memory.messages()) + counter.reply_priming
    assert memory.stats().context_tokens == expected > 1.5 * before
    assert memory.context().tokens == expected


def test_usage_without_a_context_or_implausible_usage_teaches_nothing() -> None:
    memory = Memory("gemini-2.5-pro", max_tokens=10_000, max_output_tokens=0)
    memory.add({"role": "user", "content": "hi"})
    calibration = memory.counter.calibration  # type: ignore[attr-defined]
    memory.record_usage({"prompt_tokens": 50, "completion_tokens": 1})  # no context() was taken
    assert calibration.observed == 0
    memory.context()
    memory.record_usage({"prompt_tokens": 100_000, "completion_tokens": 1})  # belongs to another request
    assert calibration.observed == 0
    memory.context()
    memory.record_usage({"prompt_tokens": 9, "completion_tokens": 1})
    assert calibration.observed == 1
    memory.record_usage({"prompt_tokens": 9, "completion_tokens": 1})  # one usage per context
    assert calibration.observed == 1


def test_the_prior_bounds_the_factor_through_the_warmup() -> None:
    calibration = Calibration("m", prior=1.5)
    factors = []
    for _ in range(WARMUP + 2):
        calibration.observe(predicted=1_000, factor=1.0, reported=1_000)
        factors.append(calibration.factor)
    assert factors[: WARMUP - 1] == [1.5] * (WARMUP - 1)
    assert factors[-1] == pytest.approx(1.0 + MIN_MARGIN, abs=1e-3)
    low = Calibration("m", prior=1.0)  # a prior that is too low gives way to what is measured at once
    low.observe(predicted=1_000, factor=1.0, reported=1_300)
    assert low.factor >= 1.3 * (1 + MIN_MARGIN) - 1e-3


def test_the_factor_is_never_rounded_down() -> None:
    calibration = Calibration("m", prior=1.00005)
    assert calibration.scale(10_000) >= 10_001
    assert calibration.factor >= 1.00005


@pytest.mark.parametrize(
    "model", ["gpt-4o", "claude-sonnet-4-5", "gemini-2.5-flash", "llama-3.1", "mistral-large", "qwen3", "deepseek-chat"]
)
def test_a_budget_above_the_model_window_is_refused(model: str) -> None:
    info = lookup_model(model)
    window = info.context_window
    with pytest.raises(ConfigurationError, match=rf"context window of {info.name} \({window:,} tokens\)"):
        Memory(model, max_tokens=window + 1)
    assert Memory(model, max_tokens=window, max_output_tokens=1024).budget == window


def test_priors_by_provider() -> None:
    assert prior_for(lookup_model("claude-opus-4-8")) > prior_for(lookup_model("claude-sonnet-4-5"))
    assert prior_for(lookup_model("qwen3")) > prior_for(lookup_model("llama-3.1"))
    assert prior_for(None) >= max(prior_for(lookup_model(m)) for m in ("gemini-2.5-pro", "qwen3", "deepseek-chat"))


_REOPEN = """
import json, sys
from convmem import Memory
from convmem.stores import open_store
store = open_store(sys.argv[1])
memory = Memory.open(sys.argv[2], store=store)
c = memory.counter.calibration
print(json.dumps({"observed": c.observed, "factor": c.factor, "name": memory.counter.name}))
"""


def test_a_reopened_session_in_a_new_process_starts_from_what_it_learned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cal.db'}"
    memory = Memory("deepseek-chat", max_tokens=8_000, max_output_tokens=0, store=url)
    for i in range(5):
        memory.add({"role": "user", "content": f"question {i}: " + "why is the sky blue " * 10})
        ctx = memory.context()
        factor = memory.counter.calibration.factor  # type: ignore[attr-defined]
        memory.record_usage({"prompt_tokens": round(ctx.tokens / factor * 1.3), "completion_tokens": 3})
        memory.add({"role": "assistant", "content": "Rayleigh scattering."})
    learned = memory.counter.calibration.factor  # type: ignore[attr-defined]
    memory.close()
    out = subprocess.run(
        [sys.executable, "-c", _REOPEN, url, memory.session_id], capture_output=True, text=True, check=True
    )
    reopened = json.loads(out.stdout)
    assert reopened["observed"] == 5
    assert reopened["factor"] == pytest.approx(learned)
    assert reopened["factor"] != pytest.approx(prior_for(lookup_model("deepseek-chat")))
    assert "5 usages" in reopened["name"]
