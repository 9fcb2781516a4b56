"""The chat-provider seam: anything that turns chat messages into a reply.

Providers for OpenAI-compatible APIs, Anthropic and the offline extractive default
implement :class:`ChatModel`; the rest of Loci depends only on this protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ChatReply:
    """A model's answer and the token usage it reported (0 when unknown)."""

    content: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: ``complete`` takes OpenAI-style messages and returns a reply."""

    name: str

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> ChatReply: ...
