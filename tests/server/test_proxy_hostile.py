"""Each class of failure the proxy fuzzer found (issue 47), one test each, with the real
app served by uvicorn and the package's fake provider as the upstream on loopback:
hostile requests get a 4xx in their face's error shape naming the field, broken upstream
replies a 502 (streamed: the API's error event), and a failed turn stores nothing."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loci import load_settings
from loci.server import create_app
from loci.testing import FakeProvider, Fault, Reply
from tests.server.conftest import LiveServer

KEY = "sk-UPSTREAM-SECRET-a1b2c3d4e5f6g7h8"
HEADERS = {"Content-Type": "application/json", "X-Loci-Session": "s"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "m", "input": "hi"}


class Proxy:
    def __init__(self, kind: str, base: str, db: Path, provider: FakeProvider) -> None:
        self.kind, self.base, self.db, self.provider = kind, base, db, provider
        self.reply: Reply = "fine"
        self.fault: Fault | None = None

    def post(self, path: str, body: dict[str, Any] | str) -> httpx.Response:
        text = body if isinstance(body, str) else json.dumps(body)
        return httpx.post(self.base + path, content=text.encode("utf-8", "surrogatepass"),
                          headers=HEADERS, timeout=10)

    def stored(self) -> tuple[int, int]:
        """(events, usage rows) in the store."""
        with sqlite3.connect(self.db) as db:
            return (db.execute("SELECT count(*) FROM events").fetchone()[0],
                    db.execute("SELECT count(*) FROM usage").fetchone()[0])


@pytest.fixture(params=["openai", "anthropic"])
def proxy(request: pytest.FixtureRequest, home: Path, live_server: LiveServer
          ) -> Iterator[Proxy]:
    state: list[Proxy] = []
    with FakeProvider(reply=lambda body: state[0].reply,
                      fault=lambda request: state[0].fault) as provider:
        app = create_app(load_settings(
            store=f"sqlite:///{home / 'p.db'}", proxy_provider=request.param,
            proxy_base_url=f"{provider.url}/v1", proxy_api_key=KEY))
        state.append(Proxy(request.param, live_server(app), home / "p.db", provider))
        yield state[0]


def anthropic_error(answer: httpx.Response) -> str:
    body = answer.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/responses", {**RESPONSES, "messages": [{"role": "user", "content": "x"}]},
     "messages"),
    ("/v1/responses", {**RESPONSES, "input": [{"role": "user", "content": 5}]},
     "input[0].content"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": 5}]},
     "messages[0].content"),
    ("/v1/chat/completions", {**CHAT, "tools": True}, "tools"),
    ("/v1/chat/completions", {**CHAT, "stream": "yes"}, "stream"),
    ("/v1/messages", {**MESSAGES, "messages": [{"role": "user", "content": [5]}]},
     "messages[0].content"),
    ("/v1/messages", {**MESSAGES, "tool_choice": "auto"}, "tool_choice"),
])
def test_a_field_of_the_wrong_type_is_refused_by_name(proxy: Proxy, path: str,
                                                      body: dict[str, Any], field: str
                                                      ) -> None:
    answer = proxy.post(path, body)
    assert answer.status_code == 422, answer.text
    message = anthropic_error(answer) if path == "/v1/messages" else \
        answer.json()["error"]["message"]
    assert field in message
    assert proxy.stored() == (0, 0) and not proxy.provider.requests


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_refused(proxy: Proxy, path: str, number: str) -> None:
    body = {"/v1/chat/completions": CHAT, "/v1/messages": MESSAGES,
            "/v1/responses": RESPONSES}[path]
    answer = proxy.post(path, json.dumps(body)[:-1] + f', "temperature": {number}}}')
    assert answer.status_code == 422, answer.text
    assert "temperature" in answer.text and "finite" in answer.text
    assert proxy.stored() == (0, 0) and not proxy.provider.requests


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/messages", {**MESSAGES, "system": "be \ud800 brief"}),
    ("/v1/chat/completions", {**CHAT, "messages": [
        {"role": "system", "content": "x\ud800"}, {"role": "user", "content": "hi"}]}),
    ("/v1/responses", {**RESPONSES, "instructions": "\ud800"}),
])
def test_text_that_cannot_be_stored_is_refused_before_anything_is(
        proxy: Proxy, path: str, body: dict[str, Any]) -> None:
    answer = proxy.post(path, json.dumps(body))  # escaped: valid JSON, invalid Unicode
    assert answer.status_code == 422, answer.text
    assert "surrogate" in answer.text
    assert proxy.stored() == (0, 0) and not proxy.provider.requests


def test_a_messages_request_with_chat_fields_is_answered(proxy: Proxy) -> None:
    """Fields of another API (``user`` is a chat field) pass as parameters; they no longer
    collide with the chat request the face builds (a pydantic error, 500, before)."""
    answer = proxy.post("/v1/messages", {**MESSAGES, "user": 5, "stream": False})
    assert answer.status_code == 200, answer.text
    assert proxy.stored()[0] == 2


def test_a_bad_image_is_refused(proxy: Proxy) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "not base64!"}}
    answer = proxy.post("/v1/messages", {**MESSAGES, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "see"}, image]}]})
    assert answer.status_code == 422 and "base64" in anthropic_error(answer)
    assert proxy.stored() == (0, 0)


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
BROKEN_CALLS: list[Reply] = [[{**CALL, "id": ""}],
                             [{**CALL, "function": {"name": "", "arguments": "{}"}}]]


@pytest.mark.parametrize("reply", BROKEN_CALLS, ids=["no id", "no name"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_a_malformed_reply_is_a_502_and_stores_nothing(proxy: Proxy, reply: Reply,
                                                       path: str) -> None:
    proxy.reply = reply
    body = {"/v1/chat/completions": CHAT, "/v1/messages": MESSAGES,
            "/v1/responses": RESPONSES}[path]
    answer = proxy.post(path, body)
    assert answer.status_code == 502, answer.text
    assert "tool call without" in answer.text
    assert proxy.stored() == (0, 0)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_a_session_header_in_utf8_names_that_session(proxy: Proxy, path: str) -> None:
    body = {"/v1/chat/completions": CHAT, "/v1/messages": MESSAGES,
            "/v1/responses": RESPONSES}[path]
    answer = httpx.post(proxy.base + path, json=body, timeout=10,
                        headers={"X-Loci-Session": "café-日本".encode()})
    assert answer.status_code == 200, answer.text
    with sqlite3.connect(proxy.db) as db:
        assert db.execute("SELECT DISTINCT session FROM events").fetchall() == [("café-日本",)]


def test_arguments_an_upstream_sent_as_an_object_are_relayed_as_each_api_has_them(
        proxy: Proxy) -> None:
    """Ollama-style servers answer a call's arguments as an object, not a JSON string:
    Chat and Responses relay the string their APIs promise, Messages the ``input``."""
    if proxy.kind != "openai":
        pytest.skip("an OpenAI-compatible upstream's shape")
    proxy.reply = [{**CALL, "function": {"name": "f", "arguments": {"city": "Paris"}}}]
    chat = proxy.post("/v1/chat/completions", CHAT)
    assert chat.status_code == 200, chat.text
    call = chat.json()["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    responses = proxy.post("/v1/responses", RESPONSES)
    assert responses.status_code == 200, responses.text
    assert json.loads(responses.json()["output"][0]["arguments"]) == {"city": "Paris"}
    messages = proxy.post("/v1/messages", MESSAGES)
    assert messages.status_code == 200, messages.text
    assert messages.json()["content"][0]["input"] == {"city": "Paris"}


@pytest.mark.parametrize("arguments", ["null", "[1, 2]", '"text"', '{"a": 1e2}'])
def test_a_messages_client_echoing_odd_arguments_records_its_call_once(
        proxy: Proxy, arguments: str) -> None:
    """Arguments that are no JSON object go to a Messages client as an object (its
    ``input`` must be one), the one the log keeps: the call it echoes with its result
    is the recorded call, not a second one a provider would refuse."""
    if proxy.kind != "openai":
        pytest.skip("an OpenAI-compatible upstream's arguments")
    proxy.reply = [{**CALL, "function": {"name": "f", "arguments": arguments}}]
    first = proxy.post("/v1/messages", MESSAGES)
    assert first.status_code == 200, first.text
    [use] = first.json()["content"]
    assert isinstance(use["input"], dict)
    proxy.reply = "done"
    turn = {**MESSAGES, "messages": [*MESSAGES["messages"],
                                     {"role": "assistant", "content": [use]},
                                     {"role": "user", "content": [{
                                         "type": "tool_result", "tool_use_id": use["id"],
                                         "content": "ok"}]}]}
    for _ in range(2):  # a retry records nothing more
        answer = proxy.post("/v1/messages", turn)
        assert answer.status_code == 200, answer.text
    with sqlite3.connect(proxy.db) as db:
        kinds = [row[0] for row in db.execute("SELECT type FROM events ORDER BY id")]
    assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1


@pytest.mark.parametrize("reply", [*BROKEN_CALLS, "broken \ud800 text"],
                         ids=["no id", "no name", "surrogate"])
@pytest.mark.parametrize(("path", "error"), [("/v1/chat/completions", '"error"'),
                                             ("/v1/messages", "event: error"),
                                             ("/v1/responses", "event: error")])
def test_a_stream_that_fails_ends_with_an_error_event_and_stores_nothing(
        proxy: Proxy, reply: Reply, path: str, error: str) -> None:
    proxy.reply = reply
    body = {"/v1/chat/completions": CHAT, "/v1/messages": MESSAGES,
            "/v1/responses": RESPONSES}[path]
    answer = proxy.post(path, {**body, "stream": True})
    assert answer.status_code == 200
    last = answer.text.strip().rsplit("\n\n", 1)[-1]
    assert error in last, answer.text[-500:]
    assert proxy.stored() == (0, 0)


def events(proxy: Proxy, *data: dict[str, Any]) -> Fault:
    """A 200 event stream of ``data`` as the upstream's API names its events."""
    named = proxy.kind == "anthropic"
    return Fault(200, "".join((f"event: {d.get('type')}\n" if named else "")
                              + f"data: {json.dumps(d)}\n\n" for d in data).encode(),
                 "text/event-stream")


def test_a_stream_cut_short_stores_nothing(proxy: Proxy) -> None:
    if proxy.kind == "anthropic":
        proxy.fault = events(proxy, {"type": "message_start", "message": {}}, {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "partial"}})
    else:
        proxy.fault = events(proxy, {"choices": [
            {"index": 0, "delta": {"content": "partial"}, "finish_reason": None}]})
    answer = proxy.post("/v1/chat/completions", {**CHAT, "stream": True})
    assert "ended its stream before" in answer.text.strip().rsplit("\n\n", 1)[-1]
    assert proxy.stored() == (0, 0)


def test_a_long_streamed_reply_streams_whole_and_in_time(proxy: Proxy) -> None:
    """128k characters in 32k deltas: the tag filter re-parsed the whole reply on every
    delta, and each event took a thread hop (13 s and more; unstreamed: 0.5 s)."""
    proxy.reply = "word " * 26_000
    began = time.perf_counter()
    proxy.post("/v1/chat/completions", CHAT)
    unstreamed, began = time.perf_counter() - began, time.perf_counter()
    answer = proxy.post("/v1/chat/completions", {**CHAT, "stream": True})
    streamed = time.perf_counter() - began
    assert answer.text.endswith("data: [DONE]\n\n")
    text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                   for line in answer.text.splitlines()
                   if line.startswith("data: {") and json.loads(line[6:])["choices"])
    assert text == "word " * 26_000
    assert proxy.stored() == (4, 2)
    assert streamed < max(6.0, 8 * unstreamed), (streamed, unstreamed)


@pytest.mark.parametrize("stream", [False, True])
def test_no_piece_of_the_upstream_key_reaches_the_client(proxy: Proxy, stream: bool
                                                         ) -> None:
    """The upstream echoes the key at character 180 of its error: redacted before the
    message is cut to 200 characters (cut first, ``sk-UPSTREAM-SECRET-a`` got through)."""
    echo = "x" * 180 + KEY + " is not a valid key"
    proxy.fault = Fault(401, json.dumps({"error": {"message": echo}}).encode())
    answer = proxy.post("/v1/chat/completions", {**CHAT, "stream": stream})
    assert answer.status_code == 502 and "HTTP 401" in answer.text
    assert not any(KEY[i:i + 6] in answer.text for i in range(len(KEY) - 5)), answer.text
    proxy.fault = events(proxy, {"type": "error", "error": {"message": echo}})
    streamed = proxy.post("/v1/chat/completions", {**CHAT, "stream": True})
    assert "x" * 20 in streamed.text and "sk-UPS" not in streamed.text
    assert proxy.stored() == (0, 0)


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_that_does_not_answer_in_time_is_an_error(
        home: Path, live_server: LiveServer, stream: bool) -> None:
    def late(body: dict[str, Any]) -> Reply:
        time.sleep(3)
        return "late"

    with FakeProvider(reply=late) as provider:
        app = create_app(load_settings(
            store=f"sqlite:///{home / 'p.db'}", proxy_provider="openai",
            proxy_base_url=f"{provider.url}/v1", proxy_api_key=KEY, proxy_timeout=0.5))
        base, began = live_server(app), time.perf_counter()
        answer = httpx.post(base + "/v1/chat/completions", json={**CHAT, "stream": stream},
                            headers=HEADERS, timeout=10)
        assert answer.status_code == 502 and "within 0.5s" in answer.text
        assert time.perf_counter() - began < 2.5


def test_a_trickling_stream_ends_at_the_deadline(home: Path, live_server: LiveServer
                                                 ) -> None:
    """Every event comes in time, the whole stream does not: it ends with an error
    event at ``[proxy] timeout``, and nothing is stored."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "slow "}, "finish_reason": None}]}
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for _ in range(40)) + "data: [DONE]"
    fault = Fault(200, body.encode(), "text/event-stream", pause=0.1)
    with FakeProvider(fault=lambda request: fault) as provider:
        app = create_app(load_settings(
            store=f"sqlite:///{home / 'p.db'}", proxy_provider="openai",
            proxy_base_url=f"{provider.url}/v1", proxy_api_key=KEY, proxy_timeout=1.0))
        base, began = live_server(app), time.perf_counter()
        answer = httpx.post(base + "/v1/chat/completions", json={**CHAT, "stream": True},
                            headers=HEADERS, timeout=10)
        assert "did not finish its answer within 1s" in answer.text.rsplit("\n\n", 2)[-2]
        assert time.perf_counter() - began < 3
        with sqlite3.connect(home / "p.db") as db:
            assert db.execute("SELECT count(*) FROM events").fetchone()[0] == 0
