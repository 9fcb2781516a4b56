"""OpenAICompatibleEmbedder against a real HTTP server on 127.0.0.1 (no mocks).

The server's behaviour is chosen by the first path segment of ``base_url``:
``/ok/v1`` answers like OpenAI (in reverse ``index`` order, vectors not normalised),
the others answer with errors or malformed bodies.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from loci.embeddings import HashEmbedder, OpenAICompatibleEmbedder, make_embedder
from loci.errors import ConfigError, ProviderError

DIM = 16
_reference = HashEmbedder(dim=DIM)


@dataclass
class Server:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    def base(self, mode: str) -> str:
        return f"{self.url}/{mode}/v1"


def _answer(mode: str, body: dict[str, Any]) -> tuple[int, bytes]:
    texts = body["input"]
    vectors = _reference.embed(texts) * 3.0  # not unit length: the client normalises
    data = [
        {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
        for i in range(len(texts))
    ]
    if mode == "ok":
        payload: Any = {"object": "list", "data": data[::-1], "model": body["model"]}
        return 200, json.dumps(payload).encode()
    if mode == "short":
        return 200, json.dumps({"data": data[:-1]}).encode()
    if mode == "wide":  # a different dimension on every call
        wide = [{"index": 0, "embedding": [1.0] * (DIM + len(texts))}] * len(texts)
        return 200, json.dumps({"data": wide}).encode()
    if mode == "nulls":
        return 200, json.dumps({"data": [{"embedding": [None, 1.0]}] * len(texts)}).encode()
    if mode == "badjson":
        return 200, b"<html>this is not json</html>"
    if mode == "nodata":
        return 200, b'{"result": []}'
    if mode == "unauthorized":
        return 401, b'{"error": {"message": "Incorrect API key provided"}}'
    if mode == "slow":
        time.sleep(1.0)
        return 200, b"{}"
    return 500, b"internal explosion"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    state = Server(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            mode = self.path.strip("/").split("/")[0]
            state.requests.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
            status, payload = _answer(mode, body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (timeout test)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_embeds_in_batches_in_input_order_and_normalises(server: Server) -> None:
    texts = [f"text number {i} about {w}" for i, w in enumerate(["cats", "dogs", "stocks"] * 3)]
    server.requests.clear()
    with OpenAICompatibleEmbedder(
        "test-model", base_url=server.base("ok"), api_key="sk-test", batch_size=4
    ) as emb:
        vectors = emb.embed(texts)
        assert emb.dim == DIM
        assert emb.name == "openai:test-model"
    assert vectors.shape == (9, DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, _reference.embed(texts), atol=1e-6)
    assert [len(r["body"]["input"]) for r in server.requests] == [4, 4, 1]
    assert all(r["body"]["model"] == "test-model" for r in server.requests)
    assert all(r["auth"] == "Bearer sk-test" for r in server.requests)
    assert all(r["path"] == "/ok/v1/embeddings" for r in server.requests)


def test_dim_is_discovered_with_one_probe(server: Server) -> None:
    with OpenAICompatibleEmbedder("m", base_url=server.base("ok") + "/") as emb:
        server.requests.clear()
        assert emb.dim == DIM
        assert emb.dim == DIM
        assert len(server.requests) == 1
        assert emb.embed([]).shape == (0, DIM)
        assert len(server.requests) == 1


def test_empty_strings_are_sent_as_a_space(server: Server) -> None:
    with OpenAICompatibleEmbedder("m", base_url=server.base("ok")) as emb:
        server.requests.clear()
        emb.embed(["", "x"])
    assert server.requests[0]["body"]["input"] == [" ", "x"]


def test_factory_builds_it(server: Server) -> None:
    emb = make_embedder("openai-compatible", model="m", base_url=server.base("ok"), api_key="")
    assert isinstance(emb, OpenAICompatibleEmbedder)
    try:
        assert emb.embed(["hi"]).shape == (1, DIM)
    finally:
        emb.close()


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", r"HTTP 500: internal explosion; the server failed"),
        ("unauthorized", r"HTTP 401: Incorrect API key provided; check the API key"),
        ("badjson", r"did not answer JSON .*base_url"),
        ("nodata", r"without a 'data' list"),
        ("short", r"returned 1 embeddings for 2 inputs"),
        ("nulls", r"non-finite"),
    ],
)
def test_server_errors_become_provider_errors(server: Server, mode: str, message: str) -> None:
    with (
        OpenAICompatibleEmbedder("m", base_url=server.base(mode)) as emb,
        pytest.raises(ProviderError, match=message),
    ):
        emb.embed(["a", "b"])


def test_dimension_change_is_an_error(server: Server) -> None:
    with OpenAICompatibleEmbedder("m", base_url=server.base("wide")) as emb:
        emb.embed(["a"])
        with pytest.raises(ProviderError, match="expected 17"):
            emb.embed(["a", "b"])
    with (
        OpenAICompatibleEmbedder("m", base_url=server.base("ok"), dim=DIM + 1) as emb,
        pytest.raises(ProviderError, match=f"returned {DIM}-dimensional"),
    ):
        emb.embed(["a"])


def test_timeout(server: Server) -> None:
    with (
        OpenAICompatibleEmbedder("m", base_url=server.base("slow"), timeout=0.2) as emb,
        pytest.raises(ProviderError, match=r"did not answer within 0\.2s"),
    ):
        emb.embed(["a"])


def test_connection_refused() -> None:
    with socket.socket() as sock:  # find a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        OpenAICompatibleEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1") as emb,
        pytest.raises(ProviderError, match=r"cannot reach .*check embedding\.base_url"),
    ):
        emb.embed(["a"])


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError):
        OpenAICompatibleEmbedder("")
    with pytest.raises(ConfigError):
        OpenAICompatibleEmbedder("m", base_url="localhost:11434/v1")
    with pytest.raises(ConfigError):
        OpenAICompatibleEmbedder("m", batch_size=0)
