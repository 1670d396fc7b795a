"""Cache writes in usage and prices: OpenAI's ``cache_write_tokens`` and Anthropic's 5-minute/1-hour split.

OpenAI reports writes inside the prompt's tokens (``prompt_tokens_details`` / ``input_tokens_details``) and
bills them at 1.25x the input price from the GPT-5.6 family on (earlier models write for free); Anthropic
reports them on top of ``input_tokens``, split by lifetime in ``cache_creation``, and bills the 5-minute
writes at 1.25x and the 1-hour writes at 2x the input price.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import InvalidMessageError
from convmem.tokens import cost, lookup_model
from convmem.usage import Usage, parse_usage

from .._quick import examples


def test_chat_usage_reads_cache_write_tokens() -> None:
    usage = {
        "prompt_tokens": 5000,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 3000},
    }
    assert parse_usage(usage) == Usage(5000, 20, 1024, 3000)


def test_responses_usage_reads_cache_write_tokens() -> None:
    usage = {
        "input_tokens": 4000,
        "output_tokens": 7,
        "input_tokens_details": {
            "cached_tokens": 0,
            "cache_write_tokens": 3207,
            "cache_write_tokens_details": {"ttl_30m_tokens": 3207, "ttl_12h_tokens": 0},
        },
    }
    assert parse_usage(usage) == Usage(4000, 7, 0, 3207)


def test_anthropic_usage_reads_the_lifetime_split() -> None:
    usage = {
        "input_tokens": 50,
        "output_tokens": 9,
        "cache_read_input_tokens": 2000,
        "cache_creation_input_tokens": 1500,
        "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 1000},
    }
    assert parse_usage(usage) == Usage(3550, 9, 2000, 1500, 1000)


def test_anthropic_split_without_the_total_still_counts_the_writes() -> None:
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation": {"ephemeral_1h_input_tokens": 700}}
    assert parse_usage(usage) == Usage(710, 1, 0, 700, 700)


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        (
            {"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cache_write_tokens": 101}},
            "prompt_tokens_details",
        ),
        (
            {
                "input_tokens": 1,
                "output_tokens": 1,
                "cache_creation_input_tokens": 10,
                "cache_creation": {"ephemeral_1h_input_tokens": 11},
            },
            "cache_creation",
        ),
        ({"input_tokens": 1, "output_tokens": 1, "input_tokens_details": {"cache_write_tokens": -1}}, "cache_write"),
    ],
)
def test_impossible_cache_counts_are_refused_naming_the_field(usage: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidMessageError, match=field):
        parse_usage(usage)


def test_gpt56_writes_bill_at_a_quarter_more_and_gpt4o_writes_are_free() -> None:
    terra = lookup_model("gpt-5.6-terra")
    assert terra.input_price_per_mtok is not None
    assert terra.cache_write_price_per_mtok == pytest.approx(terra.input_price_per_mtok * 1.25)
    assert terra.explicit_cache_breakpoints
    # 1M input tokens of which 400k written and 100k read: 500k fresh + 400k at 1.25x + 100k at the read price.
    expected = (500_000 * 2.00 + 400_000 * 2.50 + 100_000 * 0.20) / 1e6
    assert cost(terra, 1_000_000, 0, 100_000, 400_000) == pytest.approx(expected)
    gpt4o = lookup_model("gpt-4o")
    assert gpt4o.cache_write_price_per_mtok is None
    assert not gpt4o.explicit_cache_breakpoints
    assert cost(gpt4o, 1_000_000, 0, 0, 400_000) == pytest.approx(cost(gpt4o, 1_000_000, 0))


def test_anthropic_1h_writes_bill_at_twice_the_input_price() -> None:
    sonnet = lookup_model("claude-sonnet-4-5")
    assert sonnet.cache_write_1h_price_per_mtok == pytest.approx(6.00)
    # 100 fresh, 1000 5-minute writes at 3.75, 2000 1-hour writes at 6.00.
    expected = (100 * 3.00 + 1000 * 3.75 + 2000 * 6.00) / 1e6
    assert cost(sonnet, 3100, 0, 0, 3000, 2000) == pytest.approx(expected)


def test_more_1h_writes_than_writes_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="cache_write_1h_input_tokens"):
        cost("claude-sonnet-4-5", 100, 0, 0, 10, 11)


@given(
    fresh=st.integers(0, 10**6),
    read=st.integers(0, 10**6),
    short=st.integers(0, 10**6),
    long=st.integers(0, 10**6),
)
@settings(max_examples=examples(200), deadline=None)
def test_an_anthropic_bill_is_the_sum_of_its_meters(fresh: int, read: int, short: int, long: int) -> None:
    """Whatever the split, the bill is each meter's tokens at its own price (the registry's)."""
    info = lookup_model("claude-opus-4-5")
    usage = parse_usage(
        {
            "input_tokens": fresh,
            "output_tokens": 0,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": short + long,
            "cache_creation": {"ephemeral_5m_input_tokens": short, "ephemeral_1h_input_tokens": long},
        }
    )
    billed = cost(
        info,
        usage.input_tokens,
        0,
        usage.cached_input_tokens,
        usage.cache_write_input_tokens,
        usage.cache_write_1h_input_tokens,
    )
    assert billed == pytest.approx((fresh * 5.00 + read * 0.50 + short * 6.25 + long * 10.00) / 1e6)


def test_memory_stats_count_and_price_the_1h_writes() -> None:
    memory = Memory(model="claude-sonnet-4-5")
    memory.add({"role": "user", "content": "hi"})
    memory.record_usage(
        {
            "input_tokens": 100,
            "output_tokens": 10,
            "cache_creation_input_tokens": 3000,
            "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
        }
    )
    stats = memory.stats()
    assert (stats.cache_write_tokens, stats.cache_write_1h_tokens) == (3000, 2000)
    assert stats.cost_usd == pytest.approx((100 * 3.00 + 1000 * 3.75 + 2000 * 6.00 + 10 * 15.00) / 1e6)
    # Writes cost more than fresh input: the "saving" against the uncached price is negative.
    assert stats.cache_savings_usd == pytest.approx(-(1000 * 0.75 + 2000 * 3.00) / 1e6)


def test_memory_prices_gpt56_writes_from_the_registry() -> None:
    memory = Memory(model="gpt-5.6-sol")
    memory.add({"role": "user", "content": "hi"})
    memory.record_usage(
        {
            "prompt_tokens": 10_000,
            "completion_tokens": 0,
            "prompt_tokens_details": {"cached_tokens": 2_000, "cache_write_tokens": 8_000},
        }
    )
    stats = memory.stats()
    assert stats.cache_write_tokens == 8_000
    assert stats.cost_usd == pytest.approx((2_000 * 0.40 + 8_000 * 5.00) / 1e6)
