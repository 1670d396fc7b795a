"""HFTokenizerCounter with a tiny tokenizer.json built in the test (no downloads)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from convmem.errors import ConfigurationError
from convmem.messages import ImagePart, Message, ToolCall
from convmem.tokens import HFTokenizerCounter, TokenCounter, count_messages

tokenizers = pytest.importorskip("tokenizers")

VOCAB = ["[UNK]", "<|im_start|>", "<|im_end|>", "hello", "world", "user", "assistant", "system", "tool", "bob"]


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({word: i for i, word in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_counts_text_with_the_tokenizer(tokenizer_json: Path) -> None:
    counter = HFTokenizerCounter(tokenizer_json)
    assert isinstance(counter, TokenCounter)
    assert counter.exact
    assert counter.name == f"hf:{tokenizer_json}"
    assert counter.count_text("hello world") == 2
    assert counter.count_text("hello, strange world!") == 5  # punctuation and unknown words are tokens too
    assert counter.count_text("") == 0


def test_chatml_overhead(tokenizer_json: Path) -> None:
    counter = HFTokenizerCounter(tokenizer_json, template="chatml")
    # <|im_start|> user \n hello world <|im_end|> \n  ->  4 fixed + 1 role + 2 text
    assert counter.count_message(Message(role="user", content="hello world")) == 7
    assert counter.count_message(Message(role="user", content="hello", name="bob")) == 4 + 1 + 1 + 1 + 1
    assert counter.reply_priming == 3
    assert count_messages(counter, [Message(role="user", content="hello")]) == 4 + 1 + 1 + 3


def test_templates_and_overrides(tokenizer_json: Path) -> None:
    message = Message(role="assistant", content="hello world")
    assert HFTokenizerCounter(tokenizer_json, template="llama3").count_message(message) == 4 + 1 + 2
    assert HFTokenizerCounter(tokenizer_json, template="llama3").reply_priming == 5
    mistral = HFTokenizerCounter(tokenizer_json, template="mistral")
    assert mistral.count_message(message) == 2 + 2  # the role is not spelled out
    custom = HFTokenizerCounter(tokenizer_json, tokens_per_message=0, count_role=False, reply_priming=0)
    assert custom.count_message(message) == 2
    assert custom.reply_priming == 0


def test_tool_calls_and_images(tokenizer_json: Path) -> None:
    counter = HFTokenizerCounter(tokenizer_json, image_estimate=100)
    call = Message(role="assistant", tool_calls=(ToolCall("c1", "hello", "{}"),))
    # 4 + role + name(1) + arguments "{}" (one punctuation run) + 5 overhead
    assert counter.count_message(call) == 4 + 1 + 1 + 1 + 5
    image = Message(role="user", content=(ImagePart(url="https://example.com/a.png"),))
    assert counter.count_message(image) == 4 + 1 + 100


def test_missing_tokenizers_package_names_the_extra(tokenizer_json: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'convmem\[hf\]'"):
        HFTokenizerCounter(tokenizer_json)


def test_missing_or_bad_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not found"):
        HFTokenizerCounter(tmp_path / "nope.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigurationError, match="cannot load"):
        HFTokenizerCounter(bad)


def test_unknown_template(tokenizer_json: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown chat template"):
        HFTokenizerCounter(tokenizer_json, template="alpaca")  # type: ignore[arg-type]
