"""The providers' prompt caches as they publish them, for the fake provider
(``fake_provider``) that tests and benchmarks measure cache hits against.

- **OpenAI** caches automatically: a request of 1,024 tokens or more reuses the longest
  prefix that an earlier request had, counted in steps of 128 tokens from 1,024 up
  (``usage.prompt_tokens_details.cached_tokens``); a prefix stays cached for a few
  minutes after its last use.
- **Anthropic** caches at ``cache_control`` breakpoints (at most 4), over tools, then
  system, then messages: the prefix up to each breakpoint is written (if it reaches the
  model's minimum, 1,024 tokens) and kept 5 minutes from its last use; a request reads
  the longest cached prefix that ends at one of its breakpoints or at one of the 20
  blocks before each. Reads (``cache_read_input_tokens``) and writes
  (``cache_creation_input_tokens``) are counted apart from ``input_tokens``, the rest.

Tokens are o200k tokens of each message or block's canonical JSON: not the providers'
exact counts, but the same for the same content, which is what caching is about.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import quicktok

OPENAI_MINIMUM, OPENAI_STEP, OPENAI_LIFETIME = 1024, 128, 600.0
ANTHROPIC_MINIMUM, ANTHROPIC_LIFETIME, ANTHROPIC_LOOKBACK = 1024, 300.0, 20
_ENCODING = quicktok.get_encoding("o200k_base")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class _Entries:
    """Cached prefixes by digest, each with the time it expires."""

    def __init__(self, lifetime: float, clock: Callable[[], float]) -> None:
        self.lifetime, self.clock = lifetime, clock
        self.expiry: dict[bytes, float] = {}

    def hit(self, digest: bytes) -> bool:
        return self.expiry.get(digest, -1.0) > self.clock()

    def keep(self, digest: bytes) -> None:
        self.expiry[digest] = self.clock() + self.lifetime


class OpenAIPrefixCache:
    """OpenAI's automatic prefix cache."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.entries = _Entries(OPENAI_LIFETIME, clock)

    def tokens(self, body: dict[str, Any]) -> list[int]:
        """The request as one token sequence: tools first, then each message (or each
        input item of a Responses request)."""
        parts = [canonical(body.get("tools") or []), canonical(body.get("instructions"))]
        items = body.get("messages") or body.get("input") or ()
        parts += [canonical(m) for m in ([items] if isinstance(items, str) else items)]
        return list(_ENCODING.encode("".join(parts)))

    def cached(self, body: dict[str, Any]) -> tuple[int, int]:
        """(input tokens, cached input tokens) of ``body``; its prefixes are cached."""
        tokens = self.tokens(body)
        digests, state, done = [], hashlib.sha256(), 0
        for end in range(OPENAI_MINIMUM, len(tokens) + 1, OPENAI_STEP):
            state.update(b"".join(t.to_bytes(4, "little") for t in tokens[done:end]))
            digests.append((end, state.copy().digest()))
            done = end
        cached = 0
        for end, digest in digests:
            if not self.entries.hit(digest):
                break
            cached = end
        for _, digest in digests:
            self.entries.keep(digest)
        return len(tokens), cached


@dataclass(frozen=True)
class AnthropicCount:
    input_tokens: int
    cache_read: int
    cache_write: int


class AnthropicCache:
    """Anthropic's ``cache_control`` breakpoints."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.entries = _Entries(ANTHROPIC_LIFETIME, clock)

    @staticmethod
    def blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
        """The request's blocks in cache order: tools, system, then messages."""
        system = body.get("system") or []
        blocks = list(body.get("tools") or [])
        blocks += [{"type": "text", "text": system}] if isinstance(system, str) else system
        for message in body.get("messages") or ():
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            blocks += [{**block, "role": message.get("role")} for block in content or ()]
        return blocks

    def total(self, body: dict[str, Any]) -> int:
        """The request's input tokens, as ``count`` measures them (nothing cached)."""
        return sum(len(_ENCODING.encode(canonical({k: v for k, v in b.items()
                                                   if k != "cache_control"})))
                   for b in self.blocks(body))

    def count(self, body: dict[str, Any]) -> AnthropicCount:
        blocks = self.blocks(body)
        sizes, digests, marks = [], [], []
        state = hashlib.sha256()
        for n, block in enumerate(blocks):
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            text = canonical(plain)
            sizes.append(len(_ENCODING.encode(text)))
            state.update(text.encode())
            digests.append(state.copy().digest())
            if "cache_control" in block:
                marks.append(n)
        ends = _cumulative(sizes)
        read = self._longest_read(marks, digests, ends)
        written = 0
        for mark in marks:  # each breakpoint's prefix is (re)written when long enough
            if ends[mark] >= ANTHROPIC_MINIMUM:
                self.entries.keep(digests[mark])
                written = max(written, ends[mark])
        write = max(0, written - read)
        return AnthropicCount(ends[-1] - read - write if ends else 0, read, write)

    def _longest_read(self, marks: Sequence[int], digests: Sequence[bytes],
                      ends: Sequence[int]) -> int:
        read = 0
        for mark in marks:
            for n in range(mark, max(-1, mark - ANTHROPIC_LOOKBACK - 1), -1):
                if ends[n] > read and self.entries.hit(digests[n]):
                    self.entries.keep(digests[n])
                    read = ends[n]
                    break
        return read


def _cumulative(sizes: Sequence[int]) -> list[int]:
    ends, total = [], 0
    for size in sizes:
        total += size
        ends.append(total)
    return ends
