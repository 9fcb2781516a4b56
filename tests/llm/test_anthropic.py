"""AnthropicChat against a real HTTP server on 127.0.0.1 (see conftest.py)."""

from __future__ import annotations

import socket

import pytest

from loci.errors import ConfigError, ProviderError
from loci.llm import AnthropicChat
from loci.llm.anthropic import CONVERSATION_START, to_anthropic
from tests.llm.conftest import ANTHROPIC_STREAM, ChatServer

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Look up the weather."},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "weather", "content": "-3 C, snow"},
    {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    {"role": "system", "content": "Answer in English."},
]


def test_conversion_to_the_messages_api() -> None:
    system, turns = to_anthropic(MESSAGES)
    assert system == "Be brief.\n\nAnswer in English."
    assert turns == [
        {"role": "user", "content": "Look up the weather."},
        {"role": "assistant",
         "content": 'Checking.\n[tool call: weather({"city": "Oslo"})]'},
        {"role": "user", "content": "[tool result: weather]\n-3 C, snow\n\nAnd tomorrow?"},
    ]


def test_conversion_starts_with_a_user_turn_and_drops_empty_messages() -> None:
    system, turns = to_anthropic([
        {"role": "assistant", "content": "Earlier answer."},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "More."},
    ])
    assert system == ""
    assert turns == [
        {"role": "user", "content": CONVERSATION_START},
        {"role": "assistant", "content": "Earlier answer.\n\nMore."},
    ]
    assert to_anthropic([])[1] == [{"role": "user", "content": CONVERSATION_START}]


def test_complete_posts_v1_messages(chat_server: ChatServer) -> None:
    with AnthropicChat("claude-test", base_url=chat_server.base("ok", ""),
                       api_key="sk-ant-secret", max_tokens=300) as chat:
        reply = chat.complete(MESSAGES)
        assert chat.name == "anthropic:claude-test"
    assert reply.content == "Hi there"
    assert reply.model == "claude-served"
    assert (reply.input_tokens, reply.output_tokens) == (20, 3)
    request = chat_server.last
    assert request["path"] == "/ok/v1/messages"
    assert request["headers"]["x-api-key"] == "sk-ant-secret"
    assert request["headers"]["anthropic-version"] == "2023-06-01"
    body = request["body"]
    assert body["model"] == "claude-test" and body["max_tokens"] == 300
    assert body["system"] == "Be brief.\n\nAnswer in English."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert "stream" not in body


def test_base_url_may_end_in_v1_and_max_tokens_per_call(chat_server: ChatServer) -> None:
    with AnthropicChat("claude-test", base_url=chat_server.base("ok"), api_key="k") as chat:
        chat.complete([{"role": "user", "content": "hi"}], max_tokens=7)
    assert chat_server.last["path"] == "/ok/v1/messages"
    assert chat_server.last["body"]["max_tokens"] == 7
    assert "system" not in chat_server.last["body"]


def test_stream_yields_text_deltas(chat_server: ChatServer) -> None:
    with AnthropicChat("claude-test", base_url=chat_server.base("ok", ""), api_key="k") as chat:
        parts = list(chat.stream(MESSAGES, max_tokens=64))
    assert parts == ANTHROPIC_STREAM
    assert chat_server.last["body"]["stream"] is True
    assert chat_server.last["body"]["max_tokens"] == 64


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("overloaded", r"HTTP 529: Overloaded; the server failed or is overloaded"),
        ("badjson", r"did not answer JSON"),
        ("nocontent", r"without a 'content' list"),
        ("nomode", r"HTTP 404"),
    ],
)
def test_complete_errors(chat_server: ChatServer, mode: str, message: str) -> None:
    with (
        AnthropicChat("claude-test", base_url=chat_server.base(mode, ""), api_key="k") as chat,
        pytest.raises(ProviderError, match=message),
    ):
        chat.complete(MESSAGES)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("overloaded", r"HTTP 529: Overloaded"),
        ("badsse", r"malformed event"),
        ("streamerror", r"error mid-stream: Overloaded"),
    ],
)
def test_stream_errors(chat_server: ChatServer, mode: str, message: str) -> None:
    with (
        AnthropicChat("claude-test", base_url=chat_server.base(mode, ""), api_key="k") as chat,
        pytest.raises(ProviderError, match=message),
    ):
        list(chat.stream(MESSAGES))


def test_timeout_and_connection_refused(chat_server: ChatServer) -> None:
    with (
        AnthropicChat("c", base_url=chat_server.base("slow", ""), api_key="k",
                      timeout=0.2) as chat,
        pytest.raises(ProviderError, match=r"did not answer within 0\.2s"),
    ):
        chat.complete(MESSAGES)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        AnthropicChat("c", base_url=f"http://127.0.0.1:{port}", api_key="k") as chat,
        pytest.raises(ProviderError, match=r"cannot reach the Anthropic API"),
    ):
        chat.complete(MESSAGES)


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="needs an API key"):
        AnthropicChat("claude-haiku-4-5")
    with pytest.raises(ConfigError, match="model name"):
        AnthropicChat("", api_key="k")
    with pytest.raises(ConfigError, match="max_tokens"):
        AnthropicChat("c", api_key="k", max_tokens=0)
