"""A fake LLM provider over real HTTP on loopback, for tests and benchmarks: OpenAI's
``POST /v1/chat/completions`` and ``/v1/responses`` (with signed reasoning items when
asked for) and Anthropic's ``POST /v1/messages``, streamed or not, in
the published wire formats, with the usage each provider's prompt cache would report
(``prompt_cache``), and the providers' refusals (``provider_rules``: altered thinking
signatures, empty text blocks, broken tool pairs are a 400). It answers what ``reply``
says: text, OpenAI-shaped tool calls (sent as ``tool_use`` blocks after a short text on
the Anthropic side), or an OpenAI assistant message with both; with Anthropic's
``thinking`` enabled, after a signed thinking block. At run time only as
``loci serve --upstream echo`` (``echo_reply``): the proxy, memory and the dashboard
tried without a key or a network.

    with FakeProvider(reply=lambda body: "ok") as provider:
        settings = load_settings(proxy_provider="openai", proxy_base_url=provider.url + "/v1")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from loci.apis.wire import message_text
from loci.llm.prompt_cache import AnthropicCache, OpenAIPrefixCache, canonical
from loci.llm.provider_rules import (
    block_events,
    compaction_block,
    compaction_error,
    empty_text,
    pairing_error,
    pieces,
    reasoning_item,
    responses_error,
    thinking_block,
    thinking_error,
)
from loci.tokens import token_counter

#: Text, OpenAI-shaped tool calls, or an assistant message (``content``, ``tool_calls``).
Reply = str | list[dict[str, Any]] | dict[str, Any]


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
    """An answer no provider should give, sent as it is (tests of how Loci takes a
    broken upstream): a status, a raw body (an error, broken JSON, a stream cut short)."""

    status: int
    body: bytes
    content_type: str = "application/json"
    #: Seconds between the body's events (blank-line separated): a trickling stream.
    pause: float = 0.0
_COUNTER = token_counter("gpt-4o")


def split(reply: Reply, anthropic: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """(text, tool calls) of a reply; bare tool calls come after "Checking." on the
    Anthropic side, which answers tool use with a text block first."""
    if isinstance(reply, str):
        return reply, []
    if isinstance(reply, list):
        return ("Checking." if anthropic else ""), reply
    return str(reply.get("content") or ""), list(reply.get("tool_calls") or ())


def output_tokens(reply: Reply) -> int:
    text, calls = split(reply)
    text += canonical(calls) if calls else ""
    # A reply may hold a lone surrogate (a broken provider, in tests): counted as "?".
    return _COUNTER.count(text.encode("utf-8", "replace").decode())


def openai_events(reply: Reply, usage: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A chat completion as OpenAI streams it: text in pieces, or each tool call's id
    and name first and its arguments in pieces; then the finish reason, then the usage
    (only when the request asked for it, ``usage`` None otherwise)."""
    head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text, calls = split(reply)
    events = [chunk({"content": piece}) for piece in pieces(text, 4)]
    if not calls:
        events.append(chunk({}, "stop"))
    else:
        for index, call in enumerate(calls):
            events.append(chunk({"tool_calls": [{
                "index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                       for p in pieces(call["function"]["arguments"], 5)]
        events.append(chunk({}, "tool_calls"))
    if usage is not None:
        events.append({**head, "choices": [], "usage": usage})
    return events


def anthropic_events(reply: Reply, usage: dict[str, int],
                     before: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A message as Anthropic streams it: ``message_start`` with the input usage, the
    ``before`` blocks (a compaction, a thinking block), a text block, one ``tool_use``
    block per call with its input in pieces, then ``message_delta`` with the output
    tokens and ``message_stop``."""
    before = before or []
    at = len(before)
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    text, calls = split(reply, anthropic=True)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [], "usage": {**start_usage, "output_tokens": 1}}},
        *(event for n, block in enumerate(before) for event in block_events(n, block)),
        {"type": "content_block_start", "index": at,
         "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": at,
           "delta": {"type": "text_delta", "text": p}} for p in pieces(text, 4)),
        {"type": "content_block_stop", "index": at}]
    for index, call in enumerate(calls, start=at + 1):
        events.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call["id"], "name": call["function"]["name"],
            "input": {}}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p}}
                   for p in pieces(call["function"]["arguments"], 5)]
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if calls else "end_turn"
    return [*events, {"type": "message_delta", "delta": {"stop_reason": stop},
                      "usage": {"output_tokens": usage["output_tokens"]}},
            {"type": "message_stop"}]


def anthropic_message(reply: Reply, usage: dict[str, int],
                      before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    text, calls = split(reply, anthropic=True)
    content = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": json.loads(c["function"]["arguments"] or "{}")} for c in calls]
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [*(before or []), *content],
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None, "usage": usage}


def openai_completion(reply: Reply, usage: dict[str, Any]) -> dict[str, Any]:
    text, calls = split(reply)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage}


def responses_answer(reply: Reply, usage: dict[str, Any],
                     reasoning: dict[str, Any] | None) -> dict[str, Any]:
    """A Responses ``response``: a reasoning item (when asked for), the message, the
    function calls."""
    text, calls = split(reply)
    output = [reasoning] if reasoning else []
    if text:
        output.append({"type": "message", "id": "msg_fake", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": text, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{c['id']}", "call_id": c["id"],
                "name": c["function"]["name"], "arguments": c["function"]["arguments"],
                "status": "completed"} for c in calls]
    return {"id": "resp_fake", "object": "response", "status": "completed",
            "model": "fake", "output": output, "usage": usage}


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The response as the Responses API streams it: each output item added and done,
    the message's text in deltas, then ``response.completed``."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {
        **response, "status": "in_progress", "output": []}}]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "status": "in_progress"}})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events += [{"type": "response.output_text.delta", "output_index": index,
                        "item_id": item["id"], "content_index": 0, "delta": p}
                       for p in pieces(text, 4)]
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


class FakeProvider:
    """The server; ``requests`` holds each request's path and body, ``clock`` (seconds)
    decides when cached prefixes expire (a benchmark may simulate time)."""

    def __init__(self, reply: Callable[[dict[str, Any]], Reply] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 fault: Callable[[str, dict[str, Any]], Fault | None] | None = None,
                 *, keep_requests: bool = True) -> None:
        self.reply = reply or (lambda body: "ok")
        #: Whether ``requests`` keeps every request (a test's record), or the last only
        #: (a server running for hours).
        self.keep_requests = keep_requests
        #: What to answer instead of a reply, if anything (path, body → a Fault).
        self.fault = fault or (lambda path, body: None)
        self.openai, self.anthropic = OpenAIPrefixCache(clock), AnthropicCache(clock)
        self.requests: list[tuple[str, dict[str, Any]]] = []
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

    def refusal(self, path: str, body: dict[str, Any]) -> str | None:
        """What the provider of ``path`` would answer 400 to in ``body``, or None."""
        if path.endswith("/responses"):
            return responses_error(body)
        if not path.endswith("/messages"):
            return pairing_error(body, anthropic=False)
        thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        return (empty_text(body) or pairing_error(body, anthropic=True)
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
            self.requests.append((path, body))
            if not self.keep_requests:
                del self.requests[:-1]
            reply = self.reply(body)
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
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if not self.path.endswith(("/chat/completions", "/messages", "/responses")):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if (fault := provider.fault(self.path, body)) is not None:
                self._raw(fault)
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
            if not named:
                self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def _raw(self, fault: Fault) -> None:
            self.send_response(fault.status)
            self.send_header("content-type", fault.content_type)
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
