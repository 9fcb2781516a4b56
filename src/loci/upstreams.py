"""The upstream models the proxy calls, built once per runtime and closed with it.

The upstream is ``[proxy] provider`` (``openai``, ``anthropic``, or ``openai-responses``
for OpenAI's Responses API; empty means the ``[llm]`` provider when that is openai or
anthropic), ``[proxy] base_url`` and ``[proxy] api_key`` (empty: the ``[llm]`` ones).
Each is one of Loci's chat providers (``loci.llm``) with each request and answer in its
API's shape (``loci.apis``): whatever the upstream, its caller sees a ``Completion`` or a
stream of ``Delta`` (``apis.turn``). A runtime keeps one per configuration
(``Upstreams``): its HTTP client, and the connections that client keeps open, serve
every call (building a client loads the TLS certificates: tens of milliseconds).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Protocol

from loci.apis import anthropic, anthropic_stream, chat, responses
from loci.apis.turn import Completion, Delta, Request, joined
from loci.errors import ConfigError
from loci.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from loci.llm.anthropic import AnthropicChat
from loci.llm.openai_compat import DEFAULT_BASE_URL as OPENAI_URL
from loci.llm.openai_compat import OpenAICompatibleChat, OpenAIResponses
from loci.settings import Settings


class Upstream(Protocol):
    """An upstream model: one call answered whole, or streamed."""

    def complete(self, request: Request) -> Completion: ...

    def stream(self, request: Request) -> Iterator[Delta]: ...

    def close(self) -> None: ...


class NoUpstreamError(ConfigError):
    """No upstream model is configured."""

    http_status = 503


#: (provider, base URL, API key, default model, timeout): what makes one upstream.
Config = tuple[str, str, str | None, str, float]


class Upstreams:
    """The upstreams of one runtime, one per configuration, closed together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[Config, Upstream] = {}
        self._closed = False

    def get(self, settings: Settings) -> Upstream:
        """The configured upstream, or a NoUpstreamError saying how to configure one."""
        config = (settings.upstream_provider, settings.proxy.base_url or settings.llm.base_url,
                  settings.proxy.api_key or settings.llm.api_key or None,
                  # The providers want a default model; the proxy sends the client's.
                  settings.llm.model or settings.model, settings.proxy.timeout)
        with self._lock:
            if self._closed:
                raise ConfigError("the runtime is closed")
            upstream = self._kept.get(config)
            if upstream is None:
                upstream = self._kept[config] = _build(*config)
            return upstream

    def kept(self) -> list[Upstream]:
        with self._lock:
            return list(self._kept.values())

    def close(self) -> None:
        with self._lock:
            self._closed, closing = True, list(self._kept.values())
            self._kept.clear()
        for upstream in closing:
            upstream.close()


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
        reader = anthropic_stream.StreamReader()
        for events in self.chat.send_batches(anthropic.request_body(request, stream=True),
                                             _beta(request)):
            yield from joined(reader.read(events))

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
