"""Chat completions from any server that speaks the OpenAI ``/chat/completions`` API.

The API shape is separate from the host: the same class talks to OpenAI
(``https://api.openai.com/v1``), Ollama (``http://localhost:11434/v1``), vLLM, LM Studio
or llama.cpp's server. ``complete`` POSTs the messages and returns the first choice with
the usage the server reported; ``stream`` asks for ``"stream": true`` and yields the
text deltas of the Server-Sent Events until ``data: [DONE]``. Every failure becomes a
:class:`~loci.errors.ProviderError` whose message says what to check.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlparse

from loci.apis.chat import text_only
from loci.apis.responses import text_delta as responses_text
from loci.apis.shapes import ChatAnswer, ChatAnswerChunk, ResponsesAnswer
from loci.apis.wire import JSONObject, message_text, usage_int
from loci.errors import ConfigError, ProviderError
from loci.llm._http import ChatTransport, check_base_url
from loci.llm._runs import TextRuns
from loci.llm.base import ChatReply

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: OpenAI reasoning models take ``max_completion_tokens`` and no ``temperature``.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


class OpenAICompatibleChat:
    """A chat model behind an OpenAI-compatible HTTP API."""

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 60,
        temperature: float = 0.0,
    ) -> None:
        if not model:
            raise ConfigError("the OpenAI-compatible chat model needs a model name (llm.model)")
        self.base_url = check_base_url(base_url, "llm")
        if not api_key and urlparse(self.base_url).hostname == "api.openai.com":
            raise ConfigError(
                "api.openai.com needs an API key: set llm.api_key (LOCI_LLM_API_KEY), "
                "or point llm.base_url at a local server such as http://localhost:11434/v1"
            )
        if timeout <= 0:
            raise ConfigError(f"timeout must be positive, got {timeout}")
        self.model = model
        self.name = f"openai:{model}"
        self.url = self.base_url + "/chat/completions"
        self.temperature = temperature
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = ChatTransport(
            self.url, headers, timeout, secret=api_key, what="the OpenAI-compatible server"
        )

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> ChatReply:
        """The model's reply to ``messages`` (OpenAI format), with token usage."""
        payload = self.chat(self._body(messages, max_tokens, stream=False))
        message = payload["choices"][0]["message"]  # checked by ``chat``
        usage = payload.get("usage")
        model = payload.get("model")
        return ChatReply(
            content=message_text(message.get("content")),
            model=model if isinstance(model, str) and model else self.model,
            input_tokens=usage_int(usage, "prompt_tokens", "input_tokens"),
            output_tokens=usage_int(usage, "completion_tokens", "output_tokens"),
        )

    def stream(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> Iterator[str]:
        """Yield the reply's text as the server streams it (``"stream": true``)."""
        for chunk in self.chat_stream(self._body(messages, max_tokens, stream=True)):
            for choice in chunk["choices"]:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                text = message_text(delta.get("content")) if isinstance(delta, dict) else ""
                if text:
                    yield text

    def chat(self, body: Mapping[str, Any]) -> ChatAnswer:
        """POST a whole request ``body`` (its own model and parameters, as the proxy
        forwards them) and return the answer, checked to hold a first choice with a
        message."""
        payload = self._http.post_json(body)
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderError(
                f"{self._http.where} answered without 'choices': is llm.base_url an "
                "OpenAI-compatible chat API (usually ending in /v1)?"
            )
        if not isinstance(choices[0].get("message"), dict):
            raise ProviderError(f"{self._http.where} answered a choice without a 'message'")
        return cast("ChatAnswer", payload)

    def chat_stream(self, body: Mapping[str, Any]) -> Iterator[ChatAnswerChunk]:
        """POST a whole streaming request ``body`` and yield each chunk object (with a
        ``choices`` list) until ``data: [DONE]``; an error event raises."""
        for chunks in self.chat_batches(body):
            yield from chunks

    def chat_batches(self, body: Mapping[str, Any]) -> Iterator[list[ChatAnswerChunk]]:
        """``chat_stream``'s chunks, those of one network read together."""
        finished = False
        runs = TextRuns("content", text_only)
        for chunks, done in self._http.stream_events(body, runs, end="[DONE]"):
            for chunk in chunks:
                choices = chunk.get("choices") if type(chunk) is dict else None
                if type(choices) is list and len(choices) == 1 \
                        and type(choices[0]) is dict and "error" not in chunk:
                    finished = finished or bool(choices[0].get("finish_reason"))
                else:  # not one choice: checked in full
                    finished = self._ends(chunk) or finished
            if chunks:
                yield chunks
            if done:
                return
        if not finished:  # cut short: what came is not the whole answer
            self._http.fail_stream("ended its stream before the answer's end")

    def _ends(self, chunk: Any) -> bool:
        """Whether a streamed ``chunk`` ends the answer; one that is not a chunk, or
        that reports an error, raises."""
        if not isinstance(chunk, dict):
            self._http.fail_stream("sent an event that is not a JSON object")
        if "error" in chunk:
            error = chunk["error"]
            detail = error.get("message") if isinstance(error, dict) else error
            raise ProviderError(f"{self._http.where} reported an error mid-stream: "
                                f"{self._http.redact(str(detail))}")
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            self._http.fail_stream("sent a chunk without 'choices'")
        return any(isinstance(c, dict) and c.get("finish_reason") for c in choices)

    def _body(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None, *, stream: bool
    ) -> JSONObject:
        body: JSONObject = {"model": self.model, "messages": [dict(m) for m in messages]}
        reasoning = self.model.lower().rsplit("/", 1)[-1].startswith(_REASONING_PREFIXES)
        if not reasoning:
            body["temperature"] = self.temperature
        if max_tokens is not None:
            body["max_completion_tokens" if reasoning else "max_tokens"] = max_tokens
        if stream:
            body["stream"] = True
        return body

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> OpenAICompatibleChat:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAICompatibleChat(model={self.model!r}, base_url={self.base_url!r})"


class OpenAIResponses:
    """OpenAI's Responses API (``POST {base_url}/responses``), whole requests as the
    proxy forwards them."""

    def __init__(self, base_url: str = DEFAULT_BASE_URL, api_key: str | None = None,
                 timeout: float = 60) -> None:
        url = check_base_url(base_url, "proxy") + "/responses"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = ChatTransport(url, headers, timeout, secret=api_key,
                                   what="the Responses API server")

    def send(self, body: Mapping[str, Any]) -> ResponsesAnswer:
        """The ``response`` object, checked to hold an ``output`` list."""
        payload = self._http.post_json(body)
        if not isinstance(payload, dict) or not isinstance(payload.get("output"), list):
            raise ProviderError(f"{self._http.where} answered without an 'output' list")
        return cast("ResponsesAnswer", payload)

    def send_stream(self, body: Mapping[str, Any]) -> Iterator[JSONObject]:
        """Each event object of the streamed answer; a failure event raises, and so
        does a stream that ends before the response does."""
        for events in self.send_batches(body):
            yield from events

    def send_batches(self, body: Mapping[str, Any]) -> Iterator[list[JSONObject]]:
        """``send_stream``'s events, those of one network read together."""
        ended = False
        for batch, _ in self._http.stream_events(body, TextRuns("delta", responses_text)):
            for data in batch:
                ended = self._ends(data) or ended
            yield batch
        if not ended:  # cut short: what came is not the whole answer
            self._http.fail_stream("ended its stream before the response's end")

    def _ends(self, data: Any) -> bool:
        """Whether a streamed event ends the response; one that is not an event
        object, or that reports a failure, raises."""
        if not isinstance(data, dict):
            self._http.fail_stream("sent an event that is not a JSON object")
        if data.get("type") in ("response.failed", "error"):
            response = data.get("response")
            error = response.get("error") if isinstance(response, dict) else data
            detail = error.get("message") if isinstance(error, dict) else error
            raise ProviderError(f"{self._http.where} reported an error mid-stream: "
                                f"{self._http.redact(str(detail or data))}")
        return data.get("type") in ("response.completed", "response.incomplete")

    def close(self) -> None:
        self._http.close()
