"""Chat completions from Anthropic's Messages API (``POST /v1/messages``).

OpenAI-style messages are converted on the way out: system messages are joined into
the top-level ``system`` field, assistant tool calls become a line of assistant text,
tool results become user text, empty messages are dropped, consecutive messages of the
same role are merged and the conversation is made to start with a user turn, as the API
requires. ``stream`` yields the ``text_delta`` of each ``content_block_delta`` event.
Every failure becomes a :class:`~loci.errors.ProviderError` saying what to check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlparse

from loci.apis.shapes import AnthropicAnswer
from loci.apis.wire import JSONObject, message_text, usage_int
from loci.errors import ConfigError, ProviderError
from loci.llm._http import ChatTransport, check_base_url
from loci.llm._runs import TextRuns
from loci.llm.base import ChatReply

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
#: Placeholder first turn when a conversation would otherwise start with the assistant.
CONVERSATION_START = "(conversation start)"


class AnthropicChat:
    """A Claude model behind the Anthropic Messages API (or a compatible proxy)."""

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 60,
        max_tokens: int = 1024,
        temperature: float | None = 0.0,
    ) -> None:
        if not model:
            raise ConfigError("the Anthropic chat model needs a model name (llm.model)")
        self.base_url = check_base_url(base_url, "llm")
        if not api_key and urlparse(self.base_url).hostname == "api.anthropic.com":
            raise ConfigError("api.anthropic.com needs an API key: set llm.api_key "
                              "(LOCI_LLM_API_KEY)")
        if timeout <= 0:
            raise ConfigError(f"timeout must be positive, got {timeout}")
        if max_tokens < 1:
            raise ConfigError(f"max_tokens must be at least 1, got {max_tokens}")
        self.model = model
        self.name = f"anthropic:{model}"
        self.max_tokens = max_tokens
        self.temperature = temperature
        # Accept base URLs given with or without the /v1 suffix.
        root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        self.url = root + "/v1/messages"
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self._http = ChatTransport(self.url, headers, timeout, secret=api_key,
                                   what="the Anthropic API")

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> ChatReply:
        """The model's reply to ``messages`` (OpenAI format), with token usage."""
        payload = self.send(self._body(messages, max_tokens, stream=False))
        usage = payload.get("usage")
        model = payload.get("model")
        return ChatReply(
            content=reply_text(payload),
            model=model if isinstance(model, str) and model else self.model,
            input_tokens=usage_int(usage, "input_tokens"),
            output_tokens=usage_int(usage, "output_tokens"),
        )

    def stream(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> Iterator[str]:
        """Yield the reply's text as the API streams it."""
        for _, data in self.send_stream(self._body(messages, max_tokens, stream=True)):
            if text := text_delta(data):
                yield text

    def send(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
             ) -> AnthropicAnswer:
        """POST a whole Messages request ``body`` (system blocks, messages, the
        caller's parameters, as the proxy builds it; ``headers`` such as
        ``anthropic-beta``) and return the answer, checked to hold a ``content`` list."""
        payload = self._http.post_json(body, headers)
        blocks = payload.get("content") if isinstance(payload, dict) else None
        if not isinstance(blocks, list):
            raise ProviderError(
                f"{self._http.where} answered without a 'content' list: is llm.base_url the "
                "Anthropic Messages API?"
            )
        return cast("AnthropicAnswer", payload)

    def send_stream(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
                    ) -> Iterator[tuple[str, JSONObject]]:
        """POST a whole streaming request ``body`` and yield ``(event type, data)``
        until ``message_stop``; an ``error`` event raises."""
        for events in self.send_batches(body, headers):
            yield from events

    def send_batches(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
                     ) -> Iterator[list[tuple[str, JSONObject]]]:
        """``send_stream``'s events, those of one network read together (their JSON
        decoded in one call; each event's data names its type)."""
        for decoded, _ in self._http.stream_events(body, TextRuns("text", text_delta), headers):
            events: list[tuple[str, JSONObject]] = []
            for data in decoded:
                if not isinstance(data, dict):
                    self._http.fail_stream("sent an event that is not a JSON object")
                kind = str(data.get("type", ""))
                if kind == "error":
                    error = data.get("error")
                    detail = error.get("message") if isinstance(error, dict) else error
                    raise ProviderError(f"{self._http.where} reported an error mid-stream: "
                                        f"{self._http.redact(str(detail))}; retry later")
                if kind == "message_stop":
                    if events:
                        yield events
                    return
                events.append((kind, data))
            if events:
                yield events
        # Cut short: what came is not the whole answer.
        self._http.fail_stream("ended its stream before message_stop")

    def _body(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None, *, stream: bool
    ) -> JSONObject:
        system, turns = to_anthropic(messages)
        body: JSONObject = {
            "model": self.model,
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
            "messages": turns,
        }
        if system:
            body["system"] = system
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if stream:
            body["stream"] = True
        return body

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> AnthropicChat:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AnthropicChat(model={self.model!r}, base_url={self.base_url!r})"


def reply_text(payload: Mapping[str, Any]) -> str:
    """The text blocks of a Messages answer, joined."""
    blocks = payload.get("content")
    return "".join(
        b["text"] for b in blocks or ()
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def text_delta(data: Any) -> str | None:
    """The text of a ``content_block_delta`` event that adds text, else None."""
    if type(data) is not dict or data.get("type") != "content_block_delta":
        return None
    delta = data.get("delta")
    if type(delta) is dict and delta.get("type") == "text_delta":
        text = delta.get("text")
        return text if type(text) is str else None
    return None


def to_anthropic(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[str, list[dict[str, str]]]:
    """OpenAI-style messages → (system text, alternating user/assistant turns)."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = str(message.get("role", "user"))
        text = message_text(message.get("content")).strip()
        if role in ("system", "developer"):
            if text:
                system.append(text)
            continue
        if role == "tool":
            name = message.get("name") or message.get("tool_call_id") or "tool"
            role, text = "user", f"[tool result: {name}]\n{text}" if text else ""
        elif role == "assistant":
            calls = [_describe_call(c) for c in message.get("tool_calls") or ()]
            text = "\n".join([text, *calls]).strip()
        elif role != "user":
            role = "user"
        if not text:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": CONVERSATION_START})
    return "\n\n".join(system), turns


def _describe_call(call: Any) -> str:
    """One line for an OpenAI ``tool_calls`` item: ``[tool call: name(arguments)]``."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return f"[tool call: {json.dumps(call, default=str)[:500]}]"
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, default=str)
    return f"[tool call: {function.get('name', 'tool')}({arguments})]"
