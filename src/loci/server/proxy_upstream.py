"""The proxy's upstream model: an OpenAI-compatible server, Anthropic or OpenAI's
Responses API, reached through Loci's own chat providers (``loci.llm``), each request
and answer in its API's shape (``loci.apis``).

The upstream is ``[proxy] provider`` (``openai``, ``anthropic``, or ``openai-responses``
for OpenAI's Responses API; empty means the ``[llm]``
provider when that is openai or anthropic), ``[proxy] base_url`` and
``[proxy] api_key`` (empty: the ``[llm]`` ones). The model is the client's. Whatever
the upstream, the proxy sees a ``Completion`` or a stream of ``Delta`` (``apis.turn``).

While a server runs (``kept_upstreams``, its lifespan) each configuration's upstream is
built once and kept: its HTTP client, and the connections that client keeps open, serve
every request (building a client loads the TLS certificates: tens of milliseconds a
request); the last server of the process to stop closes them. Outside a server each
request builds its own and closes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from loci import ConfigError, Settings
from loci.apis import anthropic, anthropic_stream, chat, responses
from loci.apis.turn import Completion, Delta, Request, joined
from loci.apis.wire import mapping
from loci.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from loci.llm.anthropic import AnthropicChat
from loci.llm.openai_compat import DEFAULT_BASE_URL as OPENAI_URL
from loci.llm.openai_compat import OpenAICompatibleChat, OpenAIResponses
from loci.server.proxy_types import Upstream

#: Request fields the proxy handles itself instead of forwarding.
OWN_FIELDS = frozenset({"model", "messages", "stream", "user", "tools"})


class NoUpstreamError(ConfigError):
    """The proxy has no upstream model configured."""

    http_status = 503


def provider_of(settings: Settings) -> str:
    return (settings.proxy.provider or settings.llm.provider).strip().lower()


def provider_edits(settings: Settings, params: dict[str, Any]) -> tuple[str, ...]:
    """The types of the client's ``context_management`` edits that the upstream applies
    (an Anthropic upstream; any other drops them)."""
    if provider_of(settings) != "anthropic":
        return ()
    edits = mapping(params.get("context_management")).get("edits")
    return tuple(str(mapping(e).get("type")) for e in edits or () if mapping(e).get("type"))


def make_upstream(settings: Settings) -> Upstream:
    """The configured upstream (kept while a server runs, see the module docstring), or
    a NoUpstreamError saying how to configure one."""
    config = (provider_of(settings), settings.proxy.base_url or settings.llm.base_url,
              settings.proxy.api_key or settings.llm.api_key or None,
              # The providers want a default model; the proxy always sends the client's.
              settings.llm.model or settings.model, settings.proxy.timeout)
    with _KEPT.lock:
        if not _KEPT.servers:
            return _build(*config)
        upstream = _KEPT.upstreams.get(config)
        if upstream is None:
            upstream = _KEPT.upstreams[config] = _build(*config)
        return _Borrowed(upstream)


@contextmanager
def kept_upstreams() -> Iterator[None]:
    """For as long as a server runs: upstreams built once per configuration and kept."""
    with _KEPT.lock:
        _KEPT.servers += 1
    try:
        yield
    finally:
        with _KEPT.lock:
            _KEPT.servers -= 1
            closing = [] if _KEPT.servers else list(_KEPT.upstreams.values())
            if not _KEPT.servers:
                _KEPT.upstreams.clear()
        for upstream in closing:
            upstream.close()


class _Kept:
    """The upstreams kept, by configuration, and the servers running that keep them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers = 0
        self.upstreams: dict[tuple[str, str, str | None, str, float], Upstream] = {}


_KEPT = _Kept()


class _Borrowed:
    """A request's use of a kept upstream: closing it leaves the upstream open (a
    stream's HTTP response is closed with the stream)."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def complete(self, request: Request) -> Completion:
        return self.upstream.complete(request)

    def stream(self, request: Request) -> Iterator[Delta]:
        return self.upstream.stream(request)

    def close(self) -> None:
        pass


def _build(provider: str, base_url: str, api_key: str | None, model: str, timeout: float
           ) -> Upstream:
    if provider in ("openai", "openai-compatible"):
        return OpenAIUpstream(OpenAICompatibleChat(
            model, base_url or OPENAI_URL, api_key, timeout=timeout))
    if provider == "anthropic":
        return AnthropicUpstream(AnthropicChat(
            model, base_url or ANTHROPIC_URL, api_key, timeout=timeout))
    if provider == "openai-responses":
        return ResponsesUpstream(OpenAIResponses(base_url or OPENAI_URL, api_key, timeout))
    raise NoUpstreamError(
        "the proxy has no upstream model: set [proxy] provider = \"openai\" (any "
        "OpenAI-compatible base_url), \"openai-responses\" (OpenAI's Responses API) or "
        "\"anthropic\", with base_url and api_key, in "
        "loci.toml (or LOCI_PROXY_PROVIDER, LOCI_PROXY_BASE_URL, LOCI_PROXY_API_KEY)")


class OpenAIUpstream:
    """Any OpenAI-compatible server: the client's parameters (tools included) pass
    through unchanged (``apis.chat``)."""

    def __init__(self, client: OpenAICompatibleChat) -> None:
        self.chat = client

    def complete(self, request: Request) -> Completion:
        return chat.answer(self.chat.chat(chat.request_body(request, stream=False)))

    def stream(self, request: Request) -> Iterator[Delta]:
        for chunks in self.chat.chat_batches(chat.request_body(request, stream=True)):
            yield from chat.deltas(chunks)

    def close(self) -> None:
        self.chat.close()


class AnthropicUpstream:
    """The Anthropic Messages API (``apis.anthropic``)."""

    def __init__(self, client: AnthropicChat) -> None:
        self.chat = client

    def complete(self, request: Request) -> Completion:
        return anthropic.answer(self.chat.send(
            anthropic.request_body(request, stream=False), _beta(request)))

    def stream(self, request: Request) -> Iterator[Delta]:
        return anthropic_stream.deltas(self.chat.send_stream(
            anthropic.request_body(request, stream=True), _beta(request)))

    def close(self) -> None:
        self.chat.close()


def _beta(request: Request) -> dict[str, str] | None:
    return {"anthropic-beta": request.beta} if request.beta else None


class ResponsesUpstream:
    """A server of OpenAI's Responses API (``apis.responses``)."""

    def __init__(self, api: OpenAIResponses) -> None:
        self.api = api

    def complete(self, request: Request) -> Completion:
        return responses.answer(self.api.send(responses.request_body(request, stream=False)))

    def stream(self, request: Request) -> Iterator[Delta]:
        calls = 0  # the answer's function calls so far
        for events in self.api.send_batches(responses.request_body(request, stream=True)):
            deltas = list(responses.deltas(events, calls))
            calls += sum(len(delta.tool_calls or ()) for delta in deltas)
            yield from joined(deltas)

    def close(self) -> None:
        self.api.close()
