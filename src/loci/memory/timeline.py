"""The true time of memories: whether a question asks about the past, and how a fact
that no longer holds is labelled when it is shown.

A memory is *active* until it expires; one that a newer fact on the same subject
ended is *superseded* (it expired when the newer fact was said). Search leaves both
kinds out unless the question is about the past: it says so ("used to", "before",
"previously", "no longer", "last year", ...), is in the past tense ("did", "was") or
names a period that has ended. Then they are found, a superseded fact shown as "was …,
until …" and an expired one with the day it expired, so that no reader takes them for
current.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from loci.memory.dedup import restates
from loci.search.temporal import periods
from loci.timeutil import day_label

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_PAST = re.compile(
    r"\b(used to|previous(?:ly)?|formerly|former|originally|initially|at first|before"
    r"|earlier|in the past|back then|at the time|any ?more|no longer|last"
    r" (?:year|month|week|time)|ago|changed?|until|did|was|were|had)\b", re.I)


def asks_about_past(query: str, now: datetime) -> bool:
    """Whether ``query`` asks about how things were, not only how they are."""
    if _PAST.search(query):
        return True
    return any(p.end is not None and p.end <= now for p in periods(query))


def gives_new_value(new: str, old: str) -> bool:
    """Whether ``new``, a statement of the same fact as ``old`` (dedup found them
    alike), gives it a new value rather than rewording it: the structure says so
    (``dedup.restates``: same subject, a single-valued relation or a number changed),
    or a number of one is replaced by another ("on page 200" / "now at page 220")."""
    if restates(new, old):
        return True
    a, b = set(_NUMBER.findall(new)), set(_NUMBER.findall(old))
    return bool(a - b and b - a)


@dataclass(frozen=True)
class Standing:
    """Whether a memory still holds at ``now``: "active", "expired" or "superseded",
    with the moment it stopped holding."""

    status: str
    until: datetime | None = None

    def label(self) -> str | None:
        """The words a context line carries for a fact that no longer holds."""
        if self.until is None or self.status == "active":
            return None
        return f"{self.status} {day_label(self.until)}"


def standing(expires_at: datetime | None, superseded_by: str | None,
             now: datetime) -> Standing:
    if superseded_by is not None:
        return Standing("superseded", expires_at)
    if expires_at is not None and expires_at <= now:
        return Standing("expired", expires_at)
    return Standing("active")


def shown_as_past(text: str, state: Standing) -> str:
    """A fact that no longer holds as a context line shows it: "was: … (until …,
    superseded)", or an expired one "… (expired …, not confirmed since)"."""
    if state.status == "active" or state.until is None:
        return text
    if state.status == "expired":
        return f"{text} (expired {day_label(state.until)}, not confirmed since)"
    return f"was: {text} (until {day_label(state.until)}, superseded)"
