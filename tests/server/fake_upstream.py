"""A scripted upstream chat server for the proxy tests (OpenAI- or Anthropic-shaped,
real HTTP on loopback) that answers scripted replies and records what it was sent, with
helpers to build the proxy around it.

The Anthropic shape follows Anthropic's rules for extended thinking and empty text blocks
(``loci.testing.provider_rules``: else 400, as Anthropic answers)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from openai import OpenAI

from loci import Loci, load_settings
from loci.models import Scope
from loci.server import create_app
from loci.server.hub import Hub, Principal
from loci.testing.fake_provider import (
    anthropic_events,
    anthropic_message,
    openai_completion,
    openai_events,
)
from loci.testing.provider_rules import (
    empty_text,
    thinking_block,
    thinking_error,
)
from loci.testing.provider_rules import pieces as wire_pieces

UPSTREAM_KEY = "sk-upstream-test"


@dataclass
class Upstream:
    """A scripted chat server: ``replies`` are answered in order (then "ok"); a reply
    that is a list is tool calls (OpenAI-shaped; an Anthropic-shaped upstream answers
    them as ``tool_use`` blocks)."""

    url: str
    replies: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Seconds between two streamed events (an upstream that sends as it generates;
    #: events sent at once reach the proxy in one read, and the client in one event).
    pause: float = 0.0

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]

    def next_reply(self) -> Any:
        return self.replies.pop(0) if self.replies else "ok"


#: The usage the scripted upstream reports, per API.
OPENAI_USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
ANTHROPIC_USAGE = {"input_tokens": 13, "output_tokens": 5}
ANTHROPIC_TOOL_USAGE = {"input_tokens": 13, "output_tokens": 9}


def pieces(text: str, size: int = 4) -> list[str]:
    """The reply in small pieces, so tags arrive split across chunks."""
    return wire_pieces(text, size)


def anthropic_answer(reply: Any, thinking: dict[str, Any] | None, stream: bool) -> Any:
    """Text or tool calls as Anthropic answers them, after a thinking block if any."""
    usage = ANTHROPIC_TOOL_USAGE if isinstance(reply, list) else ANTHROPIC_USAGE
    if stream:
        return anthropic_events(reply, usage, [thinking] if thinking else None)
    return anthropic_message(reply, usage, [thinking] if thinking else None)


def make_handler(state: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            state.requests.append({"path": self.path, "headers": dict(self.headers),
                                   "body": body})
            if self.path.startswith("/fail/"):
                self._json(500, {"error": {"message": "upstream exploded"}})
                return
            anthropic = self.path.startswith("/anthropic/")
            if anthropic and (error := empty_text(body)) is not None:
                self._json(400, {"type": "error", "error": {
                    "type": "invalid_request_error", "message": error}})
                return
            thinking = None
            if anthropic and (body.get("thinking") or {}).get("type") == "enabled":
                if (error := thinking_error(body)) is not None:
                    self._json(400, {"type": "error", "error": {
                        "type": "invalid_request_error", "message": error}})
                    return
                thinking = thinking_block(len(state.requests))
            reply = state.next_reply()
            stream = bool(body.get("stream"))
            if anthropic:
                answer = anthropic_answer(reply, thinking, stream)
            elif stream:
                answer = openai_events(reply, OPENAI_USAGE)
            else:
                answer = openai_completion(reply, OPENAI_USAGE)
            if stream:
                self._stream(answer, anthropic)
            else:
                self._json(200, answer)

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: list[dict[str, Any]], anthropic: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for event in events:
                name = f"event: {event['type']}\n" if anthropic else ""
                self.wfile.write(f"{name}data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
                time.sleep(state.pause)
            if not anthropic:
                self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    return Handler


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def proxy_app(home: Path, upstream: Upstream, kind: str = "openai", prefix: str = "",
              **extra: Any) -> FastAPI:
    """The server with ``kind`` upstream at ``/<prefix>/v1`` (the prefix picks the
    upstream's behaviour; default: the kind)."""
    settings = load_settings(
        store=f"sqlite:///{home / 'proxy.db'}", proxy_provider=kind,
        proxy_base_url=f"{upstream.url}/{prefix or kind}/v1", proxy_api_key=UPSTREAM_KEY,
        **extra)
    return create_app(settings)


def engine(app: FastAPI, tenant: str = "default") -> Loci:
    hub: Hub = app.state.hub
    return hub.engine(Principal(Scope(tenant, "default")))


def client(base: str, key: str = "open") -> OpenAI:
    return OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["body"]["messages"]
                     if m["role"] == "system")


SESSION = {"X-Loci-Session": "work"}
