"""The proxy's upstream model: an OpenAI-compatible server or Anthropic, reached through
Loci's own chat providers (``loci.llm``), and answers reduced to one shape.

The upstream is ``[proxy] provider`` (``openai`` or ``anthropic``; empty means the
``[llm]`` provider when that is one of the two), ``[proxy] base_url`` and
``[proxy] api_key`` (empty: the ``[llm]`` ones). The model is the client's. Whatever
the upstream, the proxy sees a :class:`Completion` or a stream of :class:`Delta`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from loci.context.compiled import CompiledContext
from loci.errors import ConfigError, ValidationError
from loci.llm._http import message_text, usage_int
from loci.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from loci.llm.anthropic import AnthropicChat, delta_text, reply_text
from loci.llm.openai_compat import DEFAULT_BASE_URL as OPENAI_URL
from loci.llm.openai_compat import OpenAICompatibleChat
from loci.settings import Settings

#: Request fields the proxy handles itself instead of forwarding.
OWN_FIELDS = frozenset({"model", "messages", "stream", "user"})
#: Anthropic needs max_tokens; this is used when the client gives none.
ANTHROPIC_MAX_TOKENS = 4096
#: Seconds to wait for the upstream: long answers take long.
UPSTREAM_TIMEOUT = 600.0
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                 "tool_use": "tool_calls"}


class NoUpstreamError(ConfigError):
    """The proxy has no upstream model configured."""

    http_status = 503


@dataclass(frozen=True)
class UpstreamRequest:
    """What to send: the client's model and parameters around Loci's compiled context."""

    model: str
    context: CompiledContext
    #: The client's own system messages, sent before Loci's context.
    system: list[str]
    params: dict[str, Any]


@dataclass
class Completion:
    content: str
    finish_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)
    tool_calls: list[Any] | None = None
    id: str | None = None


@dataclass
class Delta:
    content: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    tool_calls: list[Any] | None = None


class Upstream(Protocol):
    def complete(self, request: UpstreamRequest) -> Completion: ...

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]: ...

    def close(self) -> None: ...


def make_upstream(settings: Settings) -> Upstream:
    """The configured upstream, or a NoUpstreamError saying how to configure one."""
    provider = (settings.proxy_provider or settings.llm_provider).strip().lower()
    base_url = settings.proxy_base_url or settings.llm_base_url
    api_key = settings.proxy_api_key or settings.llm_api_key or None
    # The providers want a default model; the proxy always sends the client's.
    model = settings.llm_model or settings.model
    if provider in ("openai", "openai-compatible"):
        return OpenAIUpstream(OpenAICompatibleChat(
            model, base_url or OPENAI_URL, api_key, timeout=UPSTREAM_TIMEOUT))
    if provider == "anthropic":
        return AnthropicUpstream(AnthropicChat(
            model, base_url or ANTHROPIC_URL, api_key, timeout=UPSTREAM_TIMEOUT))
    raise NoUpstreamError(
        "the proxy has no upstream model: set [proxy] provider = \"openai\" (any "
        "OpenAI-compatible base_url) or \"anthropic\", with base_url and api_key, in "
        "loci.toml (or LOCI_PROXY_PROVIDER, LOCI_PROXY_BASE_URL, LOCI_PROXY_API_KEY)")


class OpenAIUpstream:
    """Any OpenAI-compatible server: the client's parameters (tools included) pass
    through unchanged."""

    def __init__(self, chat: OpenAICompatibleChat) -> None:
        self.chat = chat

    def _body(self, request: UpstreamRequest, stream: bool) -> dict[str, Any]:
        system = [{"role": "system", "content": text} for text in request.system]
        body = {**request.params, "model": request.model,
                "messages": system + request.context.to_openai()}
        if stream:
            body["stream"] = True
        return body

    def complete(self, request: UpstreamRequest) -> Completion:
        payload = self.chat.chat(self._body(request, stream=False))
        choice = payload["choices"][0]
        message = choice["message"]
        return Completion(
            content=message_text(message.get("content")),
            finish_reason=str(choice.get("finish_reason") or "stop"),
            usage=_openai_usage(payload.get("usage")),
            tool_calls=message.get("tool_calls") or None,
            id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        )

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]:
        for chunk in self.chat.chat_stream(self._body(request, stream=True)):
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                yield Delta(usage=_openai_usage(usage))
            for choice in chunk["choices"]:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                delta = _mapping(choice.get("delta"))
                yield Delta(content=message_text(delta.get("content")),
                            finish_reason=choice.get("finish_reason"),
                            tool_calls=delta.get("tool_calls") or None)

    def close(self) -> None:
        self.chat.close()


class AnthropicUpstream:
    """The Anthropic Messages API: Loci's context goes out with cache-control blocks
    (``CompiledContext.to_anthropic``); OpenAI parameters are translated."""

    def __init__(self, chat: AnthropicChat) -> None:
        self.chat = chat

    def _body(self, request: UpstreamRequest, stream: bool) -> dict[str, Any]:
        params = request.params
        if params.get("tools"):
            raise ValidationError("tools are passed through to OpenAI-compatible upstreams "
                                  "only; this proxy's upstream is Anthropic")
        rendered = request.context.to_anthropic()
        own = [{"type": "text", "text": text} for text in request.system]
        body: dict[str, Any] = {
            "model": request.model, "system": own + rendered["system"],
            "messages": rendered["messages"],
            "max_tokens": params.get("max_tokens") or params.get("max_completion_tokens")
            or ANTHROPIC_MAX_TOKENS,
        }
        for name in ("temperature", "top_p"):
            if params.get(name) is not None:
                body[name] = params[name]
        stop = params.get("stop")
        if stop:
            body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        if stream:
            body["stream"] = True
        return body

    def complete(self, request: UpstreamRequest) -> Completion:
        payload = self.chat.send(self._body(request, stream=False))
        usage = payload.get("usage")
        return Completion(
            content=reply_text(payload),
            finish_reason=_STOP_REASONS.get(str(payload.get("stop_reason")), "stop"),
            usage=_usage(usage_int(usage, "input_tokens"), usage_int(usage, "output_tokens")),
            id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        )

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]:
        prompt = 0
        for kind, data in self.chat.send_stream(self._body(request, stream=True)):
            if kind == "message_start":
                message = data.get("message")
                usage = message.get("usage") if isinstance(message, dict) else None
                prompt = usage_int(usage, "input_tokens")
            elif kind == "content_block_delta":
                yield Delta(content=delta_text(data))
            elif kind == "message_delta":
                delta = _mapping(data.get("delta"))
                reason = _STOP_REASONS.get(str(delta.get("stop_reason")), "stop")
                output = usage_int(data.get("usage"), "output_tokens")
                yield Delta(finish_reason=reason, usage=_usage(prompt, output))

    def close(self) -> None:
        self.chat.close()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _openai_usage(usage: Any) -> dict[str, int]:
    if not isinstance(usage, Mapping):
        return {}
    return _usage(usage_int(usage, "prompt_tokens"), usage_int(usage, "completion_tokens"))
