"""What the proxy and its upstreams exchange: the request around Loci's compiled
context, and answers reduced to one shape whatever the upstream (a
:class:`Completion`, or a stream of :class:`Delta`), checked before anything of them is
stored (``sound_completion``, ``sound_calls``, ``sound_text``): an answer no API gives
(a tool call without an id or a function name, text with a lone surrogate) is the
upstream's failure, a 502, and the turn is not recorded."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from loci.context.compiled import CompiledContext
from loci.errors import ProviderError
from loci.llm.answers import Completion
from loci.models import Usage


@dataclass(frozen=True)
class UpstreamRequest:
    """What to send: the client's model and parameters around Loci's compiled context."""

    model: str
    context: CompiledContext
    #: The client's own system text, sent before Loci's context: text blocks, with the
    #: client's ``cache_control`` where it set one (``system_blocks``).
    system: list[dict[str, Any]]
    params: dict[str, Any]
    #: Images, documents, audio of the new message, as the client sent them
    #: (``llm.media``): they follow its text.
    attachments: list[dict[str, Any]] = field(default_factory=list)
    #: The client's ``anthropic-beta`` header, for an Anthropic upstream: the features
    #: it enables (the memory tool, context management, ...) are the client's to ask.
    beta: str | None = None


@dataclass
class Delta:
    content: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None
    #: OpenAI-shaped pieces of tool calls, each with the call's ``index``.
    tool_calls: list[Any] | None = None
    #: Whole provider blocks (see :class:`Completion`), each once it has ended.
    blocks: list[dict[str, Any]] | None = None


class Upstream(Protocol):
    def complete(self, request: UpstreamRequest) -> Completion: ...

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]: ...

    def close(self) -> None: ...


def chat_usage(usage: Usage) -> dict[str, Any]:
    """OpenAI's Chat Completions ``usage`` object."""
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}


class MalformedReplyError(ProviderError):
    """The upstream answered something its API never answers."""


def sound_text(text: Any, what: str = "text") -> str:
    if not isinstance(text, str):
        raise MalformedReplyError(f"the upstream answered {what} that is not a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedReplyError(f"the upstream answered {what} that is not valid Unicode "
                                  "(a lone surrogate)") from None
    return text


def sound_calls(calls: list[Any] | None) -> None:
    """Each tool call is an object with an id and a function name (OpenAI's shape)."""
    for call in calls or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise MalformedReplyError("the upstream answered a tool call without a function")
        if not call.get("id") or not isinstance(call["id"], str):
            raise MalformedReplyError("the upstream answered a tool call without an id")
        if not function.get("name") or not isinstance(function["name"], str):
            raise MalformedReplyError("the upstream answered a tool call without a "
                                      "function name")
        arguments = function.get("arguments")
        if not isinstance(arguments, str | dict | None):
            raise MalformedReplyError("the upstream answered tool-call arguments that are "
                                      "neither a JSON string nor an object")
        sound_text(call["id"] + function["name"] + (
            arguments if isinstance(arguments, str) else ""), "a tool call")


def sound_completion(answer: Completion) -> Completion:
    """``answer``, if every part of it can be recorded and relayed."""
    sound_text(answer.content)
    sound_calls(answer.tool_calls)
    if not all(isinstance(block, dict) for block in answer.blocks or ()):
        raise MalformedReplyError("the upstream answered a content block that is not an "
                                  "object")
    return answer
