"""A fake LLM provider over real HTTP on loopback, for tests and benchmarks: OpenAI's
``POST /v1/chat/completions`` and ``/v1/responses`` (with signed reasoning items when
asked for) and Anthropic's ``POST /v1/messages``, streamed or not, in the published wire
formats (``fake_answers``), with the usage each provider's prompt cache would report
(``prompt_cache``) or fixed figures (``fixed_usage``), and the providers' refusals
(``provider_rules``: altered thinking signatures, empty text blocks, broken tool pairs
are a 400). It answers what ``reply`` says, by default the scripted ``replies`` in
order (then "ok"): text, OpenAI-shaped tool calls (sent as ``tool_use`` blocks after a
short text on the Anthropic side), or an OpenAI assistant message with both; with
Anthropic's ``thinking`` enabled, after a signed thinking block. A ``fault`` answers
instead, as it is (a broken upstream, a test's canned bytes). Every request is recorded
(``requests``: path, headers, body). At run time only as ``loci serve --upstream echo``
(``echo_reply``): the proxy, memory and the dashboard tried without a key or a network.

    with FakeProvider(reply=lambda body: "ok") as provider:
        settings = load_settings(proxy_provider="openai", proxy_base_url=provider.url + "/v1")
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypedDict

from loci.apis.wire import message_text
from loci.testing.fake_answers import (
    Reply,
    anthropic_events,
    anthropic_message,
    openai_completion,
    openai_events,
    output_tokens,
    responses_answer,
    responses_events,
)
from loci.testing.prompt_cache import AnthropicCache, OpenAIPrefixCache
from loci.testing.provider_rules import (
    compaction_block,
    compaction_error,
    empty_text,
    pairing_error,
    reasoning_item,
    responses_error,
    thinking_block,
    thinking_error,
)


def echo_reply(body: dict[str, Any]) -> Reply:
    """The echo upstream's answer: the user's last message back, and how much context
    Loci sent with it (no model is called)."""
    messages = body.get("messages") or body.get("input") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = message_text(users[-1].get("content")) if users else ""
    return (f"Echo: {text}\n\n(Loci's echo upstream answered: no model was called. The "
            f"request held {len(messages)} messages, Loci's context among them.)")


@dataclass(frozen=True)
class Fault:
    """An answer sent as it is, past the script and the rules: what no provider should
    give (an error, broken JSON, a stream cut short: how Loci takes a broken upstream)
    or a test's canned bytes."""

    status: int
    body: bytes
    content_type: str = "application/json"
    #: Seconds between the body's events (blank-line separated): a trickling stream.
    pause: float = 0.0
    #: Seconds before anything is sent: a provider too slow for the client's timeout.
    delay: float = 0.0


class Request(TypedDict):
    """A request as the fake provider received it (headers looked up in any case; the
    body None when it is no JSON)."""

    path: str
    headers: Message
    body: Any


def fixed_usage(path: str, reply: Reply) -> dict[str, Any]:
    """Usage of fixed figures per API (a reply of tool calls costs Anthropic more output),
    for tests that check what Loci passes on rather than what a cache would report."""
    if path.endswith("/messages"):
        return {"input_tokens": 13, "output_tokens": 9 if isinstance(reply, list) else 5}
    if path.endswith("/responses"):
        return {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
    return {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


class FakeProvider:
    """The server; ``requests`` holds each request received, ``clock`` (seconds) decides
    when cached prefixes expire (a benchmark may simulate time), ``pause`` is the
    seconds between streamed events (an upstream that sends as it generates)."""

    def __init__(self, reply: Callable[[dict[str, Any]], Reply] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 fault: Callable[[Request], Fault | None] | None = None,
                 *, keep_requests: bool = True,
                 usage: Callable[[str, Reply], dict[str, Any]] | None = None) -> None:
        #: The scripted replies the default ``reply`` answers in order (then "ok").
        self.replies: list[Reply] = []
        self.reply = reply or self.next_reply
        #: Whether ``requests`` keeps every request (a test's record), or the last only
        #: (a server running for hours).
        self.keep_requests = keep_requests
        #: What to answer instead of a reply, if anything.
        self.fault = fault or (lambda request: None)
        #: The usage to report instead of the prompt caches' (``fixed_usage``).
        self.usage = usage
        self.pause = 0.0
        self.openai, self.anthropic = OpenAIPrefixCache(clock), AnthropicCache(clock)
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def last(self) -> Request:
        return self.requests[-1]

    def base(self, prefix: str, suffix: str = "/v1") -> str:
        """A base URL under ``prefix`` (a fault may tell requests apart by it)."""
        return f"{self.url}/{prefix}{suffix}"

    def next_reply(self, body: dict[str, Any]) -> Reply:
        return self.replies.pop(0) if self.replies else "ok"

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
            if not self.keep_requests:
                del self.requests[:-1]

    def refusal(self, path: str, body: dict[str, Any]) -> str | None:
        """What the provider of ``path`` would answer 400 to in ``body``, or None."""
        if path.endswith("/responses"):
            return responses_error(body)
        if not path.endswith("/messages"):
            return pairing_error(body, anthropic=False)
        thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        # A request that continues a thread the provider keeps (the SDK's tool runner)
        # sends only the new results: their calls are in the thread.
        threaded = (body.get("thread") or {}).get("type") == "continue"
        return (empty_text(body) or (None if threaded else pairing_error(body, anthropic=True))
                or compaction_error(body) or (thinking_error(body) if thinking else None))

    def blocks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The blocks an Anthropic answer starts with: the provider's compaction when
        the request asks for it (``compact_*``) and its input reaches the trigger, a
        signed thinking block when thinking is enabled."""
        edits = (body.get("context_management") or {}).get("edits") or ()
        compact = next((e for e in edits if str(e.get("type")).startswith("compact_")), None)
        blocks = []
        if compact is not None:
            trigger = (compact.get("trigger") or {}).get("value", 150_000)
            if self.anthropic.total(body) >= trigger:
                blocks.append(compaction_block(body["messages"]))
        if (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
            blocks.append(thinking_block(len(self.requests)))
        return blocks

    def answer(self, path: str, body: dict[str, Any]) -> tuple[Reply, dict[str, Any]]:
        """The reply to ``body`` and its usage, as the provider of ``path`` counts it."""
        with self._lock:  # one cache, requests in order
            reply = self.reply(body)
            if self.usage is not None:
                return reply, self.usage(path, reply)
            out = output_tokens(reply)
            if path.endswith("/messages"):
                count = self.anthropic.count(body)
                return reply, {"input_tokens": count.input_tokens,
                               "cache_read_input_tokens": count.cache_read,
                               "cache_creation_input_tokens": count.cache_write,
                               "output_tokens": out}
            total, cached = self.openai.cached(body)
            if path.endswith("/responses"):
                return reply, {"input_tokens": total, "output_tokens": out,
                               "total_tokens": total + out,
                               "input_tokens_details": {"cached_tokens": cached},
                               "output_tokens_details": {"reasoning_tokens": 0}}
            return reply, {"prompt_tokens": total, "completion_tokens": out,
                           "total_tokens": total + out,
                           "prompt_tokens_details": {"cached_tokens": cached}}


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            request = Request(path=self.path, headers=self.headers, body=body)
            provider.record(request)
            # The client may have given up (a timeout) before the answer is sent.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(request)

        def _answer(self, request: Request) -> None:
            body = request["body"]
            if (fault := provider.fault(request)) is not None:
                self._raw(fault)
                return
            if not self.path.endswith(("/chat/completions", "/messages", "/responses")):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if not isinstance(body, dict):
                self._send(400, {"error": {"message": "the body is no JSON object",
                                           "type": "invalid_request_error"}})
                return
            if self.path.endswith("/responses"):
                self._responses(body)
                return
            anthropic = self.path.endswith("/messages")
            if (error := provider.refusal(self.path, body)) is not None:
                self._send(400, {"type": "error", "error": {
                    "type": "invalid_request_error", "message": error}} if anthropic
                    else {"error": {"message": error, "type": "invalid_request_error"}})
                return
            reply, usage = provider.answer(self.path, body)
            before = provider.blocks(body) if anthropic else []
            if not body.get("stream"):
                self._send(200, anthropic_message(reply, usage, before) if anthropic
                           else openai_completion(reply, usage))
                return
            wanted = (body.get("stream_options") or {}).get("include_usage")
            self._events(anthropic_events(reply, usage, before) if anthropic
                         else openai_events(reply, usage if wanted else None), anthropic)

        def _responses(self, body: dict[str, Any]) -> None:
            if (error := provider.refusal(self.path, body)) is not None:
                self._send(400, {"error": {"message": error, "type": "invalid_request_error"}})
                return
            reply, usage = provider.answer(self.path, body)
            reasoning = bool(body.get("reasoning")) or "reasoning.encrypted_content" in (
                body.get("include") or ())
            response = responses_answer(reply, usage, reasoning_item(
                len(provider.requests)) if reasoning else None)
            if body.get("stream"):
                self._events(responses_events(response), True)
            else:
                self._send(200, response)

        def _events(self, events: list[dict[str, Any]], named: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for event in events:
                name = f"event: {event['type']}\n" if named else ""
                self.wfile.write(f"{name}data: {json.dumps(event)}\n\n".encode())
                if provider.pause:
                    self.wfile.flush()
                    time.sleep(provider.pause)
            if not named:
                self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def _raw(self, fault: Fault) -> None:
            time.sleep(fault.delay)
            self.send_response(fault.status)
            self.send_header("content-type", fault.content_type)
            if not fault.pause:
                self.send_header("content-length", str(len(fault.body)))
            self.end_headers()
            for event in fault.body.split(b"\n\n") if fault.pause else [fault.body]:
                self.wfile.write(event + b"\n\n" if fault.pause else event)
                self.wfile.flush()
                time.sleep(fault.pause)
            self.close_connection = True

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
