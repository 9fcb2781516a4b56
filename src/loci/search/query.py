"""Turn user text into safe full-text queries.

User text is never passed to a full-text engine as syntax: ``"foo AND (``, ``NEAR(``
or ``*`` must search for the words, not fail. Terms are extracted with a Unicode word
pattern, stop words are dropped (unless nothing else is left), and each term is quoted.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 32

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just me more most my myself no nor not now of off
    on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through
    to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves""".split()
)


def query_terms(text: str) -> list[str]:
    """Distinct lowercase terms of ``text``, stop words removed when others remain."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    content = [w for w in words if w not in STOPWORDS]
    return (content or words)[:_MAX_TERMS]


def fts_query(text: str) -> str | None:
    """An FTS5/tsquery-safe OR query of quoted terms, or None if there are no words.

    OR (not AND) because BM25 already ranks documents matching more terms higher, and
    natural-language questions rarely share every word with the answer.
    """
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def bm25_to_score(rank: float) -> float:
    """Map an FTS5 ``bm25()`` value (more negative is better) into [0, 1)."""
    relevance = max(0.0, -rank)
    return relevance / (1.0 + relevance)
