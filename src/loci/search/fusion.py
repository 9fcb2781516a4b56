"""Fusing keyword and vector candidates into one ranking, with scores in [0, 1].

Candidates are (item key, score) pairs: fusion needs no item's content, so the
retriever reads only the items that win.

Two methods (seeds/002 gives the weights of the first):

- ``weighted``: ``vector_weight * cosine + keyword_weight * bm25 / best_bm25``, where
  ``bm25`` is the raw BM25 relevance (stores report it squashed into [0, 1) as
  ``r / (1 + r)``; it is unsquashed here, because the squash flattens the differences
  between good and very good keyword matches);
- ``rrf``: reciprocal-rank fusion, ``Σ w / (k + rank)``, scaled so a hit ranked first by
  both retrievers scores 1.

An item found by one retriever only was still scored by the other, just below its
cut: callers that cut a pool pass that pool's lowest score as ``vector_floor`` /
``keyword_floor``, and the item gets it instead of zero (an upper bound, and a far
better guess than zero for cosines, which are rarely near zero).

Optional recency weighting blends in ``0.5 ** (age / half_life)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from typing import TypeVar

from loci.models import SearchHit
from loci.settings import SearchSettings

#: What identifies a candidate: a store's key for an item.
K = TypeVar("K", bound=Hashable)


def fuse(
    keyword: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    config: SearchSettings,
    *,
    vector_floor: float = 0.0,
    keyword_floor: float = 0.0,
) -> list[tuple[K, float]]:
    """One ranking of the union of both candidate lists (item key, score), best first.
    The floors are what an item missing from one list gets from it (weighted fusion
    only)."""
    total = config.vector_weight + config.keyword_weight
    wv, wk = config.vector_weight / total, config.keyword_weight / total
    parts: dict[K, list[float]] = {}
    best = max((_relevance(score) for _, score in keyword), default=0.0) or 1.0
    for slot, scored in enumerate((vector, keyword)):
        for rank, (key, score) in enumerate(scored, start=1):
            if config.fusion == "rrf":
                part = (config.rrf_k + 1) / (config.rrf_k + rank)
            elif slot:  # keyword scores are relative to the query's best
                part = _relevance(score) / best
            else:  # cosines are absolute
                part = score
            parts.setdefault(key, [-1.0, -1.0])[slot] = part
    fv, fk = (0.0, 0.0) if config.fusion == "rrf" else (
        vector_floor, min(1.0, _relevance(keyword_floor) / best))
    fused = [(key, min(1.0, wv * (pv if pv >= 0 else fv) + wk * (pk if pk >= 0 else fk)))
             for key, (pv, pk) in parts.items()]
    return sorted(fused, key=lambda c: c[1], reverse=True)


def with_recency(hits: Sequence[SearchHit], config: SearchSettings, now: datetime
                 ) -> list[SearchHit]:
    """``recency_weight`` of each score from ``0.5 ** (age / half_life)``, best first."""
    w = config.recency_weight
    blended = [h.rescored((1 - w) * h.score + w * _decay(h, config, now)) for h in hits]
    return sorted(blended, key=lambda h: h.score, reverse=True)


def _relevance(score: float) -> float:
    """The raw BM25 relevance behind a keyword score ``r / (1 + r)``."""
    return score / max(1e-9, 1.0 - score)


def _decay(hit: SearchHit, config: SearchSettings, now: datetime) -> float:
    age_days = max(0.0, (now - hit.timestamp).total_seconds() / 86_400)
    return float(0.5 ** (age_days / config.recency_half_life_days))
