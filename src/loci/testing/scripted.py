"""A scripted chat model: the test double shipped in the package.

It answers from a list of canned replies (or a function of the messages) and records
every request, so tests exercise real code paths without a paid API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loci import ProviderError
from loci.llm.base import ChatReply

Responder = Callable[[Sequence[Mapping[str, Any]]], str]


class ScriptedChatModel:
    """Replies with ``replies`` in order, or with ``responder(messages)``."""

    def __init__(
        self, replies: Sequence[str] = (), *, responder: Responder | None = None,
        name: str = "scripted",
    ) -> None:
        self.name = name
        self._replies = list(replies)
        self._responder = responder
        self.requests: list[list[dict[str, Any]]] = []

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> ChatReply:
        self.requests.append([dict(m) for m in messages])
        if self._responder is not None:
            text = self._responder(messages)
        elif self._replies:
            text = self._replies.pop(0)
        else:
            raise ProviderError("the scripted chat model has no replies left")
        if max_tokens is not None:
            text = text[: max_tokens * 4]
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        return ChatReply(text, self.name, prompt_chars // 4, len(text) // 4)
