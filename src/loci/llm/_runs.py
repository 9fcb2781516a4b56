"""Runs of streamed events that each add text and nothing else, read a network read at
a time without decoding them one by one.

A fast upstream streams a long answer as hundreds of thousands of events that differ
only in their few characters of text (a chat chunk's ``content``, an Anthropic
``text_delta``'s ``text``, a Responses ``output_text.delta``'s ``delta``), and in fields
that say nothing of the answer (``VARYING``: OpenAI's ``obfuscation`` padding, the
Responses API's ``sequence_number``). Once one such event has been decoded, its bytes
around the text are a template: a read made only of events of that template is the
template with their texts joined. The texts are taken out of the read in one pass (what
lies between two events' texts replaced by a comma makes the read a JSON array of
strings), so a run costs per read, not per event. A read that holds anything else is
decoded event by event, as before, and may teach a new template.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

#: What may come before an event's data in a read: an ``event:`` line, then ``data:``.
_HEAD = re.compile(r"(?:event:[^\n]*\n)?data: ?")
_STRING = r'"(?:[^"\\\x00-\x1f]|\\.)*"'
_LITERAL = re.compile(_STRING)
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
#: Fields whose values may differ from event to event of one run without changing what
#: the events say: their values are left out of the template.
VARYING = ("obfuscation", "sequence_number")
_VARYING = re.compile(
    r'("(?:' + "|".join(VARYING) + r')"\s*:\s*)(' + _STRING + "|" + _NUMBER + ")")
_PROBE = "\x01probe"
#: How far into a read an event's text may start, and from its end the text may end.
_REACH = 2_000


def _pattern(template: str) -> str:
    """A regular expression of ``template`` with the values of ``VARYING`` fields free."""
    parts, at = [], 0
    for found in _VARYING.finditer(template):
        parts += [re.escape(template[at:found.start(2)]),
                  f"(?:{_STRING}|{_NUMBER})"]
        at = found.end(2)
    return "".join(parts) + re.escape(template[at:])


class TextRuns:
    """Recognises reads made only of text events of one template (``merge``); the
    template is learned from a decoded event that ``text_of`` says adds only text
    (``learn``)."""

    def __init__(self, field: str, text_of: Callable[[Any], str | None]) -> None:
        self._key = re.compile(rf'"{re.escape(field)}"\s*:\s*')
        self._text_of = text_of
        #: The learned event's bytes before and after its text, and their patterns.
        self._prefix = self._suffix = ""
        self._starts = self._ends = re.compile(r"(?!)")
        self._patterns = ("", "")
        #: The text before an event's data in the reads, and the pattern of what lies
        #: between two events' texts.
        self._head: str | None = None
        self._separator = re.compile(r"(?!)")

    def learn(self, payloads: Sequence[str], events: Sequence[Any]) -> None:
        """Learn the template of the last event of a decoded read that adds only text
        (``payloads[i]`` is the data ``events[i]`` was decoded from)."""
        for payload, event in zip(reversed(payloads[:len(events)]), reversed(events),
                                  strict=True):
            text = self._text_of(event)
            if text is not None:
                self._learn_one(payload, text)
                return

    def _learn_one(self, payload: str, text: str) -> None:
        keys = list(self._key.finditer(payload))
        literal = _LITERAL.match(payload, keys[0].end()) if len(keys) == 1 else None
        if literal is None:
            return
        prefix, suffix = payload[:literal.start()], payload[literal.end():]
        try:  # orjson refuses what merge could not read either (a lone surrogate)
            same = orjson.loads(literal.group()) == text
            # The template is sound only if another text in its place reads as that.
            probe = orjson.loads(prefix + orjson.dumps(_PROBE).decode() + suffix)
        except orjson.JSONDecodeError:
            return
        if same and self._text_of(probe) == _PROBE:
            self._prefix, self._suffix, self._head = prefix, suffix, None
            starts, ends = _pattern(prefix), _pattern(suffix)
            self._starts, self._ends = re.compile(starts), re.compile(rf"(?:{ends})\Z")
            self._patterns = (starts, ends)

    def merge(self, read: str) -> str | None:
        """The joined text of ``read`` (whole events) when every event in it is of the
        learned template, else None."""
        start = self._starts.search(read, 0, min(len(read), _REACH))
        end = self._ends.search(read, max(0, len(read) - _REACH))
        if start is None or end is None or end.start() < start.end():
            return None
        head = read[:start.start()]
        if head != self._head:
            if not _HEAD.fullmatch(head):
                return None
            self._head = head
            starts, ends = self._patterns
            self._separator = re.compile(ends + r"\n\n" + re.escape(head) + starts)
        body = read[start.end():end.start()]
        array, separators = self._separator.subn(",", body)
        try:
            texts = orjson.loads("[" + array + "]")
            # One string per event: anything else between the separators (another
            # event, two strings where the template has one) is not of the template.
            if type(texts) is list and len(texts) == separators + 1:
                return "".join(texts)
        except (orjson.JSONDecodeError, TypeError):
            pass
        return None

    def event(self, text: str) -> Any:
        """The template's event carrying ``text``."""
        return orjson.loads(self._prefix + orjson.dumps(text).decode() + self._suffix)
