"""No credential in any error, chained exception, repr or convmem log line: planted secrets, every client and store."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from convmem import ConvmemError
from convmem.errors import redact
from convmem.messages import Message

from .stores._servers import drop_prefixes, drop_schemas, prefix_for, schema_for

SECRET = "hunter2-Pa55word"
KEY = "sk-planted0123456789abcdef"
QUERY = "q-secret-77AbZ"


class _Echo(BaseHTTPRequestHandler):
    """A provider that echoes what it was sent (the key, the URL) in a 401, as some proxies do."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(
            {"error": {"message": f"bad key {self.headers.get('Authorization')} for {self.path}", "code": "bad"}}
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://user:{SECRET}@127.0.0.1:{server.server_address[1]}/v1?api-key={QUERY}"
    server.shutdown()
    server.server_close()


def _texts(exc: BaseException) -> Iterator[str]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield str(item)
        yield repr(item)
        yield from (str(a) for a in item.args)
        yield from (str(v) for v in vars(item).values()) if hasattr(item, "__dict__") else ()
        todo += [item.__cause__, item.__context__]


def _clean(*texts: str) -> None:
    for text in texts:
        for secret in (SECRET, KEY, QUERY):
            assert secret not in text, text


def _raises_clean(call: object, caplog: pytest.LogCaptureFixture) -> ConvmemError:
    def run() -> None:
        result = call()  # type: ignore[operator]
        if asyncio.iscoroutine(result):
            asyncio.run(result)

    with caplog.at_level(logging.DEBUG), pytest.raises(ConvmemError) as info:
        run()
    _clean(*_texts(info.value))
    _clean(*(r.getMessage() for r in caplog.records if r.name.startswith("convmem")))
    return info.value


def test_redact_removes_every_form_of_credential() -> None:
    text = (
        f"http://u:{SECRET}@h/v1?api-key={QUERY}&x=1 Bearer {KEY} host=h password={SECRET} "
        f"redis://:{SECRET}@h:6379/0 {KEY}"
    )
    out = redact(text)
    _clean(out)
    assert "x=1" in out
    assert "host=h" in out
    assert redact("plain words, no-secrets here") == "plain words, no-secrets here"


def test_the_llm_clients_never_show_the_key(echo_url: str, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("openai")
    from convmem.llm.client import OpenAIChat
    from convmem.llm.retry import RetryPolicy
    from convmem.llm.summarizer import OpenAICompatibleSummarizer

    chat = OpenAIChat("gpt-4o-mini", base_url=echo_url, api_key=KEY, retry=RetryPolicy(max_retries=0))
    _clean(repr(chat), chat.endpoint)
    _raises_clean(lambda: chat.complete([{"role": "user", "content": "hi"}], max_tokens=5), caplog)

    async def once() -> None:
        try:
            await chat.acomplete([{"role": "user", "content": "hi"}], max_tokens=5)
        finally:
            await chat.aclose()

    _raises_clean(once, caplog)
    summarizer = OpenAICompatibleSummarizer(
        "gpt-4o-mini", base_url=echo_url, api_key=KEY, retry=RetryPolicy(max_retries=0)
    )
    _clean(repr(summarizer))
    error = _raises_clean(lambda: summarizer.summarize(None, [Message(role="user", content="hi")], 50), caplog)
    assert "401" in str(error)
    chat.close()
    summarizer.close()


def test_the_embedder_never_shows_the_key(echo_url: str, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("httpx")
    from convmem.longterm.recall.embedders import OpenAIEmbedder

    embedder = OpenAIEmbedder(base_url=echo_url, api_key=KEY, dim=4)
    _clean(repr(embedder), embedder.endpoint)
    error = _raises_clean(lambda: embedder.embed(["hello"]), caplog)
    assert "401" in str(error)
    embedder.close()
    closed = OpenAIEmbedder(base_url=f"http://u:{SECRET}@127.0.0.1:9/v1?key={QUERY}", api_key=KEY, dim=4)
    _raises_clean(lambda: closed.embed(["hello"]), caplog)  # connection refused names the URL
    closed.close()


def test_postgres_and_redis_stores_never_show_the_password(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from convmem.stores.postgres import PostgresStore
    from convmem.stores.redis import RedisStore

    schema = schema_for(tmp_path)
    try:
        store = PostgresStore(f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test", schema=schema, max_size=1)
        _clean(repr(store), repr(store.settings), str(store.settings))
        _raises_clean(lambda: store.get_session("nope"), caplog)
        store.close()
    finally:
        drop_schemas({schema})
    _raises_clean(
        lambda: PostgresStore(f"postgresql://postgres:{SECRET}@127.0.0.1:1/test", schema=schema, timeout=1), caplog
    )
    _raises_clean(lambda: PostgresStore(f"host=127.0.0.1 port=1 password={SECRET} dbname=x", timeout=1), caplog)
    prefix = prefix_for(tmp_path)
    try:
        store = RedisStore(f"redis://:{SECRET}@127.0.0.1:6379/0", prefix=prefix)  # a server without AUTH accepts it
        _clean(repr(store), repr(store.settings), str(store.settings))
        store.close()
        _raises_clean(lambda: RedisStore(f"redis://:{SECRET}@127.0.0.1:1/0", prefix=prefix, timeout=1), caplog)
        from convmem.stores.redis._db import Settings

        _clean(repr(Settings.of(f"redis://:{SECRET}@127.0.0.1:6379/0", 1.0, 0.0, 4)))
    finally:
        drop_prefixes({prefix})


def test_the_key_ring_never_shows_a_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import base64
    import pickle

    from convmem.errors import ConfigurationError
    from convmem.stores import SQLiteStore
    from convmem.stores.base import AppendRequest
    from convmem.stores.encrypted import EncryptedStore, KeyRing

    raw = bytes(range(100, 132))
    forms = [raw.hex(), base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("="), repr(raw)]

    def clean(*texts: str) -> None:
        for text in texts:
            for form in forms:
                assert form not in text, text

    def raises_clean(call: Any) -> ConvmemError:
        with caplog.at_level(logging.DEBUG), pytest.raises(ConvmemError) as info:
            call()
        clean(*_texts(info.value), *(r.getMessage() for r in caplog.records if r.name.startswith("convmem")))
        return info.value

    ring = KeyRing({"k1": raw})
    inner = SQLiteStore(tmp_path / "db.sqlite")
    store = EncryptedStore(inner, ring)
    store.append(AppendRequest("chat", [(Message(role="user", content="hi", id="m0"), 2)], user_id="alice"))
    data_key = store._keys.current("alice")
    clean(repr(ring), str(ring), repr(store), repr(store.facts()), repr(store.blocks()), repr(store._keys))
    clean(repr(data_key), data_key.secret.hex())  # the data key's own repr hides it too
    assert data_key.secret.hex() not in repr(data_key)
    with pytest.raises(TypeError):
        pickle.dumps(ring)
    # A wrong key of the same id, a short key, a key file whose content is damaged: named, and never echoed.
    wrong = bytes(range(1, 33))
    forms.append(wrong.hex())
    raises_clean(lambda: EncryptedStore(inner, KeyRing({"k1": wrong})).load("chat", user_id="alice"))
    error = raises_clean(lambda: KeyRing({"k1": raw[:20]}))
    assert isinstance(error, ConfigurationError)
    bad = tmp_path / "keys.json"
    bad.write_text('{"keys": {"k1": "' + base64.b64encode(raw).decode() + '!"}}')
    raises_clean(lambda: KeyRing.from_file(bad))
    bad.write_text('{"keys": ["' + base64.b64encode(raw).decode() + '"]}')
    raises_clean(lambda: KeyRing.from_file(bad))
    store.close()
