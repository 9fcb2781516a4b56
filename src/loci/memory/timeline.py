"""The true time of memories: whether a question asks about the past, and how a fact
that no longer holds is labelled when it is shown.

A memory is *active* until it expires; one that a newer fact on the same subject
ended is *superseded* (it expired when the newer fact was said). A fact that no longer
holds is still what Loci knows of how things were: search finds it, marked, ranked
below what holds (``weighed_by_standing``), unless a caller asks for current facts only.
The compiled context shows such facts only for a question about the past: one that
says so ("used to", "before", "previously", "no longer", "last year", ...), is in the
past tense ("did", "was") or names a period that has ended. A superseded fact is shown
as "was …, until …" and an expired one with the day it expired, so that no reader
takes them for current.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from loci.memory.dedup import restates
from loci.models import SearchHit
from loci.search.temporal import periods
from loci.timeutil import day_label

#: A fact that no longer holds ranks as if it matched the question this much less well:
#: below a fact that holds and matches as well, above one that barely matches.
STALE_WEIGHT = 0.8
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


def hit_standing(hit: SearchHit, now: datetime) -> Standing:
    """Whether a memory hit still holds at ``now``."""
    return standing(hit.metadata.get("expires_at"), hit.metadata.get("superseded_by"), now)


def weighed_by_standing(hits: list[SearchHit], now: datetime) -> list[SearchHit]:
    """``hits`` best first, the scores of memories that no longer hold discounted by
    ``STALE_WEIGHT``."""
    weighed = [replace(h, score=h.score * STALE_WEIGHT)
               if h.kind == "memory" and hit_standing(h, now).status != "active" else h
               for h in hits]
    return sorted(weighed, key=lambda h: h.score, reverse=True)
