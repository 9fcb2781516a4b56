"""The fake provider (``loci.testing``) answering the provider clients' tests with
canned answers, good and broken (no mocks).

The first path segment of the base URL picks the answer (``/ok/v1``, ``/fail/v1``,
...). Before answering, the request is checked the way the real API would (path,
headers, body shape), and a wrong one answered HTTP 400 with the reason, so a malformed
request fails the test with a readable ProviderError.
"""

from __future__ import annotations

import itertools
import json
from email.message import Message
from typing import Any

import pytest

from loci.testing import FakeProvider, Fault, Request

OPENAI_STREAM = ["Hel", "lo", " world"]
ANTHROPIC_STREAM = ["Hi", " from", " Claude"]


#: The fake provider answering the client tests' canned modes (the ``chat_server`` fixture).
ChatServer = FakeProvider


def check_openai(path: str, headers: Message, body: Any) -> str | None:
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


def check_anthropic(path: str, headers: Message, body: Any) -> str | None:
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


def canned(request: Request) -> Fault:
    """The answer of the mode the first path segment names, once the request passed the
    checks of what the real API expects (else a 400 naming the problem)."""
    path, headers, body = request["path"], request["headers"], request["body"]
    anthropic = path.endswith("/messages")
    problem = (check_anthropic if anthropic else check_openai)(path, headers, body)
    if problem is not None:
        return Fault(400, json.dumps({"error": {"message": f"server check: {problem}"}}).encode())
    mode = path.strip("/").split("/")[0]
    if mode == "slow":
        return Fault(200, b"{}", delay=1.0)
    status, kind, payload = (anthropic_answer if anthropic else openai_answer)(mode, body)
    return Fault(status, payload, kind)


@pytest.fixture
def chat_server(upstream: FakeProvider) -> FakeProvider:
    """The fake provider (``tests/conftest.py``) answering the canned modes."""
    upstream.fault = canned
    return upstream
