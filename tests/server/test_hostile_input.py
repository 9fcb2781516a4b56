"""Hostile input gets a 4xx naming the problem and stores nothing; nothing the server
accepted fails to read back; errors never show credentials."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from loci import Loci, ProviderError, ValidationError
from loci.checks import MAX_DEPTH, check_json, check_name
from loci.llm import make_chat_model

JSON = {"Content-Type": "application/json"}
SURROGATE = '"a\\ud800b"'  # valid JSON, but no valid Unicode text
pytestmark = pytest.mark.real_clock


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def send(client: TestClient, method: str, path: str, body: str, **extra: Any) -> Any:
    return client.request(method, path, content=body, headers={**JSON, **extra.pop(
        "headers", {})}, **extra)


CASES = [
    ("POST", "/api/sessions/s/events", f'{{"role":"user","content":{SURROGATE}}}', {}),
    ("POST", "/api/memories", f'{{"content":{SURROGATE},"type":"sticky"}}', {}),
    ("POST", "/api/memories", f'{{"content":"fine text","tags":[{SURROGATE}]}}', {}),
    ("PUT", "/api/state/k", f'{{"value":{SURROGATE}}}', {}),
    ("PUT", "/api/kb/doc", f'{{"content":{SURROGATE}}}', {"params": {"path": "/a.md"}}),
    ("POST", "/api/sessions/s/context", f'{{"message":{SURROGATE}}}', {}),
    ("POST", "/v1/chat/completions",
     f'{{"model":"m","messages":[{{"role":"user","content":{SURROGATE}}}]}}',
     {"headers": {"X-Loci-Session": "p"}}),
    ("POST", "/v1/chat/completions",
     '{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant",'
     '"content":null,"tool_calls":[5]},{"role":"tool","tool_call_id":"x","content":"r"}]}',
     {"headers": {"X-Loci-Session": "p"}}),
    ("POST", "/api/sessions/s/events",
     json.dumps({"role": "user", "content": "x", "metadata": nested(300)}), {}),
    ("PUT", "/api/kb/doc", json.dumps({"content": "x", "metadata": nested(300)}),
     {"params": {"path": "/b.md"}}),
    ("POST", "/api/sessions/s/import",
     '{"type":"message","role":"user","content":"x","metadata":' + '{"a":' * 1100 + "1"
     + "}" * 1100 + "}", {}),
    ("POST", "/api/sessions/s/import", '{"type":"tool_call","toolName":5,"toolCallId":7}', {}),
    ("POST", "/api/sessions/s/import",
     '{"type":"message","role":"user","content":"x","timestamp":"0001-01-01T00:00:00+14:00"}',
     {}),
    ("POST", "/api/memories", '{"content":"hello there friend","type":"sticky"}',
     {"headers": {"X-Loci-User": "u" * 201}}),
]


@pytest.mark.parametrize(("method", "path", "body", "extra"), CASES)
def test_hostile_input_is_refused_and_stores_nothing(
        client: TestClient, home: Path, method: str, path: str, body: str,
        extra: dict[str, Any]) -> None:
    answer = send(client, method, path, body, **extra)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["message"]
    with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
        assert loci.sessions() == [] and loci.memories() == [] and loci.state() == []
        assert loci.knowledge.ls("/") == []


def test_a_stateless_mcp_endpoint_opens_no_stream(client: TestClient) -> None:
    for method in ("GET", "DELETE"):
        answer = client.request(method, "/mcp")
        assert answer.status_code == 405 and answer.headers["allow"] == "POST"


def test_a_user_header_is_read_as_utf8(client: TestClient, home: Path) -> None:
    headers = {**JSON, "X-Loci-User": "José".encode()}
    answer = client.post("/api/memories", content='{"content":"Vive em Lisboa."}',
                         headers=headers)  # type: ignore[arg-type]
    assert answer.status_code == 201
    with Loci.open(store=f"sqlite:///{home / 'loci.db'}", user="José") as loci:
        assert [m.content for m in loci.memories()] == ["Vive em Lisboa."]


def test_what_is_accepted_reads_back(home: Path) -> None:
    deepest = nested(MAX_DEPTH - 2)  # the leaf at the deepest level allowed
    with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
        loci.add("s", "user", "deep", meta=deepest)
        assert loci.events("s")[0].metadata["meta"] == deepest
    with pytest.raises(ValidationError, match="deeper"):
        check_json("metadata", nested(MAX_DEPTH + 1))
    for bad in ({1: "x"}, {"n": float("nan")}, {"n": 2 ** 70}, {"s": object()}):
        with pytest.raises(ValidationError):
            check_json("metadata", bad)
    check_name("user", "é" * 100)  # 200 bytes: a file name component fits
    with pytest.raises(ValidationError, match="bytes"):
        check_name("user", "é" * 101)


def test_provider_errors_never_show_credentials() -> None:
    chat = make_chat_model("openai", model="m", base_url="http://alice:hunter2@127.0.0.1:9/v1",
                           api_key="sk-secret")
    with pytest.raises(ProviderError) as error:
        chat.complete([{"role": "user", "content": "hi"}])
    text = str(error.value)
    assert "hunter2" not in text and "alice" not in text and "sk-secret" not in text
    assert "127.0.0.1:9" in text
