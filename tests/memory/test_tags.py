from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loci.memory.tags import Tag, parse_reply

plain = st.text(alphabet=st.characters(blacklist_characters="[]`~"), max_size=40)
memory_type = st.sampled_from(["sticky", "user_preference", "project_context", "custom_kind"])
body = st.text(alphabet=st.characters(blacklist_characters="[]`"), min_size=1, max_size=40
               ).filter(lambda b: b.strip())


@st.composite
def replies(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, str]]]:
    parts: list[str] = []
    tags: list[tuple[str, str, str]] = []
    for _ in range(draw(st.integers(0, 5))):
        parts.append(draw(plain))
        if draw(st.booleans()):
            kind, key = "memory", draw(memory_type)
            opening = draw(st.sampled_from(["[MEMORY:{}]", "[memory:{}]", "[ Memory : {} ]"]))
            closing = draw(st.sampled_from(["[/MEMORY]", "[/memory]", "[ / Memory ]"]))
        else:
            kind, key = "state", draw(st.sampled_from(["last_price", "topic", "a b"]))
            opening, closing = "[STATE:{}]", "[/STATE]"
        text = draw(body)
        parts.append(opening.format(key) + text + closing)
        tags.append((kind, key, text.strip()))
    parts.append(draw(plain))
    return "".join(parts), tags


def _no_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


@given(st.text(max_size=300))
@settings(max_examples=300)
def test_never_crashes_and_round_trips(text: str) -> None:
    parsed = parse_reply(text)
    assert parsed.original == text
    text_parts = "".join(s for s in parsed.segments if isinstance(s, str))
    assert _no_space(parsed.clean) == _no_space(text_parts)


@given(replies())
@settings(max_examples=300)
def test_finds_every_tag_and_keeps_all_other_text(case: tuple[str, list[tuple[str, str, str]]]
                                                  ) -> None:
    text, expected = case
    parsed = parse_reply(text)
    assert parsed.original == text
    assert [(t.kind, t.key if t.kind == "state" else t.key.lower(), t.body)
            for t in parsed.tags] == [(k, key, b) for k, key, b in expected]
    outside = re.sub(r"\[\s*(memory|state)\s*:[^\]]*\].*?\[\s*/\s*(memory|state)\s*\]", "",
                     text, flags=re.IGNORECASE | re.DOTALL)
    assert _no_space(parsed.clean) == _no_space(outside)


def test_examples() -> None:
    reply = ("Hi John! [MEMORY:sticky] User's name is John [/MEMORY] How can I help?\n"
             "[MEMORY:user_preference]\nLikes bullet\npoints\n[/MEMORY]\n"
             "[STATE:last_price] $142.30 [/STATE]\nDone.")
    parsed = parse_reply(reply)
    assert parsed.clean == "Hi John! How can I help?\nDone."
    assert [(t.kind, t.key, t.body) for t in parsed.tags] == [
        ("memory", "sticky", "User's name is John"),
        ("memory", "user_preference", "Likes bullet\npoints"),
        ("state", "last_price", "$142.30"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "unclosed [MEMORY:sticky] text with no end",
        "```\n[MEMORY:sticky] inside a fence [/MEMORY]\n```",
        "~~~md\n[STATE:k] v [/STATE]\n~~~",
        "inline `[MEMORY:sticky] code [/MEMORY]` span",
        "[MEMORY:Not A Type!] x [/MEMORY]",
        "[MEMORY:sticky]   [/MEMORY]",
        "[STATE:k] mismatched [/MEMORY]",
        # Loci's own keys: a reply could otherwise break what reads them.
        "[STATE:consolidation:pending] garbage [/STATE]",
        "[STATE:focus:s] {} [/STATE]",
    ],
)
def test_left_as_text(text: str) -> None:
    parsed = parse_reply(text)
    assert parsed.tags == [] and parsed.clean == text


def test_tag_after_a_fence_is_parsed() -> None:
    parsed = parse_reply("```\ncode [MEMORY:sticky] no [/MEMORY]\n```\n"
                         "[MEMORY:sticky] yes [/MEMORY]")
    assert [t.body for t in parsed.tags] == ["yes"]
    assert isinstance(parsed.segments[-1], Tag)
