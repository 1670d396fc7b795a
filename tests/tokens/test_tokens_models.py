"""The model registry: name resolution, suggestions, the counter rule, and cost."""

from __future__ import annotations

import pytest

from convmem.errors import ConfigurationError, UnknownModelError
from convmem.messages import Message
from convmem.tokens import (
    ApproximateCounter,
    CalibratedCounter,
    ModelInfo,
    TiktokenCounter,
    cost,
    counter_for,
    known_models,
    lookup_model,
)
from convmem.tokens.calibrated import UNKNOWN_PRIOR


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4o", "gpt-4o"),
        ("GPT-4o-Mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "gpt-4o-mini"),
        ("azure/gpt-35-turbo", "gpt-3.5-turbo"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-4-32k-0613", "gpt-4-32k"),
        ("gpt-4-turbo-2024-04-09", "gpt-4-turbo"),
        ("gpt-4-1106-preview", "gpt-4-turbo"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-5", "gpt-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("gpt-5-nano-2025-08-07", "gpt-5-nano"),
        ("gpt-5-chat-latest", "gpt-5-chat"),
        ("o1-2024-12-17", "o1"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("o4-mini", "o4-mini"),
        ("text-embedding-3-small", "text-embedding-3-small"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-3-haiku-20240307", "claude-3-haiku"),
        ("claude-3-opus-20240229", "claude-3-opus"),
        ("gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-pro-preview-06-05", "gemini-2.5-pro"),
        ("models/gemini-1.5-pro-002", "gemini-1.5-pro"),
        ("google/gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gemini-1.5-flash-8b", "gemini-1.5-flash-8b"),
        ("gemini-1.5-flash-latest", "gemini-1.5-flash"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1"),
        ("llama3.1:8b", "llama-3.1"),
        ("meta.llama3-1-70b-instruct-v1:0", "llama-3.1"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3"),
        ("llama-3.2-3b-preview", "llama-3.2"),
        ("llama-3.3-70b-versatile", "llama-3.3"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
        ("llama-4-maverick", "llama-4-maverick"),
        ("mistral-large-latest", "mistral-large"),
        ("mistral-large-2411", "mistral-large"),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-small"),
        ("mistral-medium-2505", "mistral-medium"),
        ("codestral-2501", "codestral"),
        ("ministral-8b-latest", "ministral-8b"),
        ("ministral-3b-2410", "ministral-3b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5"),
        ("qwen/qwen-2.5-7b-instruct", "qwen2.5"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("qwen3:30b", "qwen3"),
        ("deepseek-chat", "deepseek-chat"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-chat"),
        ("deepseek-reasoner", "deepseek-reasoner"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-reasoner"),
    ],
)
def test_lookup_resolves_snapshots_prefixes_and_aliases(name: str, canonical: str) -> None:
    assert lookup_model(name).name == canonical


def test_registry_facts() -> None:
    gpt4o = lookup_model("gpt-4o")
    assert (gpt4o.provider, gpt4o.tokenizer, gpt4o.context_window, gpt4o.max_output_tokens) == (
        "openai", "o200k_base", 128_000, 16_384
    )  # fmt: skip
    assert lookup_model("gpt-4").tokenizer == "cl100k_base"
    assert lookup_model("gpt-3.5-turbo").tokenizer == "cl100k_base"
    assert lookup_model("text-embedding-3-large").tokenizer == "cl100k_base"
    for name in ("gpt-5", "gpt-5-mini", "gpt-4.1", "o1", "o3", "o4-mini"):
        assert lookup_model(name).tokenizer == "o200k_base"
    assert lookup_model("claude-3-5-sonnet-20241022").max_output_tokens == 8_192
    assert lookup_model("claude-3-7-sonnet-latest").max_output_tokens == 64_000
    assert lookup_model("gemini-1.5-pro").context_window == 2_097_152
    for info in known_models():
        assert info.context_window > 0
        assert 0 <= info.max_output_tokens <= info.context_window
        assert info.tokenizer in (None, "o200k_base", "cl100k_base")
        assert (info.tokenizer is not None) == (info.provider == "openai")


def test_every_canonical_name_resolves_to_itself() -> None:
    for info in known_models():
        assert lookup_model(info.name) is info


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("gpt4o", "gpt-4o"),
        ("gpt-4o-mni", "gpt-4o-mini"),
        ("claude-3-5-sonet", "claude-3-5-sonnet"),
        ("gemni-2.5-pro", "gemini-2.5-pro"),
    ],
)
def test_unknown_model_suggests_close_names(typo: str, suggestion: str) -> None:
    with pytest.raises(UnknownModelError) as info:
        lookup_model(typo)
    assert info.value.model == typo
    assert suggestion in info.value.suggestions
    assert suggestion in str(info.value)
    assert isinstance(info.value, KeyError)


def test_nonsense_has_no_suggestions() -> None:
    with pytest.raises(UnknownModelError) as info:
        lookup_model("zzzz-qqqq")
    assert info.value.suggestions == ()


def test_openai_models_get_the_exact_shared_counter() -> None:
    counter = counter_for("openai/gpt-4o-2024-08-06")
    assert isinstance(counter, TiktokenCounter)
    assert counter.name == "tiktoken:o200k_base"
    assert counter.exact
    assert counter_for("gpt-4.1") is counter  # shared per vocabulary
    assert counter_for("gpt-3.5-turbo").name == "tiktoken:cl100k_base"


@pytest.mark.parametrize(
    "model", ["claude-sonnet-4-5", "gemini-2.5-pro", "llama-3.1", "mistral-large", "deepseek-chat", "qwen3-max"]
)
def test_models_without_an_exact_tokenizer_get_a_labelled_calibrated_counter(model: str) -> None:
    counter = counter_for(model)
    assert isinstance(counter, CalibratedCounter)
    assert not counter.exact
    assert counter.name.startswith("calibrated(o200k_base x")
    assert counter.calibration is counter_for(model).calibration  # one calibration per model per process
    approx = counter_for(model, counter="approximate")
    assert isinstance(approx, ApproximateCounter)
    assert not approx.exact
    assert "approximate" in approx.name


@pytest.mark.parametrize("model", ["gpt-5.1", "gpt-5.1-2025-11-13", "openai/gpt-5.1", "gpt-5.4-mini", "gpt-5.2"])
def test_current_openai_models_get_the_exact_o200k_counter(model: str) -> None:
    counter = counter_for(model)
    assert isinstance(counter, TiktokenCounter)
    assert counter.exact
    assert counter.name == "tiktoken:o200k_base"


@pytest.mark.parametrize(
    ("model", "name", "provider"),
    [
        ("gpt-5.1", "gpt-5.1", "openai"),
        ("claude-opus-5-5", "claude-opus-5-5", "anthropic"),
        ("claude-sonnet-5", "claude-sonnet-5", "anthropic"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5", "anthropic"),
        ("gemini-3-pro-preview", "gemini-3-pro", "google"),
        ("models/gemini-3.1-pro-preview", "gemini-3.1-pro", "google"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick", "meta"),
        ("mistral-medium-3.5", "mistral-medium-3.5", "mistral"),
        ("qwen3-max", "qwen3-max", "qwen"),
        ("deepseek-chat", "deepseek-chat", "deepseek"),
    ],
)
def test_current_models_of_every_provider_resolve(model: str, name: str, provider: str) -> None:
    info = lookup_model(model)
    assert (info.name, info.provider) == (name, provider)
    assert info.context_window > info.max_output_tokens > 0


def test_unknown_model_needs_an_explicit_counter() -> None:
    with pytest.raises(UnknownModelError, match="counter='calibrated'"):
        counter_for("my-private-model")
    assert isinstance(counter_for("my-private-model", counter="approximate"), ApproximateCounter)
    calibrated = counter_for("my-private-model", counter="calibrated")
    assert isinstance(calibrated, CalibratedCounter)
    assert calibrated.calibration.prior == UNKNOWN_PRIOR


def test_a_given_counter_is_used_as_is() -> None:
    mine = TiktokenCounter("cl100k_base")
    assert counter_for("claude-sonnet-4-5", counter=mine) is mine
    assert counter_for("not-in-registry", counter=mine) is mine


def test_a_third_party_counter_needs_no_base_class() -> None:
    class Words:
        name = "words"
        exact = False
        reply_priming = 0

        def count_text(self, text: str) -> int:
            return len(text.split())

        def count_message(self, message: Message) -> int:
            return self.count_text(message.text) + 1

    words = Words()
    assert counter_for("claude-3-opus", counter=words) is words


@pytest.mark.parametrize("bad", ["exact", "tiktoken", 42])
def test_invalid_counter_argument(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="counter must be"):
        counter_for("gpt-4o", counter=bad)  # type: ignore[arg-type]


def test_cost() -> None:
    gpt4o = lookup_model("gpt-4o")
    assert cost(gpt4o, 1_000_000, 0) == pytest.approx(2.50)
    assert cost(gpt4o, 10_000, 500) == pytest.approx(0.03)
    # 400k of the 1M input tokens were cache hits at $1.25/M.
    assert cost(gpt4o, 1_000_000, 0, cached_input_tokens=400_000) == pytest.approx(0.6 * 2.50 + 0.4 * 1.25)
    assert cost("claude-3-5-haiku-20241022", 1_000_000, 1_000_000) == pytest.approx(0.80 + 4.00)
    # No cached price: cached tokens bill at the input price.
    assert cost("gpt-4", 1_000, 0, cached_input_tokens=1_000) == pytest.approx(0.03)


def test_cost_long_context_tier() -> None:
    pro = lookup_model("gemini-2.5-pro")
    assert cost(pro, 200_000, 1_000) == pytest.approx(200_000 * 1.25 / 1e6 + 1_000 * 10 / 1e6)
    assert cost(pro, 300_000, 1_000) == pytest.approx(300_000 * 2.50 / 1e6 + 1_000 * 15 / 1e6)


def test_cost_errors() -> None:
    with pytest.raises(ConfigurationError, match="no list price"):
        cost("llama-3.1", 10, 10)
    with pytest.raises(ValueError, match="exceeds"):
        cost("gpt-4o", 10, 0, cached_input_tokens=11)
    with pytest.raises(ValueError, match="negative"):
        cost("gpt-4o", -1, 0)
    with pytest.raises(UnknownModelError):
        cost("gpt-9", 1, 1)


def test_model_info_is_frozen_and_user_constructible() -> None:
    mine = ModelInfo("my-model", "self", None, 32_000, 4_000, 1.0, 2.0)
    assert cost(mine, 1_000_000, 1_000_000) == pytest.approx(3.0)
    with pytest.raises(AttributeError):
        mine.name = "other"  # type: ignore[misc]
