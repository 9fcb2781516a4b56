"""Token counting and the model context-window table.

Counting is tiered: an exact BPE encoding when one is known for the model
and bundled (``quicktok``, ids identical to tiktoken, no download), else ``tiktoken`` if
its files are cached, else a heuristic of four characters per token. Models of
other vendors (Claude, Gemini, local models) are counted with cl100k as a close proxy,
and the counter says so in ``method``.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from loci.errors import ConfigError

T = TypeVar("T")

#: Context windows plus common current models. Globs are allowed.
MODEL_WINDOWS: dict[str, int] = {
    # Claude 4.x (opus, sonnet, haiku 4-1 to 4-8 and later): 200k tokens by default.
    "claude-sonnet-4-6": 200_000,
    "claude-opus-4-6": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-*": 200_000,
    # The gpt-5 family: 400k tokens (272k in, 128k out); its chat model 128k.
    "gpt-5*": 400_000,
    "gpt-5-chat*": 128_000,
    "gpt-4.1": 128_000,
    "gpt-4.1-mini": 128_000,
    "gpt-4.1-*": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-*": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1*": 200_000,
    "o3*": 200_000,
    "o4*": 200_000,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-*": 1_048_576,
}
#: The window assumed for a model nobody configured (local models among them): said
#: in a warning, since a wrong guess wastes or overflows the model's real window.
DEFAULT_WINDOW = 8_192

#: Tokens a chat message costs beyond its content (OpenAI's chat format: 3 per message).
MESSAGE_OVERHEAD = 3
#: Tokens that prime the reply, counted once per request.
REPLY_PRIMING = 3
CHARS_PER_TOKEN = 4

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def context_window(model: str, extra: Mapping[str, int] | None = None) -> int:
    """The model's context window; ``extra`` (from settings) wins over the table; an
    unknown model gets ``DEFAULT_WINDOW`` (see ``known_window``)."""
    window = known_window(model, extra)
    return DEFAULT_WINDOW if window is None else window


def known_window(model: str, extra: Mapping[str, int] | None = None) -> int | None:
    """The model's context window if settings or the table know it, else None."""
    return by_model(model, extra or {}, MODEL_WINDOWS)


def by_model(model: str, *tables: Mapping[str, T]) -> T | None:
    """``model``'s entry in the first table that names it exactly, else under the
    longest matching glob of the first table that has one (``gpt-4.1-*`` beats
    ``gpt-4*``), else None."""
    for table in tables:
        if model in table:
            return table[model]
    for table in tables:
        for pattern in sorted(table, key=len, reverse=True):
            if fnmatch.fnmatchcase(model, pattern):
                return table[pattern]
    return None


def compaction_threshold(
    model: str, fraction: float = 0.75, extra: Mapping[str, int] | None = None
) -> int:
    """Token count at which a session of ``model`` should be compacted."""
    if not 0 < fraction <= 1:
        raise ConfigError(f"the threshold must be a fraction in (0, 1], got {fraction}")
    return int(context_window(model, extra) * fraction)


def heuristic_count(text: str) -> int:
    """About four characters per token, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens of text and chat messages for one model.

    ``method`` says how: ``exact:o200k_base``, ``proxy:cl100k_base`` (another vendor's
    model counted with an OpenAI encoding) or ``heuristic``.
    """

    method: str
    _count: Callable[[str], int]

    def count(self, text: str) -> int:
        return self._count(text) if text else 0

    def count_message(self, role: str, content: str) -> int:
        return self.count(role) + self.count(content) + MESSAGE_OVERHEAD

    def count_messages(self, messages: Iterable[Mapping[str, str]]) -> int:
        body = sum(self.count_message(m["role"], m.get("content") or "") for m in messages)
        return body + REPLY_PRIMING


def encoding_for(model: str) -> tuple[str, bool]:
    """The encoding used for ``model`` and whether the count is exact for it."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base", True
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base", True
    return "cl100k_base", False


@lru_cache(maxsize=32)
def token_counter(model: str = "gpt-4.1", tokenizer: str = "auto") -> TokenCounter:
    """A counter for ``model``. ``tokenizer`` is "auto", "heuristic" or an encoding."""
    if tokenizer == "heuristic":
        return TokenCounter("heuristic", heuristic_count)
    if tokenizer == "auto":
        encoding, exact = encoding_for(model)
    else:
        encoding, exact = tokenizer, True
    count = _load_encoding(encoding)
    if count is None:
        if tokenizer != "auto":
            raise ConfigError(f"unknown or unavailable tokenizer {tokenizer!r}")
        return TokenCounter("heuristic", heuristic_count)
    return TokenCounter(f"{'exact' if exact else 'proxy'}:{encoding}", count)


def _load_encoding(name: str) -> Callable[[str], int] | None:
    """Tier 1 quicktok (bundled), tier 2 tiktoken (if its files are cached), else None."""
    try:
        import quicktok

        return quicktok.get_encoding(name).count  # type: ignore[no-any-return]
    except (ImportError, RuntimeError, ValueError, KeyError):
        pass
    try:
        import tiktoken

        encoder = tiktoken.get_encoding(name)
        return lambda text: len(encoder.encode_ordinary(text))
    except Exception:  # any failure (no files, no network) means "next tier"
        return None


@lru_cache(maxsize=64)
def unknown_model(model: str, window: int) -> str:
    """The warning for a model whose window Loci does not know, logged once."""
    text = (f"unknown model {model!r}: assuming a {window:,}-token window; set its window "
            f'in loci.toml: [models] "{model}" = 32768')
    logging.getLogger("loci").warning(text)
    return text


class MemoCounts:
    """``count`` with the counts of recent texts remembered, the least recently used
    forgotten first once the texts remembered exceed ``chars`` characters together (a
    count of entries let a server keep thousands of rendered prompts, each counted
    once)."""

    def __init__(self, count: Callable[[str], int], chars: int) -> None:
        self._count, self._budget = count, chars
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        with self._lock:
            found = self._counts.get(text)
            if found is not None:
                self._counts.move_to_end(text)
                return found
        tokens = self._count(text)
        if len(text) > self._budget // 4:  # never worth a quarter of the memo
            return tokens
        with self._lock:
            if text not in self._counts:
                self._counts[text] = tokens
                self._chars += len(text)
                while self._chars > self._budget:
                    self._chars -= len(self._counts.popitem(last=False)[0])
        return tokens
