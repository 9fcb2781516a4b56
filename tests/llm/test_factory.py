"""make_chat_model: the one seam that builds chat providers from settings."""

from __future__ import annotations

import pytest

from loci.errors import ConfigError
from loci.llm import AnthropicChat, ChatModel, OpenAICompatibleChat, is_offline, make_chat_model
from loci.llm._http import parse_sse
from loci.testing import ScriptedChatModel
from tests.llm.conftest import ChatServer


def test_the_offline_provider_is_no_chat_model() -> None:
    """``[llm] provider = "extractive"`` (the default) builds no chat model: compaction
    summarizes offline (tests/llm/test_extractive.py)."""
    for name in ("extractive", " Extractive ", ""):
        assert is_offline(name)
        with pytest.raises(ConfigError, match="names no chat model"):
            make_chat_model(name, base_url="", api_key=None, timeout=30)
    assert not is_offline("openai")


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
    """The test double is no provider a setting can name; it is built directly."""
    with pytest.raises(ConfigError, match="unknown chat provider"):
        make_chat_model("scripted", replies=["canned"])
    model: ChatModel = ScriptedChatModel(["canned"])
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
