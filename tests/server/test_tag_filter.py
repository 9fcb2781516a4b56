"""The streaming tag filter (``proxy_stream.TagFilter``): the client gets exactly the
recorded clean text, piece by piece as the quadratic filter it replaced released it,
at a cost linear in the reply."""

from __future__ import annotations

import random
import re
import time

from loci.memory.stream import TagFilter
from loci.memory.tags import parse_reply

_OPEN = re.compile(r"\[\s*(memory|state)\s*:[^\]\n]*\]", re.IGNORECASE)
_CLOSE = {"memory": re.compile(r"\[\s*/\s*memory\s*\]", re.IGNORECASE),
          "state": re.compile(r"\[\s*/\s*state\s*\]", re.IGNORECASE)}
TOKENS = ["word", "x", " ", "  ", "\n", "\n\n", "\t", "[MEMORY:fact] likes tea [/MEMORY]",
          "[STATE:k] v [/STATE]", "[", "]", "[memory:", "fact]", " [/memory]", "```", "```py",
          "~~~", "`code`", "`", "[memory: Bad Key] b [/memory]", "[note]", ".", "é", "💾"]


class QuadraticFilter:
    """The filter as it was: the whole reply re-parsed on every delta (the reference)."""

    def __init__(self) -> None:
        self.raw, self.sent = "", ""

    def feed(self, text: str) -> str:
        self.raw += text
        return self.release(parse_reply(self.raw[: self.safe_end()]).clean)

    def finish(self, clean: str) -> str:
        return self.release(clean)

    def release(self, clean: str) -> str:
        if not clean.startswith(self.sent):
            return ""
        new, self.sent = clean[len(self.sent):], clean
        return new

    def safe_end(self) -> int:
        raw, end = self.raw, len(self.raw)
        last_open = raw.rfind("[")
        if last_open != -1 and "]" not in raw[last_open:]:
            end = last_open
        for match in _OPEN.finditer(raw, 0, end):
            if not _CLOSE[match.group(1).lower()].search(raw, match.end()):
                end = match.start()
                break
        while end and raw[end - 1].isspace():
            end -= 1
        return end


def streamed(pieces: list[str], tags: TagFilter | QuadraticFilter) -> tuple[list[str], str]:
    out = [tags.feed(piece) for piece in pieces]
    clean = parse_reply("".join(pieces)).clean
    return out, "".join(out) + tags.finish(clean)


def test_the_client_gets_what_the_old_filter_released_at_linear_cost() -> None:
    rng = random.Random(48)
    for _ in range(3000):
        text = "".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 40)))
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 12))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        new, whole = streamed(pieces, TagFilter())
        old, _ = streamed(pieces, QuadraticFilter())
        assert new == old, pieces
        if "`" not in text:  # a later backtick may make a released tag code (both filters)
            assert whole == parse_reply(text).clean, pieces
    text = "".join(rng.choice(TOKENS) for _ in range(20_000))
    tags = TagFilter()  # a long one of the same tokens: each character parsed a few times
    for i in range(0, len(text), 4):
        tags.feed(text[i:i + 4])
    assert tags.parsed < 40 * len(text), tags.parsed


def test_a_megabyte_costs_a_linear_parse() -> None:
    """1 MB in 32-character deltas: the filter parses each character a few times (the
    quadratic one parsed half a million characters per delta, 16 billion in all)."""
    line = "The answer is [note] more words here ~ fine.\n" * 99 + "Some `code` here.\n"
    text = ("A reply [MEMORY:fact] likes tea [/MEMORY] starts. " + line * 200
            + "``` code\n" + "code line\n" * 2000 + "```\n" + "one long line " * 5000)
    text = text[:1_000_000]
    tags = TagFilter()
    began = time.perf_counter()
    out = "".join(tags.feed(text[i:i + 32]) for i in range(0, len(text), 32))
    took = time.perf_counter() - began
    clean = parse_reply(text).clean
    assert out + tags.finish(clean) == clean
    assert tags.parsed < 40 * len(text), tags.parsed
    unstreamed = time.perf_counter()
    parse_reply(text)
    assert took < 60 * (time.perf_counter() - unstreamed) + 5, took


def test_text_held_back_costs_no_parse_per_delta() -> None:
    """After an opening tag without its closing tag (or a "[" without its "]"), nothing
    can be released until it comes: 1 MB after one is not parsed again on every delta."""
    for opening in ("[MEMORY:fact] the syntax, explained. ", "a [ bracket "):
        text = opening + "more words about it [note] and so on\n" * 27_000
        tags = TagFilter()
        out = "".join(tags.feed(text[i:i + 32]) for i in range(0, len(text), 32))
        clean = parse_reply(text).clean
        assert out + tags.finish(clean) == clean
        assert tags.parsed < 40 * len(text), tags.parsed
