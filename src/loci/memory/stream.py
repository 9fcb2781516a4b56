"""Streaming a reply without leaking its memory tags (the proxy's faces, and any library
user who streams an answer before ``Loci.reply`` records it).

The upstream's text arrives in pieces; ``[MEMORY:type]…[/MEMORY]`` and
``[STATE:key]…[/STATE]`` tags must reach the store, not the client. :class:`TagFilter`
holds text back from any ``[`` that may still turn out to be a tag: an opening tag
whose closing tag has not arrived, or a ``[`` with no ``]`` after it yet. It also
holds trailing whitespace, which removing a later tag may swallow. Everything before
that point is cleaned with the same parser that ``Loci.add_reply`` uses
(``memory.tags.parse_reply``) and the new part of the clean text is released, so the
client receives, piece by piece, exactly the text that is recorded. Text without
brackets streams with no delay; text after an unclosed ``[`` waits for its ``]``.

The filter is linear in the reply: it parses only the **tail** after the last *cut*, a
point that no tag, code span or whitespace rule of the parser reaches across, so the
clean text before it is final (a 1 MB reply re-parsed whole on every delta took
minutes). A cut is a point inside plain text, outside code spans, that is either just
after a newline (inside an unclosed code fence the fence's opening line is kept as the
tail's context) or between two non-blank characters of a line without backticks or
tildes before it, the second not a ``[``.
"""

from __future__ import annotations

import re

from loci.memory.tags import ParsedReply, Tag, parse_reply

_OPEN = re.compile(r"\[\s*(memory|state)\s*:[^\]\n]*\]", re.IGNORECASE)
_CLOSE = {"memory": re.compile(r"\[\s*/\s*memory\s*\]", re.IGNORECASE),
          "state": re.compile(r"\[\s*/\s*state\s*\]", re.IGNORECASE)}
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
#: A plain-text segment's tail past which a cut is looked for (the cut need not be the
#: last possible one: the tail stays short either way).
_LOOK_BACK = 256
#: What may start a tag or a code span: a tail without any is plain text.
_SPECIAL = re.compile(r"[\[\]`~]")
#: Characters a closing tag is looked for in, back from the latest piece's end.
_CLOSE_REACH = 64


class TagFilter:
    """Feed raw text in, get clean text out; ``finish`` releases the rest."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        #: The clean text of the raw text before the cut (final): its pieces, and the
        #: part of it not yet known to agree with what was sent.
        self._head: list[str] = []
        self._unconfirmed = ""
        #: What was sent: its first ``_confirmed`` characters are the head's, then
        #: ``_sent_rest`` (so that no feed copies the whole reply).
        self._confirmed, self._sent_rest = 0, ""
        #: The raw text after the cut, and what it is parsed after: "" or the opening
        #: line of the code fence the cut is inside.
        self._tail, self._context = "", ""
        #: Why the end of the tail is held back ("[": a bracket without its "]",
        #: "memory" or "state": an opening tag without its closing tag), the text fed
        #: since while nothing could change that, and the last characters fed.
        self._hold: str | None = None
        self._waiting: list[str] = []
        self._recent = ""
        #: Characters parsed, for tests of the filter's cost.
        self.parsed = 0

    @property
    def raw(self) -> str:
        return "".join(self._pieces)

    @property
    def sent(self) -> str:
        return "".join(self._head)[:self._confirmed] + self._sent_rest

    def feed(self, text: str) -> str:
        self._pieces.append(text)
        if self._still_held(text):  # nothing can be released: no parse
            self._waiting.append(text)
            return ""
        self._tail += "".join(self._waiting) + text
        self._waiting.clear()
        if self._hold is None and not _SPECIAL.search(self._tail):
            return self._plain()
        end, self._hold = _safe_end(self._tail)
        parsed = self._parse(end)
        released = self._release_rest(self._unconfirmed + self._clean(parsed))
        self._cut(parsed, end)
        return released

    def _plain(self) -> str:
        """``feed`` for a tail without brackets, backticks or tildes (most deltas): it
        is its own clean text, and the cut goes as far into it as a cut may."""
        tail = self._tail
        end = len(tail.rstrip())
        self.parsed += end
        released = self._release_rest(self._unconfirmed + tail[:end])
        at = end - 1
        while at > 0 and (tail[at - 1].isspace() or tail[at].isspace()) and \
                end - at < _LOOK_BACK:
            at -= 1
        if at <= 0 or tail[at - 1].isspace() or tail[at].isspace():
            at = tail.rfind("\n", 0, end) + 1  # just after a newline, or none
        if at > 0:
            self._head.append(tail[:at])
            self._unconfirmed += tail[:at]
            self._tail = tail[at:]
        return released

    def _still_held(self, text: str) -> bool:
        """Whether ``text`` leaves the text held back as it was: a ``[`` still without
        its ``]`` (no bracket came), or an opening tag still without its closing tag
        (none in the last characters with ``text``; one longer than that is found at
        the end)."""
        recent, self._recent = self._recent, (self._recent + text)[-_CLOSE_REACH:]
        if self._hold is None:
            return False
        if self._hold == "[":
            return "[" not in text and "]" not in text
        return "]" not in text or not _CLOSE[self._hold].search(recent + text)

    def finish(self, clean: str) -> str:
        """The rest of ``clean`` (the recorded reply, cleaned by ``add_reply``)."""
        sent = self.sent
        # Removing a tag never changes text before it, so the clean text of a longer
        # prefix extends the shorter one's; anything else waits for the end.
        if not clean.startswith(sent):
            return ""
        return clean[len(sent):]

    def _release_rest(self, rest: str) -> str:
        """What to send of the clean text so far, whose part past the confirmed head
        is ``rest`` (trailing whitespace waits: a tag after it may take it away)."""
        rest = rest.rstrip()
        if not rest or not rest.startswith(self._sent_rest):
            return ""
        new = rest[len(self._sent_rest):]
        agreed = min(len(self._unconfirmed), len(rest))
        self._confirmed += agreed
        self._unconfirmed = self._unconfirmed[agreed:]
        self._sent_rest = rest[agreed:]
        return new

    def _parse(self, end: int) -> ParsedReply:
        self.parsed += len(self._context) + end
        return parse_reply(self._context + self._tail[:end])

    def _clean(self, parsed: ParsedReply) -> str:
        return parsed.clean[len(self._context):]

    def _cut(self, parsed: ParsedReply, end: int) -> None:
        """Move the cut as far into the tail as it may go."""
        text = self._context + self._tail[:end]
        at = _cut_point(text, parsed)
        if at is None or at <= len(self._context):
            return
        before = parse_reply(text[:at])
        # The text before a cut ends in plain text: with a plain segment after it the
        # parser keeps that text's trailing whitespace, as it will in the whole reply.
        head = ParsedReply((*before.segments, "x")).clean[len(self._context):-1]
        self.parsed += at
        self._head.append(head)
        self._unconfirmed += head
        self._tail = self._tail[at - len(self._context):]
        self._context = _open_fence(text[:at])


def _safe_end(raw: str) -> tuple[int, str | None]:
    """Where the text that may still become a tag starts, and why ("[", "memory",
    "state"; None: only trailing whitespace is held)."""
    end, hold = len(raw), None
    last_open = raw.rfind("[")
    if last_open != -1 and "]" not in raw[last_open:]:
        end, hold = last_open, "["
    for match in _OPEN.finditer(raw, 0, end):
        kind = match.group(1).lower()
        if not _CLOSE[kind].search(raw, match.end()):
            end, hold = match.start(), kind
            break
    while end and raw[end - 1].isspace():
        end -= 1
    return end, hold


def _cut_point(text: str, parsed: ParsedReply) -> int | None:
    """A late cut in ``text``'s last plain segment (on its last line, or just after that
    line's newline), or None."""
    if not parsed.segments or isinstance(parsed.segments[-1], Tag):
        return None
    start = len(text) - len(parsed.segments[-1])
    line = text.rfind("\n") + 1
    # Code spans and fences start with a backtick or a tilde: no cut at or past one on
    # the line (a newline ends every span; an open fence is carried as context).
    ticks = [i - 1 for i in (text.find("`", line), text.find("~", line)) if i != -1]
    high = min([len(text) - 1, *ticks])
    low = max(start + 1, line + 1, len(text) - _LOOK_BACK)
    while high >= low:
        # Nor between a "[" and its "]": the parser skips what an opening tag spans.
        bracket = text.rfind("[", start, high + 1)
        closed = text.find("]", bracket, high + 1) if bracket != -1 else start
        if closed != -1:
            for at in range(high, max(low, closed + 1) - 1, -1):
                if not (text[at - 1].isspace() or text[at].isspace()):
                    return at
        high = bracket - 1 if bracket != -1 else -1
    if start < line < len(text) and _closed_brackets(text, start, line):
        return line
    return None


def _closed_brackets(text: str, start: int, at: int) -> bool:
    bracket = text.rfind("[", start, at)
    return bracket == -1 or text.find("]", bracket, at) != -1


def _open_fence(text: str) -> str:
    """The opening line of the code fence still open at the end of ``text``, or ""."""
    opening: re.Match[str] | None = None
    for match in _FENCE_LINE.finditer(text):
        marker = match.group(1)
        if opening is None:
            opening = match
        elif marker[0] == opening.group(1)[0] and len(marker) >= len(opening.group(1)):
            opening = None
    if opening is None:
        return ""
    line_end = text.find("\n", opening.start())
    return text[opening.start(): line_end + 1] if line_end != -1 else ""
