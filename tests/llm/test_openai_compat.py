"""OpenAICompatibleChat against a real HTTP server on 127.0.0.1 (see conftest.py)."""

from __future__ import annotations

import socket

import pytest

from loci.errors import ConfigError, ProviderError
from loci.llm import OpenAICompatibleChat
from tests.llm.conftest import OPENAI_STREAM, ChatServer

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Say hello."},
]


def test_complete_posts_chat_completions_and_reads_usage(chat_server: ChatServer) -> None:
    with OpenAICompatibleChat(
        "test-model", base_url=chat_server.base("ok") + "/", api_key="sk-secret-123",
        temperature=0.2,
    ) as chat:
        reply = chat.complete(MESSAGES, max_tokens=50)
        assert chat.name == "openai:test-model"
    assert reply.content == "Hello from the server"
    assert reply.model == "served-model"
    assert (reply.input_tokens, reply.output_tokens) == (12, 5)
    request = chat_server.last
    assert request["path"] == "/ok/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-secret-123"
    assert request["body"] == {
        "model": "test-model", "messages": MESSAGES, "temperature": 0.2, "max_tokens": 50,
    }


def test_without_a_key_no_authorization_header_is_sent(chat_server: ChatServer) -> None:
    with OpenAICompatibleChat("llama3.2", base_url=chat_server.base("nousage")) as chat:
        reply = chat.complete([{"role": "user", "content": "hi"}])
    assert reply == type(reply)("", "llama3.2", 0, 0)
    assert "authorization" not in chat_server.last["headers"]
    assert "max_tokens" not in chat_server.last["body"]


def test_reasoning_models_get_max_completion_tokens(chat_server: ChatServer) -> None:
    with OpenAICompatibleChat("o3-mini", base_url=chat_server.base("ok")) as chat:
        chat.complete(MESSAGES, max_tokens=9)
    body = chat_server.last["body"]
    assert body["max_completion_tokens"] == 9
    assert "temperature" not in body and "max_tokens" not in body


def test_stream_yields_deltas_until_done(chat_server: ChatServer) -> None:
    with OpenAICompatibleChat("test-model", base_url=chat_server.base("ok"), api_key="k") as chat:
        parts = list(chat.stream(MESSAGES, max_tokens=20))
    assert parts == OPENAI_STREAM  # nothing after [DONE], no empty role/finish chunks
    body = chat_server.last["body"]
    assert body["stream"] is True and body["max_tokens"] == 20
    assert chat_server.last["path"] == "/ok/v1/chat/completions"


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", r"HTTP 500: model overloaded, try again; the server failed"),
        ("badjson", r"did not answer JSON .*llm\.base_url"),
        ("nochoices", r"answered without 'choices'"),
        ("nomode", r"HTTP 404: no such mode; check llm\.base_url and llm\.model"),
    ],
)
def test_complete_errors_say_what_to_check(
    chat_server: ChatServer, mode: str, message: str
) -> None:
    with (
        OpenAICompatibleChat("m", base_url=chat_server.base(mode)) as chat,
        pytest.raises(ProviderError, match=message),
    ):
        chat.complete(MESSAGES)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", r"HTTP 500: model overloaded"),
        ("badsse", r"malformed event .*supports streaming"),
        ("streamerror", r"error mid-stream: context too long"),
        ("badjson", r"instead of an event stream"),
    ],
)
def test_stream_errors(chat_server: ChatServer, mode: str, message: str) -> None:
    with (
        OpenAICompatibleChat("m", base_url=chat_server.base(mode)) as chat,
        pytest.raises(ProviderError, match=message),
    ):
        list(chat.stream(MESSAGES))


def test_the_api_key_is_never_echoed(chat_server: ChatServer) -> None:
    chat = OpenAICompatibleChat("m", base_url=chat_server.base("unauthorized"),
                                api_key="sk-secret-123")
    with pytest.raises(ProviderError, match=r"HTTP 401: .*check the API key") as info:
        chat.complete(MESSAGES)
    assert "sk-secret-123" not in str(info.value)
    assert "sk-secret-123" not in repr(chat)
    chat.close()


def test_timeout(chat_server: ChatServer) -> None:
    with (
        OpenAICompatibleChat("m", base_url=chat_server.base("slow"), timeout=0.2) as chat,
        pytest.raises(ProviderError, match=r"did not answer within 0\.2s"),
    ):
        chat.complete(MESSAGES)


def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with OpenAICompatibleChat("m", base_url=f"http://127.0.0.1:{port}/v1") as chat:
        with pytest.raises(ProviderError, match=r"cannot reach .*check llm\.base_url"):
            chat.complete(MESSAGES)
        with pytest.raises(ProviderError, match=r"cannot reach"):
            list(chat.stream(MESSAGES))


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="model name"):
        OpenAICompatibleChat("")
    with pytest.raises(ConfigError, match="http"):
        OpenAICompatibleChat("m", base_url="localhost:11434/v1")
    with pytest.raises(ConfigError, match="needs an API key"):
        OpenAICompatibleChat("gpt-4.1-mini")
    with pytest.raises(ConfigError, match="timeout"):
        OpenAICompatibleChat("m", base_url="http://localhost:1/v1", timeout=0)
