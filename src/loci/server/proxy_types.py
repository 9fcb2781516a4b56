"""What the proxy and its upstreams exchange: the request around Loci's compiled
context, and answers reduced to one shape whatever the upstream (a
:class:`Completion`, or a stream of :class:`Delta`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from loci.context.compiled import CompiledContext
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
