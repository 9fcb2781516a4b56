"""A real chat server on 127.0.0.1 for the provider tests (no mocks).

The first path segment of the base URL picks the behaviour (``/ok/v1``, ``/fail/v1``,
...). Before answering, the server checks the request it received the way the real
API would (path, headers, body shape) and answers HTTP 400 with the reason if it is
wrong, so a malformed request fails the test with a readable ProviderError.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

OPENAI_STREAM = ["Hel", "lo", " world"]
ANTHROPIC_STREAM = ["Hi", " from", " Claude"]


@dataclass
class ChatServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    def base(self, mode: str, suffix: str = "/v1") -> str:
        return f"{self.url}/{mode}{suffix}"

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]


def check_openai(path: str, headers: dict[str, str], body: Any) -> str | None:
    if not path.endswith("/v1/chat/completions"):
        return f"unexpected path {path}"
    if "application/json" not in headers.get("content-type", ""):
        return "content-type must be application/json"
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "body needs a model"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "body needs a non-empty messages list"
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            return f"bad message {m!r}"
    if "stream" in body and body["stream"] is not True:
        return "stream must be true when present"
    return None


def check_anthropic(path: str, headers: dict[str, str], body: Any) -> str | None:
    if not path.endswith("/v1/messages") or path.endswith("/v1/v1/messages"):
        return f"unexpected path {path}"
    if headers.get("anthropic-version") != "2023-06-01":
        return "anthropic-version header missing"
    if not headers.get("x-api-key"):
        return "x-api-key header missing"
    if "authorization" in headers:
        return "Anthropic takes x-api-key, not Authorization"
    if not isinstance(body, dict) or not isinstance(body.get("max_tokens"), int):
        return "max_tokens is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or messages[0].get("role") != "user":
        return "messages must start with a user turn"
    for previous, current in itertools.pairwise(messages):
        if previous["role"] == current["role"]:
            return "roles must alternate"
    for m in messages:
        if m.get("role") not in ("user", "assistant") or not m.get("content"):
            return f"bad message {m!r}"
    if "system" in body and not isinstance(body["system"], str):
        return "system must be a string"
    return None


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def openai_answer(mode: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    stream = body.get("stream") is True
    if mode == "ok" and not stream:
        payload = {
            "id": "chatcmpl-1", "object": "chat.completion", "model": "served-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Hello from the server"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
        return 200, "application/json", json.dumps(payload).encode()
    if mode == "ok":
        chunks: list[tuple[str | None, Any]] = [
            (None, {"choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
        chunks += [(None, {"choices": [{"index": 0, "delta": {"content": t}}]})
                   for t in OPENAI_STREAM]
        chunks += [(None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                   (None, "[DONE]"), (None, {"choices": [{"delta": {"content": "AFTER"}}]})]
        return 200, "text/event-stream", b": keep-alive\n\n" + sse(chunks)
    if mode == "nousage":
        payload = {"choices": [{"message": {"role": "assistant", "content": None}}]}
        return 200, "application/json", json.dumps(payload).encode()
    if mode == "fail":
        return 500, "application/json", b'{"error": {"message": "model overloaded, try again"}}'
    if mode == "unauthorized":
        return 401, "application/json", (
            b'{"error": {"message": "Incorrect API key provided: sk-secret-123"}}')
    if mode == "badjson":
        return 200, "application/json", b"<html>this is not json</html>"
    if mode == "nochoices":
        return 200, "application/json", b'{"object": "list", "data": []}'
    if mode == "badsse":
        return 200, "text/event-stream", b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n' \
            b"data: {not json\n\n"
    if mode == "streamerror":
        return 200, "text/event-stream", sse([(None, {"error": {"message": "context too long"}})])
    return 404, "text/plain", b"no such mode"


def anthropic_answer(mode: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    stream = body.get("stream") is True
    if mode == "ok" and not stream:
        payload = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-served",
            "content": [{"type": "text", "text": "Hi "}, {"type": "tool_use", "id": "t"},
                        {"type": "text", "text": "there"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 3},
        }
        return 200, "application/json", json.dumps(payload).encode()
    if mode == "ok":
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 9}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("ping", {"type": "ping"}),
        ]
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": t}})
                   for t in ANTHROPIC_STREAM]
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                     "delta": {"type": "input_json_delta", "partial_json": "{"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 3}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        return 200, "text/event-stream", sse(events)
    if mode == "overloaded":
        return 529, "application/json", (
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}')
    if mode == "badjson":
        return 200, "application/json", b"not json at all"
    if mode == "nocontent":
        return 200, "application/json", b'{"type": "message"}'
    if mode == "badsse":
        return 200, "text/event-stream", b"event: content_block_delta\ndata: {oops\n\n"
    if mode == "streamerror":
        return 200, "text/event-stream", sse([("error", {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}})])
    return 404, "text/plain", b"no such mode"


@pytest.fixture(scope="session")
def chat_server() -> Iterator[ChatServer]:
    state = ChatServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            state.requests.append({"path": self.path, "headers": headers, "body": body})
            mode = self.path.strip("/").split("/")[0]
            anthropic = self.path.endswith("/messages")
            check = check_anthropic if anthropic else check_openai
            problem = check(self.path, headers, body)
            if problem is not None:
                status, kind = 400, "application/json"
                payload = json.dumps({"error": {"message": f"server check: {problem}"}}).encode()
            elif mode == "slow":
                time.sleep(1.0)
                status, kind, payload = 200, "application/json", b"{}"
            else:
                answer = anthropic_answer if anthropic else openai_answer
                status, kind, payload = answer(mode, body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (timeout tests)
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
