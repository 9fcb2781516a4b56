"""Memory and state tags in assistant replies.

    [MEMORY:user_preference] User likes bullet points [/MEMORY]
    [STATE:last_price] $142.30 [/STATE]

The parser splits a reply into segments that concatenate back to the exact input, so
nothing is ever lost: text segments make the cleaned reply the user sees, tag segments
are what gets saved. Rules:

- tag names are case-insensitive and tolerate spaces (``[ memory : sticky ]``,
  ``[/Memory]``); the body may span lines and is trimmed;
- an opening tag with no closing tag of its kind is ordinary text (nothing half-saved);
- nothing inside fenced code blocks (``` or ~~~) or inline code spans is parsed, so
  replies that *explain* the syntax are left alone;
- the memory type must be a snake_case word and the state key one a client may write
  (``checks.check_state_key``: 1-200 bytes of printable text, not one of Loci's own);
  otherwise the tag is left as text. Types that are neither built in nor
  configured are saved with the default TTL (see ``memory.types``);
- removing a tag also removes the whitespace it leaves behind (a line that held only
  tags disappears; two spaces around an inline tag become one).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from loci.checks import check_state_key
from loci.errors import ValidationError

_OPEN = re.compile(
    r"\[\s*(?P<kind>memory|state)\s*:\s*(?P<key>[^\]\n]{1,200}?)\s*\]", re.IGNORECASE
)
_CLOSE = {
    "memory": re.compile(r"\[\s*/\s*memory\s*\]", re.IGNORECASE),
    "state": re.compile(r"\[\s*/\s*state\s*\]", re.IGNORECASE),
}
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Tag:
    """A parsed tag: ``kind`` is "memory" or "state"; ``key`` the type or state key."""

    kind: str
    key: str
    body: str
    raw: str


@dataclass(frozen=True)
class ParsedReply:
    segments: tuple[str | Tag, ...]

    @property
    def tags(self) -> list[Tag]:
        return [s for s in self.segments if isinstance(s, Tag)]

    @property
    def memories(self) -> list[Tag]:
        return [t for t in self.tags if t.kind == "memory"]

    @property
    def states(self) -> list[Tag]:
        return [t for t in self.tags if t.kind == "state"]

    @property
    def original(self) -> str:
        return "".join(s.raw if isinstance(s, Tag) else s for s in self.segments)

    @property
    def clean(self) -> str:
        """The reply without its tags, as the user should see it."""
        return _join_without_tags(self.segments)


def parse_reply(text: str) -> ParsedReply:
    """Split ``text`` into plain-text and tag segments."""
    protected = _protected_spans(text)
    closes = _Closes(text)
    segments: list[str | Tag] = []
    position = 0
    search_from = 0
    while (match := _OPEN.search(text, search_from)) is not None:
        search_from = match.end()
        if _inside(match.start(), protected):
            continue
        kind = match["kind"].lower()
        key = match["key"].strip()
        close = closes.after(kind, match.end())
        if close is None or not _valid_key(kind, key) or _inside(close.start(), protected):
            continue
        nested = _OPEN.search(text, match.end(), close.start())
        if nested is not None:
            continue  # an unclosed tag followed by another: the outer one stays text
        body = text[match.end() : close.start()].strip()
        if not body:
            continue
        segments.append(text[position : match.start()])
        key = key.lower() if kind == "memory" else key
        segments.append(Tag(kind, key, body, text[match.start() : close.end()]))
        position = search_from = close.end()
    segments.append(text[position:])
    return ParsedReply(tuple(s for s in segments if s != ""))


class _Closes:
    """The closing tags of a text, found once per kind: looking for the next one from
    each opening tag made a reply of many unclosed tags quadratic (1 MB: 25 s)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, tuple[list[int], list[re.Match[str]]]] = {}

    def after(self, kind: str, at: int) -> re.Match[str] | None:
        """The first closing tag of ``kind`` that starts at ``at`` or later."""
        if kind not in self.found:
            matches = list(_CLOSE[kind].finditer(self.text))
            self.found[kind] = ([m.start() for m in matches], matches)
        starts, matches = self.found[kind]
        index = bisect_left(starts, at)
        return matches[index] if index < len(matches) else None


def without_memories(text: str, bodies: set[str]) -> str:
    """``text`` without its memory tags whose body is one of ``bodies`` (and the
    whitespace they leave); every other tag stays as written."""
    pieces: list[str | Tag] = []
    for segment in parse_reply(text).segments:
        if isinstance(segment, Tag) and segment.kind == "memory" and segment.body in bodies:
            pieces.append(segment)
            continue
        plain = segment.raw if isinstance(segment, Tag) else segment
        if pieces and isinstance(pieces[-1], str):
            pieces[-1] += plain
        else:
            pieces.append(plain)
    return _join_without_tags(tuple(pieces))


def _valid_key(kind: str, key: str) -> bool:
    if kind == "memory":
        return bool(_TYPE.match(key.lower()))
    try:
        check_state_key(key)
    except ValidationError:
        return False
    return True


def _protected_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges inside fenced code blocks or inline code spans."""
    spans: list[tuple[int, int]] = []
    fences = list(_FENCE.finditer(text))
    index = 0
    while index < len(fences):
        opening = fences[index]
        marker = opening.group(1)
        closing = next(
            (f for f in fences[index + 1 :]
             if f.group(1)[0] == marker[0] and len(f.group(1)) >= len(marker)),
            None,
        )
        end = closing.end() if closing else len(text)
        spans.append((opening.start(), end))
        index = fences.index(closing) + 1 if closing else len(fences)
    for match in _INLINE_CODE.finditer(text):
        if not _inside(match.start(), spans):
            spans.append((match.start(), match.end()))
    return spans


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _join_without_tags(segments: tuple[str | Tag, ...]) -> str:
    pieces = list(segments)
    out = ""
    for index, segment in enumerate(pieces):
        if not isinstance(segment, Tag):
            out += segment
            continue
        if index + 1 == len(pieces):  # a trailing tag takes its leading blanks along
            out = out.rstrip(" \t")
            break
        after = pieces[index + 1]
        after_text = after if isinstance(after, str) else None
        rest_of_line = (after_text or "").split("\n", 1)[0]
        line_so_far = out.rsplit("\n", 1)[-1]
        if not line_so_far.strip() and not rest_of_line.strip() and after_text is not None:
            # The tag filled its line: drop the line, newline included.
            out = out[: len(out) - len(line_so_far)]
            pieces[index + 1] = after_text.split("\n", 1)[1] if "\n" in after_text else ""
        elif after_text is not None and (
            not line_so_far.strip() or out.endswith((" ", "\t"))
        ):  # at a line start, or between two blanks: keep no extra blank
            after_text = pieces[index + 1] = after_text.lstrip(" \t")
            if after_text.startswith("\n"):  # the tag ended its line
                out = out.rstrip(" \t")
    return out.rstrip() if any(isinstance(p, Tag) for p in segments) else out
