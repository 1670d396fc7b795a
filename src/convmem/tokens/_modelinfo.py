"""What convmem knows about one model: :class:`ModelInfo` (the catalog's row type)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelInfo"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What convmem knows about one model (family).

    Attributes:
        name: canonical name, e.g. ``gpt-4o`` or ``claude-sonnet-4-5``.
        provider: ``openai``, ``anthropic``, ``google``, ``meta``, ``mistral``, ``qwen`` or ``deepseek``.
        tokenizer: the tiktoken vocabulary that counts it exactly offline, or None when
            no exact offline tokenizer exists.
        context_window: maximum tokens of input plus output.
        max_output_tokens: maximum tokens of one reply (for open weights, which the
            serving stack limits, a conventional 8,192; 0 for embedding models).
        input_price_per_mtok: list price in USD per million input tokens, or None.
        output_price_per_mtok: list price in USD per million output tokens, or None.
        cached_input_price_per_mtok: price of cache-hit input tokens; None bills them at
            the input price.
        cache_write_price_per_mtok: price of input tokens written to the prompt cache (Anthropic's
            5-minute cache and OpenAI's GPT-5.6 family and later: 1.25x the input price); None bills
            them at the input price (OpenAI's models before GPT-5.6 write for free).
        cache_write_1h_price_per_mtok: price of input tokens written to Anthropic's 1-hour cache
            (2x the input price); None bills them at ``cache_write_price_per_mtok``.
        tool_prompt_tokens: the tokens of the system prompt the provider adds when a request has
            tools, as ``(tool_choice auto or none, tool_choice any or tool)`` (Anthropic publishes
            them per model); None when the provider adds none or publishes no count.
        explicit_cache_breakpoints: the model takes OpenAI's ``prompt_cache_breakpoint`` parts and
            ``prompt_cache_options`` (the GPT-5.6 family and later).
        long_context_threshold: prompts longer than this many tokens are billed at the
            long-context prices (Gemini 1.5/2.5 Pro), or None.
        long_input_price_per_mtok: input price above the threshold.
        long_output_price_per_mtok: output price above the threshold.
        aliases: other exact names, and fnmatch patterns (containing ``*``), that
            resolve to this model.
        hf_tokenizer: Hugging Face repo whose ``tokenizer.json`` counts it exactly.
    """

    name: str
    provider: str
    tokenizer: str | None
    context_window: int
    max_output_tokens: int
    input_price_per_mtok: float | None
    output_price_per_mtok: float | None
    cached_input_price_per_mtok: float | None = None
    long_context_threshold: int | None = None
    long_input_price_per_mtok: float | None = None
    long_output_price_per_mtok: float | None = None
    aliases: tuple[str, ...] = ()
    hf_tokenizer: str | None = None
    cache_write_price_per_mtok: float | None = None
    cache_write_1h_price_per_mtok: float | None = None
    tool_prompt_tokens: tuple[int, int] | None = None
    explicit_cache_breakpoints: bool = False
