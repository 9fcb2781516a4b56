"""make_chat_model: the one seam that builds chat providers from settings."""

from __future__ import annotations

import pytest

from loci.errors import ConfigError
from loci.llm import (
    AnthropicChat,
    ChatModel,
    ExtractiveSummarizer,
    OpenAICompatibleChat,
    ScriptedChatModel,
    make_chat_model,
)
from loci.llm._http import parse_sse
from tests.llm.conftest import ChatServer


def test_default_is_the_offline_extractive_summarizer() -> None:
    model = make_chat_model()
    assert isinstance(model, ExtractiveSummarizer)
    assert isinstance(model, ChatModel)
    # Connection settings meant for another provider are ignored, empty ones dropped.
    model = make_chat_model("extractive", base_url="", api_key=None, timeout=30, max_tokens=300)
    assert isinstance(model, ExtractiveSummarizer) and model.max_tokens == 300


def test_http_providers_and_aliases(chat_server: ChatServer) -> None:
    for name in ("openai", "openai-compatible", " OpenAI "):
        model = make_chat_model(name, model="m", base_url=chat_server.base("ok"), api_key="")
        assert isinstance(model, OpenAICompatibleChat)
        assert model.complete([{"role": "user", "content": "hi"}]).content
        model.close()
    anthropic = make_chat_model("anthropic", model="c", base_url=chat_server.base("ok", ""),
                                api_key="k", timeout=None)
    assert isinstance(anthropic, AnthropicChat)
    assert anthropic.complete([{"role": "user", "content": "hi"}]).content == "Hi there"
    anthropic.close()


def test_scripted() -> None:
    model = make_chat_model("scripted", replies=["canned"])
    assert isinstance(model, ScriptedChatModel)
    assert model.complete([{"role": "user", "content": "x"}]).content == "canned"


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"known providers: anthropic, extractive, openai"):
        make_chat_model("gemini")


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match=r"does not take option\(s\) colour"):
        make_chat_model("openai", model="m", base_url="http://x/v1", colour="red")
    with pytest.raises(ConfigError, match="needs a model"):
        make_chat_model("anthropic", model="", api_key="k")


def test_sse_parsing() -> None:
    lines = iter([": comment", "event: a", "data: one", "data:two", "", "", "data: last"])
    events = list(parse_sse(lines))
    assert [(e.event, e.data) for e in events] == [("a", "one\ntwo"), ("", "last")]
