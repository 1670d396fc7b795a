"""The model catalog behind :mod:`convmem.tokens.models` (data only).

Context windows, output limits and list prices (USD per million tokens) as the
providers publish them; checked on the providers' own pages where the search
index had them (OpenAI pricing, platform.claude.com model pages and pricing,
ai.google.dev pricing, api-docs.deepseek.com) and dated :data:`PRICES_AS_OF`.
Prices change: treat :func:`~convmem.tokens.cost` as an estimate and pass your
own :class:`~convmem.tokens.ModelInfo` when you have a contract price.

``cached`` is the cache-hit input price (OpenAI cached input, Anthropic cache
reads, DeepSeek cache hits); None means "bill cached tokens at the input
price". Open-weight models (Llama, Qwen) have no list price: each host sets its
own, so their prices are None. Their ``max_output_tokens`` is set by the serving
stack; the catalog uses 8,192 (4,096 for the 8k-context Llama 3), Qwen 2.5's
documented generation length, so that a default output reservation leaves room
for the prompt.

Aliases are extra exact names or, when they contain ``*``, fnmatch patterns
matched against the normalized name (the longest matching pattern wins).
Dated snapshots (``-2024-08-06``, ``-20241022``, ``-2411``, ``-001``,
``-latest``, ``-preview...``) are stripped by the lookup and need no alias.
"""

from __future__ import annotations

from ._modelinfo import ModelInfo

__all__ = ["MODELS", "PRICES_AS_OF"]

PRICES_AS_OF = "2026-11-30"

O200K, CL100K = "o200k_base", "cl100k_base"


def _openai(
    name: str,
    enc: str,
    ctx: int,
    out: int,
    inp: float,
    outp: float,
    cached: float | None,
    *aliases: str,
) -> ModelInfo:
    return ModelInfo(name, "openai", enc, ctx, out, inp, outp, cached, aliases=aliases)


#: Anthropic's tool-use system prompt, ``(tool_choice auto or none, any or tool)``, from its "Tool use pricing
#: and tokens" table (docs.anthropic.com/en/docs/tool-use-pricing-and-tokens): 346/313 for the Claude 4 models,
#: Sonnet 3.7 and Sonnet 3.5 (its June snapshot's 294/261 is below that), 264/340 for Haiku 3.5 and Haiku 3, 530/281
#: for Opus 3 and 159/235 for Sonnet 3. The 5.x models are not in that table: they get the latest generation's count.
TOOL_PROMPT_CLAUDE_4 = (346, 313)
_TOOL_PROMPT = {
    "claude-3-5-haiku": (264, 340),
    "claude-3-haiku": (264, 340),
    "claude-3-opus": (530, 281),
    "claude-3-sonnet": (159, 235),
}


def _claude(name: str, ctx: int, out: int, inp: float, outp: float, cached: float | None, *aliases: str) -> ModelInfo:
    # Cache writes bill at 1.25x the input price for the 5-minute cache and 2x for the 1-hour one, reads at ``cached``.
    return ModelInfo(
        name,
        "anthropic",
        None,
        ctx,
        out,
        inp,
        outp,
        cached,
        aliases=aliases,
        cache_write_price_per_mtok=round(inp * 1.25, 6),
        cache_write_1h_price_per_mtok=round(inp * 2, 6),
        tool_prompt_tokens=_TOOL_PROMPT.get(name, TOOL_PROMPT_CLAUDE_4),
    )


def _gpt56(name: str, inp: float, outp: float, cached: float, *aliases: str) -> ModelInfo:
    # The GPT-5.6 family and later bill cache writes at 1.25x the input price and take explicit breakpoints.
    return ModelInfo(
        name,
        "openai",
        O200K,
        1_050_000,
        128_000,
        inp,
        outp,
        cached,
        aliases=aliases,
        cache_write_price_per_mtok=round(inp * 1.25, 6),
        explicit_cache_breakpoints=True,
    )


def _gemini(
    name: str, ctx: int, out: int, inp: float, outp: float, long: tuple[int, float, float] | None = None
) -> ModelInfo:
    threshold, long_in, long_out = long if long else (None, None, None)
    return ModelInfo(
        name,
        "google",
        None,
        ctx,
        out,
        inp,
        outp,
        long_context_threshold=threshold,
        long_input_price_per_mtok=long_in,
        long_output_price_per_mtok=long_out,
    )


def _open(
    name: str,
    provider: str,
    ctx: int,
    out: int,
    hf: str | None,
    *aliases: str,
    prices: tuple[float, float] | None = None,
) -> ModelInfo:
    inp, outp = prices if prices else (None, None)
    return ModelInfo(name, provider, None, ctx, out, inp, outp, aliases=aliases, hf_tokenizer=hf)


def _family(prefix: str, *spellings: str) -> tuple[str, ...]:
    """Exact name and ``name-*`` pattern for each spelling of an open-weight family."""
    return tuple(alias for spelling in (prefix, *spellings) for alias in (spelling, f"{spelling}-*"))


MODELS: tuple[ModelInfo, ...] = (
    # --- OpenAI: o200k_base -------------------------------------------------------
    # GPT-5.6 (2026-07-09): "cache writes cost 1.25x the uncached input token rate" and explicit breakpoints
    # (developers.openai.com/api/docs/guides/prompt-caching, read 2026-11-30; the installed openai SDK types
    # prompt_cache_breakpoint and prompt_cache_options "for gpt-5.6 and later models"). Windows and prices as
    # the gateways list OpenAI's (vercel.com/ai-gateway/models/openai/gpt-5.6-*, read 2026-11-30): Sol at its
    # current $4/$20 (its launch price was $5/$30), Terra and Luna after their 2026-07-30 reductions; reads a
    # tenth of the input price. ``gpt-5.6`` is Sol, as OpenAI routes it.
    _gpt56("gpt-5.6-sol", 4.00, 20.00, 0.40, "gpt-5.6", "gpt-sol-latest"),
    _gpt56("gpt-5.6-terra", 2.00, 12.00, 0.20, "gpt-terra-latest"),
    _gpt56("gpt-5.6-luna", 0.20, 1.20, 0.02, "gpt-luna-latest"),
    # developers.openai.com/api/docs/models/<name> (read 2026-11-30): gpt-5.1, gpt-5.4-nano, gpt-5-nano.
    # gpt-5.4 and gpt-5.4-mini: the same site's quick comparisons and gateway listings of OpenAI's page;
    # gpt-5.4 bills prompts above 272K input tokens at 2x input and 1.5x output.
    _openai("gpt-5.1", O200K, 400_000, 128_000, 1.25, 10.00, 0.125),
    ModelInfo(
        "gpt-5.4",
        "openai",
        O200K,
        1_050_000,
        128_000,
        2.50,
        15.00,
        0.25,
        long_context_threshold=272_000,
        long_input_price_per_mtok=5.00,
        long_output_price_per_mtok=22.50,
    ),
    _openai("gpt-5.4-mini", O200K, 400_000, 128_000, 0.75, 4.50, 0.075),
    _openai("gpt-5.4-nano", O200K, 400_000, 128_000, 0.20, 1.25, 0.02),
    # Any other gpt-5.x name: o200k_base (tiktoken maps the gpt-5 prefix to it), the family's smallest
    # window, and no price, so cost() asks for one instead of guessing.
    ModelInfo("gpt-5.x", "openai", O200K, 400_000, 128_000, None, None, aliases=("gpt-5.*",)),
    _openai("gpt-5", O200K, 400_000, 128_000, 1.25, 10.00, 0.125),
    _openai("gpt-5-mini", O200K, 400_000, 128_000, 0.25, 2.00, 0.025),
    _openai("gpt-5-nano", O200K, 400_000, 128_000, 0.05, 0.40, 0.005),
    _openai("gpt-5-chat", O200K, 128_000, 16_384, 1.25, 10.00, 0.125),
    _openai("gpt-4.1", O200K, 1_047_576, 32_768, 2.00, 8.00, 0.50),
    _openai("gpt-4.1-mini", O200K, 1_047_576, 32_768, 0.40, 1.60, 0.10),
    _openai("gpt-4.1-nano", O200K, 1_047_576, 32_768, 0.10, 0.40, 0.025),
    _openai("gpt-4o", O200K, 128_000, 16_384, 2.50, 10.00, 1.25),
    _openai("gpt-4o-2024-05-13", O200K, 128_000, 4_096, 5.00, 15.00, None),
    _openai("gpt-4o-mini", O200K, 128_000, 16_384, 0.15, 0.60, 0.075),
    _openai("o1", O200K, 200_000, 100_000, 15.00, 60.00, 7.50),
    _openai("o1-preview", O200K, 128_000, 32_768, 15.00, 60.00, 7.50),
    _openai("o1-mini", O200K, 128_000, 65_536, 1.10, 4.40, 0.55),
    _openai("o3", O200K, 200_000, 100_000, 2.00, 8.00, 0.50),
    _openai("o3-mini", O200K, 200_000, 100_000, 1.10, 4.40, 0.55),
    _openai("o4-mini", O200K, 200_000, 100_000, 1.10, 4.40, 0.275),
    # --- OpenAI: cl100k_base ------------------------------------------------------
    _openai(
        "gpt-4-turbo",
        CL100K,
        128_000,
        4_096,
        10.00,
        30.00,
        None,
        "gpt-4-turbo-preview",
        "gpt-4-0125-preview",
        "gpt-4-1106-preview",
        "gpt-4-1106-vision-preview",
        "gpt-4-vision-preview",
    ),
    _openai("gpt-4", CL100K, 8_192, 8_192, 30.00, 60.00, None),
    _openai("gpt-4-32k", CL100K, 32_768, 32_768, 60.00, 120.00, None),
    _openai("gpt-3.5-turbo", CL100K, 16_385, 4_096, 0.50, 1.50, None, "gpt-35-turbo"),
    _openai("text-embedding-3-small", CL100K, 8_191, 0, 0.02, 0.0, None),
    _openai("text-embedding-3-large", CL100K, 8_191, 0, 0.13, 0.0, None),
    _openai("text-embedding-ada-002", CL100K, 8_191, 0, 0.10, 0.0, None),
    # --- Anthropic (no public tokenizer for Claude 3+) ------------------------------
    # platform.claude.com/docs models overview and per-model pages (read 2026-11-30); cache reads are
    # a tenth of the input price. Haiku 5.5 is priced in tiers ("from $0.10 / $0.50"): no single list price.
    _claude("claude-fable-5-1", 1_000_000, 128_000, 10.00, 50.00, 1.00),
    _claude("claude-fable-5", 1_000_000, 128_000, 10.00, 50.00, 1.00),
    _claude("claude-opus-5-5", 1_000_000, 128_000, 4.00, 20.00, 0.40),
    _claude("claude-opus-5", 1_000_000, 128_000, 5.00, 25.00, 0.50),
    _claude("claude-sonnet-5-5", 1_000_000, 128_000, 2.00, 10.00, 0.20),
    _claude("claude-sonnet-5", 1_000_000, 128_000, 2.00, 10.00, 0.20),
    ModelInfo("claude-haiku-5-5", "anthropic", None, 1_000_000, 128_000, None, None),
    _claude("claude-opus-4-8", 1_000_000, 128_000, 5.00, 25.00, 0.50),
    _claude("claude-opus-4-7", 1_000_000, 128_000, 5.00, 25.00, 0.50),
    _claude("claude-opus-4-6", 1_000_000, 128_000, 5.00, 25.00, 0.50),
    _claude("claude-opus-4-5", 200_000, 64_000, 5.00, 25.00, 0.50),
    _claude("claude-opus-4-1", 200_000, 32_000, 15.00, 75.00, 1.50),
    _claude("claude-opus-4", 200_000, 32_000, 15.00, 75.00, 1.50, "claude-opus-4-0", "claude-4-opus"),
    _claude("claude-sonnet-4-6", 1_000_000, 128_000, 3.00, 15.00, 0.30),
    _claude("claude-sonnet-4-5", 200_000, 64_000, 3.00, 15.00, 0.30),
    _claude("claude-sonnet-4", 200_000, 64_000, 3.00, 15.00, 0.30, "claude-sonnet-4-0", "claude-4-sonnet"),
    _claude("claude-haiku-4-5", 200_000, 64_000, 1.00, 5.00, 0.10),
    _claude("claude-3-7-sonnet", 200_000, 64_000, 3.00, 15.00, 0.30),
    _claude("claude-3-5-sonnet", 200_000, 8_192, 3.00, 15.00, 0.30),
    _claude("claude-3-5-haiku", 200_000, 8_192, 0.80, 4.00, 0.08),
    _claude("claude-3-opus", 200_000, 4_096, 15.00, 75.00, 1.50),
    _claude("claude-3-sonnet", 200_000, 4_096, 3.00, 15.00, None),
    _claude("claude-3-haiku", 200_000, 4_096, 0.25, 1.25, 0.03),
    # --- Google Gemini (no public tokenizer); long = (threshold, input, output) -----
    # ai.google.dev/gemini-api/docs/models/<name> (read 2026-11-30) for windows and output limits; the
    # Gemini 3.x Flash price is the introductory one that ai.google.dev lists through 2026-12-31.
    _gemini("gemini-3.1-pro", 1_048_576, 65_536, 2.00, 12.00, (200_000, 4.00, 18.00)),
    _gemini("gemini-3-pro", 1_048_576, 65_536, 2.00, 12.00, (200_000, 4.00, 18.00)),
    _gemini("gemini-3.8-flash", 1_048_576, 65_536, 0.75, 3.75),
    _gemini("gemini-2.5-pro", 1_048_576, 65_536, 1.25, 10.00, (200_000, 2.50, 15.00)),
    _gemini("gemini-2.5-flash", 1_048_576, 65_536, 0.30, 2.50),
    _gemini("gemini-2.5-flash-lite", 1_048_576, 65_536, 0.10, 0.40),
    _gemini("gemini-2.0-flash", 1_048_576, 8_192, 0.10, 0.40),
    _gemini("gemini-2.0-flash-lite", 1_048_576, 8_192, 0.075, 0.30),
    _gemini("gemini-1.5-pro", 2_097_152, 8_192, 1.25, 5.00, (128_000, 2.50, 10.00)),
    _gemini("gemini-1.5-flash", 1_048_576, 8_192, 0.075, 0.30, (128_000, 0.15, 0.60)),
    _gemini("gemini-1.5-flash-8b", 1_048_576, 8_192, 0.0375, 0.15, (128_000, 0.075, 0.30)),
    # --- Meta Llama (open weights; exact with the user's tokenizer.json) ------------
    _open(
        "llama-3",
        "meta",
        8_192,
        4_096,
        "meta-llama/Meta-Llama-3-8B-Instruct",
        *_family("llama-3", "meta-llama-3", "llama3"),
    ),
    _open(
        "llama-3.1",
        "meta",
        131_072,
        8_192,
        "meta-llama/Llama-3.1-8B-Instruct",
        *_family("llama-3.1", "meta-llama-3.1", "llama3.1", "llama3-1"),
    ),
    _open(
        "llama-3.2",
        "meta",
        131_072,
        8_192,
        "meta-llama/Llama-3.2-3B-Instruct",
        *_family("llama-3.2", "meta-llama-3.2", "llama3.2", "llama3-2"),
    ),
    _open(
        "llama-3.3",
        "meta",
        131_072,
        8_192,
        "meta-llama/Llama-3.3-70B-Instruct",
        *_family("llama-3.3", "meta-llama-3.3", "llama3.3", "llama3-3"),
    ),
    _open(
        "llama-4-scout",
        "meta",
        10_485_760,
        8_192,
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        *_family("llama-4-scout", "llama4-scout"),
    ),
    _open(
        "llama-4-maverick",
        "meta",
        1_048_576,
        8_192,
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        *_family("llama-4-maverick", "llama4-maverick"),
    ),
    # --- Mistral (API list prices; open versions exact with tokenizer.json) ---------
    _open(
        "mistral-large",
        "mistral",
        131_072,
        8_192,
        "mistralai/Mistral-Large-Instruct-2411",
        "mistral-large-*",
        prices=(2.00, 6.00),
    ),
    _open("mistral-medium", "mistral", 131_072, 8_192, None, "mistral-medium-*", prices=(0.40, 2.00)),
    _open(
        "mistral-small",
        "mistral",
        131_072,
        8_192,
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        "mistral-small-*",
        prices=(0.10, 0.30),
    ),
    _open("codestral", "mistral", 262_144, 8_192, None, "codestral-*", prices=(0.30, 0.90)),
    _open("mistral-medium-3.5", "mistral", 262_144, 32_768, None, prices=(1.50, 7.50)),
    _open("magistral-medium", "mistral", 131_072, 32_768, None, "magistral-medium-*", prices=(2.00, 5.00)),
    _open("magistral-small", "mistral", 131_072, 32_768, None, "magistral-small-*", prices=(0.50, 2.00)),
    _open(
        "ministral-8b",
        "mistral",
        131_072,
        8_192,
        "mistralai/Ministral-8B-Instruct-2410",
        "ministral-8b-*",
        prices=(0.10, 0.10),
    ),
    _open("ministral-3b", "mistral", 131_072, 8_192, None, "ministral-3b-*", prices=(0.04, 0.04)),
    # --- Qwen API (Alibaba Model Studio; prices of the smallest context tier, larger prompts cost more) ----
    ModelInfo("qwen3-max", "qwen", None, 262_144, 65_536, 1.20, 6.00),
    ModelInfo("qwen3.8-max", "qwen", None, 991_000, 128_000, 2.00, 6.00),
    # --- Qwen (open weights; native windows, YaRN extends both to 131,072) ----------
    _open("qwen2.5", "qwen", 32_768, 8_192, "Qwen/Qwen2.5-7B-Instruct", *_family("qwen2.5", "qwen-2.5")),
    _open("qwen3", "qwen", 32_768, 8_192, "Qwen/Qwen3-8B", *_family("qwen3", "qwen-3")),
    # --- DeepSeek (API list prices, cache-hit price as cached) ----------------------
    ModelInfo(
        "deepseek-chat",
        "deepseek",
        None,
        128_000,
        8_192,
        0.28,
        0.42,
        0.028,
        aliases=("deepseek-v3", "deepseek-v3.1", "deepseek-v3.2", "deepseek-v3.2-exp"),
        hf_tokenizer="deepseek-ai/DeepSeek-V3",
    ),
    ModelInfo(
        "deepseek-reasoner",
        "deepseek",
        None,
        128_000,
        65_536,
        0.28,
        0.42,
        0.028,
        aliases=("deepseek-r1",),
        hf_tokenizer="deepseek-ai/DeepSeek-R1",
    ),
)
