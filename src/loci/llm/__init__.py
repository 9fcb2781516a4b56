"""Chat providers for summaries and extraction behind one small interface.

``make_chat_model(provider, **options)`` is the one seam the rest of Loci uses::

    make_chat_model("openai", model="gpt-4.1-mini", api_key="sk-...")
    make_chat_model("openai", model="llama3.2", base_url="http://localhost:11434/v1")
    make_chat_model("anthropic", model="claude-haiku-4-5", api_key="sk-ant-...")

Every provider implements :class:`ChatModel` (``complete(messages, max_tokens=None)``);
the HTTP providers also ``stream`` text deltas. ``[llm] provider = "extractive"`` (the
default) names no chat model: compaction then summarizes offline
(``loci.text.ExtractiveSummarizer``) and extraction uses its rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loci.errors import ConfigError
from loci.llm.anthropic import AnthropicChat
from loci.llm.base import ChatModel, ChatReply
from loci.llm.openai_compat import OpenAICompatibleChat
from loci.providers import provider_options

__all__ = [
    "OFFLINE",
    "PROVIDERS",
    "AnthropicChat",
    "ChatModel",
    "ChatReply",
    "OpenAICompatibleChat",
    "is_offline",
    "make_chat_model",
]

#: The ``[llm] provider`` that names no chat model: offline summaries and extraction.
OFFLINE = "extractive"

#: Provider names (and aliases) accepted by :func:`make_chat_model`.
PROVIDERS: dict[str, Callable[..., ChatModel]] = {
    "openai": OpenAICompatibleChat,
    "openai-compatible": OpenAICompatibleChat,
    "anthropic": AnthropicChat,
}


def is_offline(provider: str) -> bool:
    """Whether the ``[llm] provider`` setting names no chat model (empty or offline)."""
    return provider.strip().lower() in ("", OFFLINE)


def make_chat_model(provider: str, **options: Any) -> ChatModel:
    """Build the chat model called ``provider`` with its keyword options.

    Options whose value is ``None`` or ``""`` are dropped, so unset settings fall back to
    each provider's defaults. Unknown providers or options raise ``ConfigError``, and so
    does the offline one, which is no chat model (see :func:`is_offline`).
    """
    key = provider.strip().lower()
    if key not in PROVIDERS:
        known = ", ".join(sorted({*PROVIDERS, OFFLINE}))
        what = (f"chat provider {provider!r} names no chat model (offline summaries and "
                "extraction)") if is_offline(key) else f"unknown chat provider {provider!r}"
        raise ConfigError(f"{what}; known providers: {known}")
    key, factory, given = provider_options("chat", PROVIDERS, key, key, options)
    if "model" not in given:
        example = "claude-haiku-4-5" if key == "anthropic" else "gpt-4.1-mini' or 'llama3.2"
        raise ConfigError(f"chat provider {key!r} needs a model (llm.model, e.g. '{example}')")
    return factory(**given)
