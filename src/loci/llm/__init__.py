"""Chat providers for summaries and extraction behind one small interface.

``make_chat_model(provider, **options)`` is the one seam the rest of Loci uses::

    make_chat_model("extractive")                        # offline, no model (default)
    make_chat_model("openai", model="gpt-4.1-mini", api_key="sk-...")
    make_chat_model("openai", model="llama3.2", base_url="http://localhost:11434/v1")
    make_chat_model("anthropic", model="claude-haiku-4-5", api_key="sk-ant-...")
    make_chat_model("scripted", replies=["a canned answer"])   # test double

Every provider implements :class:`ChatModel` (``complete(messages, max_tokens=None)``);
the HTTP providers also ``stream`` text deltas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loci.errors import ConfigError
from loci.llm.anthropic import AnthropicChat
from loci.llm.base import ChatModel, ChatReply
from loci.llm.extractive import ExtractiveSummarizer
from loci.llm.openai_compat import OpenAICompatibleChat
from loci.llm.scripted import ScriptedChatModel
from loci.providers import provider_options

__all__ = [
    "DEFAULT_PROVIDER",
    "PROVIDERS",
    "AnthropicChat",
    "ChatModel",
    "ChatReply",
    "ExtractiveSummarizer",
    "OpenAICompatibleChat",
    "ScriptedChatModel",
    "make_chat_model",
]

DEFAULT_PROVIDER = "extractive"

#: Provider names (and aliases) accepted by :func:`make_chat_model`.
PROVIDERS: dict[str, Callable[..., ChatModel]] = {
    "extractive": ExtractiveSummarizer,
    "openai": OpenAICompatibleChat,
    "openai-compatible": OpenAICompatibleChat,
    "anthropic": AnthropicChat,
    "scripted": ScriptedChatModel,
}
#: Connection options that offline providers ignore rather than reject, so one set of
#: settings can be passed whichever provider is chosen.
_NETWORK_OPTIONS = frozenset({"base_url", "api_key", "timeout", "temperature"})
_OFFLINE = frozenset({"extractive", "scripted"})


def make_chat_model(provider: str = DEFAULT_PROVIDER, **options: Any) -> ChatModel:
    """Build the chat model called ``provider`` with its keyword options.

    Options whose value is ``None`` or ``""`` are dropped, so unset settings fall back to
    each provider's defaults. Unknown providers or options raise ``ConfigError``.
    """
    key = (provider or DEFAULT_PROVIDER).strip().lower()
    key, factory, given = provider_options(
        "chat", PROVIDERS, provider, DEFAULT_PROVIDER, options,
        _NETWORK_OPTIONS if key in _OFFLINE else frozenset())
    if key in ("openai", "openai-compatible", "anthropic") and "model" not in given:
        example = "claude-haiku-4-5" if key == "anthropic" else "gpt-4.1-mini' or 'llama3.2"
        raise ConfigError(f"chat provider {key!r} needs a model (llm.model, e.g. '{example}')")
    return factory(**given)
