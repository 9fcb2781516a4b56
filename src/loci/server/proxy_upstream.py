"""The proxy's upstream model: an OpenAI-compatible server (here) or Anthropic
(``proxy_anthropic``), reached through Loci's own chat providers (``loci.llm``).

The upstream is ``[proxy] provider`` (``openai``, ``anthropic``, or ``openai-responses``
for OpenAI's Responses API, ``proxy_responses_upstream``; empty means the ``[llm]``
provider when that is openai or anthropic), ``[proxy] base_url`` and
``[proxy] api_key`` (empty: the ``[llm]`` ones). The model is the client's. Whatever
the upstream, the proxy sees a ``Completion`` or a stream of ``Delta`` (``proxy_types``).

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

from loci.context.requests import openai_messages
from loci.errors import ConfigError, ValidationError
from loci.llm.answers import Completion, chat_answer
from loci.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from loci.llm.anthropic import AnthropicChat
from loci.llm.openai_compat import DEFAULT_BASE_URL as OPENAI_URL
from loci.llm.openai_compat import OpenAICompatibleChat, OpenAIResponses
from loci.llm.wire import mapping, message_text, read_usage
from loci.server.proxy_anthropic import ANTHROPIC_TOOL, AnthropicUpstream
from loci.server.proxy_responses_upstream import ResponsesUpstream
from loci.server.proxy_types import Delta, Upstream, UpstreamRequest
from loci.settings import Settings

#: Request fields the proxy handles itself instead of forwarding.
OWN_FIELDS = frozenset({"model", "messages", "stream", "user"})
#: Messages API parameters (from the Messages face) and Responses ones (from the
#: Responses face) that the Chat Completions API does not know.
_ANTHROPIC_ONLY = frozenset({"thinking", "top_k", "context_management", "reasoning"})


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

    def complete(self, request: UpstreamRequest) -> Completion:
        return self.upstream.complete(request)

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]:
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


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool without the Messages face's Anthropic definition; Anthropic's own tool
    types (the memory tool, web search, ...) have no function schema to send."""
    own = tool.get(ANTHROPIC_TOOL)
    if isinstance(own, dict) and own.get("type") not in (None, "custom"):
        raise ValidationError(f"the {own['type']} tool is Anthropic's: it needs an "
                              "Anthropic upstream ([proxy] provider = \"anthropic\")")
    return {k: v for k, v in tool.items() if k != ANTHROPIC_TOOL}


class OpenAIUpstream:
    """Any OpenAI-compatible server: the client's parameters (tools included) pass
    through unchanged."""

    def __init__(self, chat: OpenAICompatibleChat) -> None:
        self.chat = chat

    def _body(self, request: UpstreamRequest, stream: bool) -> dict[str, Any]:
        params = {k: v for k, v in request.params.items() if k not in _ANTHROPIC_ONLY}
        effort = mapping(request.params.get("reasoning")).get("effort")
        if effort and "reasoning_effort" not in params:  # the Responses face's, in chat
            params["reasoning_effort"] = effort
        if params.get("tools"):
            params["tools"] = [_openai_tool(tool) for tool in params["tools"]]
        messages = openai_messages(request.context, request.system, request.attachments)
        body = {**params, "model": request.model, "messages": messages}
        if stream:  # the usage comes in a last chunk when asked for
            body["stream"] = True
            body["stream_options"] = {**mapping(params.get("stream_options")),
                                      "include_usage": True}
        return body

    def complete(self, request: UpstreamRequest) -> Completion:
        return chat_answer(self.chat.chat(self._body(request, stream=False)))

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]:
        for chunks in self.chat.chat_batches(self._body(request, stream=True)):
            yield from _deltas(chunks)

    def close(self) -> None:
        self.chat.close()


def _deltas(chunks: list[dict[str, Any]]) -> Iterator[Delta]:
    """The deltas of a read's chunks, each run of chunks that hold only text for the
    first choice made one delta (as ``proxy_stream.joined`` does, without a delta per
    chunk: most chunks are such)."""
    texts: list[str] = []
    for chunk in chunks:
        choices = chunk["choices"]
        choice = choices[0] if len(choices) == 1 else None
        if type(choice) is dict and chunk.get("usage") is None \
                and not choice.get("finish_reason") and not choice.get("index", 0):
            delta = choice.get("delta")
            if type(delta) is dict and not delta.get("tool_calls"):
                content = delta.get("content")
                if type(content) is str:
                    texts.append(content)
                    continue
        if text := "".join(texts):
            yield Delta(content=text)
        texts.clear()
        yield from _chunk_deltas(chunk)
    if text := "".join(texts):
        yield Delta(content=text)


def _chunk_deltas(chunk: dict[str, Any]) -> Iterator[Delta]:
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        yield Delta(usage=read_usage(usage))
    for choice in chunk["choices"]:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = mapping(choice.get("delta"))
        yield Delta(content=message_text(delta.get("content")),
                    finish_reason=choice.get("finish_reason"),
                    tool_calls=delta.get("tool_calls") or None)
