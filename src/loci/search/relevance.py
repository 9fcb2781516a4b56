"""What makes a memory answer a question, beyond sharing a word with it.

- ``coverage``: the share of a question's words that a fact (its text and its topic
  tags, ``loci.memory.facts.topics``) holds, words compared without a plural "s". For
  "pet name", "the user's dog is called Biscuit" (tags pet, name) holds both and "the
  user's name is Maya" one: memory search blends ``COVERAGE_WEIGHT`` of it into each
  hit's score, so the fact that answers ranks above the one that only shares a name.
- ``MIN_RELEVANCE``: the score below which a hit is not worth showing (recall, memory
  search). It is measured, not chosen: ``benchmarks/longmemeval.py --calibrate`` searches
  each dev question's memories and turns as recall does and reports the score that keeps
  ``CALIBRATION_KEEP`` of the hits holding words of the answer (the hits below it hold
  the rest); the figure and its command are in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from loci.models import SearchHit
from loci.search.query import query_terms

#: Share of a memory hit's score that comes from how much of the question it holds.
COVERAGE_WEIGHT = 0.25
#: Share of the answer-holding hits the calibrated floor keeps.
CALIBRATION_KEEP = 0.95
#: Calibrated floor (see the module's docstring).
MIN_RELEVANCE = 0.14
_WORD = re.compile(r"\w+")


def _base(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


def coverage(query: str, text: str, tags: Iterable[str] = ()) -> float:
    """The share of the query's words (stop words out) that ``text`` or ``tags`` hold."""
    return _held(_wanted(query), text, tags)


def _wanted(query: str) -> frozenset[str]:
    return frozenset(_base(w) for w in query_terms(query))


def _held(wanted: frozenset[str], text: str, tags: Iterable[str]) -> float:
    if not wanted:
        return 0.0
    held = _words(text) | {_base(t.lower()) for t in tags}
    return len(wanted & held) / len(wanted)


@lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    """A text's words as coverage compares them (the same memories are hits of many
    questions: read once)."""
    return frozenset(_base(w.lower()) for w in _WORD.findall(text))


def by_coverage(query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """Memory hits rescored with ``COVERAGE_WEIGHT`` of their coverage, best first."""
    w, wanted = COVERAGE_WEIGHT, _wanted(query)  # the query's words, read once
    rescored = [h.rescored((1 - w) * h.score + w * _held(
        wanted, h.text, h.metadata.get("tags") or ())) for h in hits]
    return sorted(rescored, key=lambda h: h.score, reverse=True)


def calibrated_floor(scores: Sequence[float], keep: float = CALIBRATION_KEEP) -> float:
    """The score that keeps ``keep`` of ``scores`` (those of the hits holding answer
    words) at or above it: how ``MIN_RELEVANCE`` is measured."""
    if not scores:
        return 0.0
    ordered = sorted(scores, reverse=True)
    return ordered[max(math.ceil(keep * len(ordered)) - 1, 0)]
