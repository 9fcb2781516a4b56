import pytest

from loci import ConfigError, context_window, token_counter
from loci.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    MemoCounts,
    compaction_threshold,
    encoding_for,
    heuristic_count,
)


def test_exact_counts_match_the_openai_encodings() -> None:
    # Known tiktoken ids: "hello world" is [15339, 1917] in cl100k and 2 tokens in o200k.
    assert token_counter("gpt-4").count("hello world") == 2
    assert token_counter("gpt-4").method == "exact:cl100k_base"
    assert token_counter("gpt-4o").method == "exact:o200k_base"
    text = "Tokenization of 'Lisbon' — naïve café ☕ 12345678"
    assert token_counter("gpt-4").count(text) != token_counter("gpt-4o").count(text)


def test_other_vendors_use_a_proxy_encoding_and_heuristic_is_available() -> None:
    assert token_counter("claude-sonnet-4-6").method == "proxy:cl100k_base"
    heuristic = token_counter("gpt-4", "heuristic")
    assert heuristic.method == "heuristic"
    assert heuristic.count("x" * 9) == 3 == heuristic_count("123456789")
    assert heuristic.count("") == 0


def test_unknown_tokenizer_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        token_counter("gpt-4", "no-such-encoding")


def test_message_overhead() -> None:
    counter = token_counter("gpt-4")
    msgs = [{"role": "user", "content": "hello world"}]
    assert counter.count_message("user", "hello world") == 1 + 2 + MESSAGE_OVERHEAD
    assert counter.count_messages(msgs) == 1 + 2 + MESSAGE_OVERHEAD + REPLY_PRIMING


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-6", 200_000),
        ("gpt-4.1-mini", 128_000),
        ("gemini-2.5-flash", 1_048_576),
        ("gemini-3-pro-preview", 1_048_576),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("gpt-5.1", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("claude-opus-4-5", 200_000),
        ("claude-sonnet-4-8", 200_000),
        ("claude-opus-4-1-20250805", 200_000),
        ("ollama/llama3", 8_192),
        ("something-unknown", 8_192),
    ],
)
def test_window_table(model: str, window: int) -> None:
    assert context_window(model) == window


def test_window_table_is_extendable_and_threshold_is_a_fraction() -> None:
    assert context_window("my-llm", {"my-llm": 32_000}) == 32_000
    assert context_window("ollama/big", {"ollama/big": 65_536}) == 65_536
    assert compaction_threshold("gpt-4.1") == 96_000
    assert compaction_threshold("claude-opus-4-6", 0.5) == 100_000
    with pytest.raises(ConfigError):
        compaction_threshold("gpt-4.1", 1.5)


def test_encoding_for_strips_provider_prefix() -> None:
    assert encoding_for("openai/gpt-4o-mini") == ("o200k_base", True)


def test_remembered_counts_are_bounded_by_characters_least_recently_used_first() -> None:
    """The compiler's memo of token counts holds at most its budget of characters: a
    server's compiles render new prompts all the time, and a count of entries let
    thousands of them stay in memory."""
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text.split())

    memo = MemoCounts(count, chars=1_000)
    texts = [f"text {i} " + "word " * 40 for i in range(20)]  # ~210 characters each
    assert [memo(t) for t in texts] == [42] * 20 and len(calls) == 20
    assert memo._chars <= 1_000 and len(memo._counts) == 4  # the 4 most recent
    memo(texts[-4])  # remembered: not counted again, and now the most recent
    assert len(calls) == 20
    memo(texts[0])  # forgotten long ago: counted again, pushing out texts[-3]
    assert len(calls) == 21 and texts[-4] in memo._counts and texts[-3] not in memo._counts
    memo("long " * 100)  # more than a quarter of the budget: counted, not remembered
    assert "long " * 100 not in memo._counts
