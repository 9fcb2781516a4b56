"""Duplicate detection before a memory is saved (word overlap above 70%).

``word_overlap`` is the Jaccard overlap of the two texts' lowercase word sets. Above
``DUPLICATE_OVERLAP`` a new fact is the same fact as a stored one: identical words
refresh the stored fact, changed words supersede it (the old text goes to history).
With embeddings, a cosine of ``NEAR_DUPLICATE_COSINE`` or more also counts as the
same fact, which catches paraphrases that share few words. A fact that gives a new
value to the same thing (``restates``: "lives in Lisbon" → "lives in Porto now",
"PostgreSQL 16" → "17") supersedes the old one too. Facts that name different
things ("ticket OPS-12 is blocked" / "ticket OPS-40 is blocked") are never merged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from loci.models import Memory
from loci.search.query import STOPWORDS

DUPLICATE_OVERLAP = 0.7
NEAR_DUPLICATE_COSINE = 0.9
_WORD = re.compile(r"\w+", re.UNICODE)
#: Articles, pronouns of the speaker and the forms of "to be" and "to have": what
#: rewriting "I'm …"/"My …" as "The user is …"/"The user's …" (``memory.rewrite``)
#: changes, and so what an overlap may also be measured without.
_GRAMMAR = frozenset({"the", "a", "an", "i", "m", "am", "is", "are", "was", "were", "my",
                      "me", "their", "they", "them", "re", "s", "ve", "has", "have"})
#: A restated fact changes at most this many words (either side).
MAX_CHANGED_WORDS = 4
#: Relations that hold one value at a time: a new value replaces the old one.
SINGLE_VALUED = frozenset({"live", "lives", "living", "based", "moved", "name", "named",
                           "email", "phone", "address", "birthday", "age", "works",
                           "timezone", "version", "deadline", "due"})
_TIME_WORDS = frozenset({"now", "currently", "still", "anymore", "today", "recently"})
#: Words either side of a number that name what the number is of ("for every … ounces
#: of water").
FRAME_WORDS = 3
FRAME_MEANING = 3
_FRAME_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?")
#: Names of things that mix letters and digits (repo-12, OPS-2823, proj157): two facts
#: that name different things are different facts, however many words they share.
_ANCHOR = re.compile(r"\b[A-Za-z]+[-_]?\d+[A-Za-z0-9]*\b")


def anchors(text: str) -> frozenset[str]:
    return frozenset(a.lower() for a in _ANCHOR.findall(text))


def word_set(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text))


def word_overlap(a: str, b: str) -> float:
    """|A ∩ B| / |A ∪ B| of the two texts' word sets (0 when both are empty), or of
    their words without the grammar a third-person rewrite changes, if that is higher
    ("User: I'm Maya, in Lisbon" and "The user is Maya, in Lisbon" are the same)."""
    return sets_overlap(overlap_sets(a), overlap_sets(b))


def holds(text: str, fact: str) -> bool:
    """Whether ``text`` says ``fact``: it holds ``DUPLICATE_OVERLAP`` of the fact's words
    but the grammar a third-person rewrite changes and its subject ("The user is
    planning …" in "I'm planning …"). A fact changed since (the user "lives in Berlin
    now", taken from "I live in Paris") is not held."""
    wanted = word_set(fact) - _GRAMMAR - _SUBJECT
    return bool(wanted) and len(wanted & word_set(text)) >= DUPLICATE_OVERLAP * len(wanted)


#: The subject a third-person rewrite adds ("The user …").
_SUBJECT = frozenset({"user", "users"})


def overlap_sets(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The two word sets ``word_overlap`` compares, to compute once for many pairs."""
    words = word_set(text)
    return words, words - _GRAMMAR


def sets_overlap(a: tuple[frozenset[str], frozenset[str]],
                 b: tuple[frozenset[str], frozenset[str]]) -> float:
    return max(_jaccard(a[0], b[0]), _jaccard(a[1], b[1]))


def _jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    union = left | right
    return len(left & right) / len(union) if union else 0.0


def restates(new: str, old: str) -> bool:
    """Whether ``new`` gives a new value to what ``old`` said: the same opening words
    (who or what), and either a few words changed, only numbers ("PostgreSQL 16" → "17")
    or in a fact that holds a single value at a time ("lives in Lisbon" → "lives in
    Porto now"), or another number in the same words around it, however the rest is
    worded ("1 tablespoon of coffee for every 6 ounces of water" → "… 5 ounces of
    water"). "Likes tea" and "likes coffee" both stay."""
    a, b = _content_words(new), _content_words(old)
    if len(a) < 3 or len(b) < 3 or a[:2] != b[:2]:
        return False
    if _renumbered(new, old):
        return True
    added, removed = set(a) - set(b), set(b) - set(a)
    if not added or not removed or len(added | removed) > MAX_CHANGED_WORDS:
        return False
    numbers_only = all(w.isdigit() for w in added | removed)
    return numbers_only or bool(SINGLE_VALUED & set(a) & set(b))


def _renumbered(new: str, old: str) -> bool:
    """Whether a number of ``old`` has another value in ``new`` with the same
    ``FRAME_WORDS`` words on each side (or the sentence's end)."""
    old_frames = _number_frames(old)
    return any(old_frames.get(frame, value) != value
               for frame, value in _number_frames(new).items())


def _number_frames(text: str) -> dict[tuple[str, ...], str]:
    """Each number of ``text`` by the words around it (its frame), when they say what
    it counts in at least ``FRAME_MEANING`` words besides the sentence's subject ("the
    user ran 5 miles in the" names too little: two runs are two facts)."""
    tokens = [t.lower() for t in _FRAME_TOKEN.findall(text)] + ["."]
    subject = set(tokens[:2])
    frames = {}
    for i, token in enumerate(tokens[:-1]):
        if not token[0].isdigit() or i < FRAME_WORDS:
            continue
        after = tokens[i + 1:i + 1 + FRAME_WORDS]
        after = after[:after.index(".") + 1] if "." in after else after
        around = (*tokens[i - FRAME_WORDS:i], *after)
        meaning = {w for w in around if w not in STOPWORDS and w not in _GRAMMAR} - subject
        if len(meaning) >= FRAME_MEANING:
            frames[(*around[:FRAME_WORDS], "#", *after)] = token
    return frames


def _content_words(text: str) -> list[str]:
    return [w for w in (w.lower() for w in _WORD.findall(text)) if w not in _TIME_WORDS]


@dataclass(frozen=True)
class Match:
    """A stored memory that a new fact duplicates, and how."""

    memory: Memory
    #: "same" (identical words: refresh) or "changed" (supersede).
    kind: str
    overlap: float


def find_duplicate(
    content: str,
    candidates: Mapping[str, str],
    cosines: Mapping[str, float],
    load: Callable[[str], Memory],
) -> Match | None:
    """The stored duplicate of ``content`` among ``candidates`` (id → text), if any:
    the one with the highest word overlap above the threshold, or else the nearest
    embedding at or above the cosine threshold. ``load`` fetches the chosen memory."""
    words = word_set(content)
    names = anchors(content)
    best_id, best_overlap, best_cosine = None, -1.0, -1.0
    for memory_id, text in candidates.items():
        other_names = anchors(text)
        if names and other_names and names != other_names:
            continue
        overlap = word_overlap(content, text)
        cosine = cosines.get(memory_id, 0.0)
        if overlap <= DUPLICATE_OVERLAP and cosine < NEAR_DUPLICATE_COSINE and not (
                restates(content, text)):
            continue
        if (overlap, cosine) > (best_overlap, best_cosine):
            best_id, best_overlap, best_cosine = memory_id, overlap, cosine
    if best_id is None:
        return None
    kind = "same" if words == word_set(candidates[best_id]) else "changed"
    return Match(load(best_id), kind, best_overlap)
