"""Fusing keyword and vector candidates into one ranking, with scores in [0, 1].

Candidates are (item key, score) pairs: fusion needs no item's content, so the
retriever reads only the items that win.

Two methods (the first with fixed weights):

- ``weighted``: ``vector_weight * cosine + keyword_weight * bm25 / best_bm25``, where
  ``bm25`` is the raw BM25 relevance (stores report it squashed into [0, 1) as
  ``r / (1 + r)``; it is unsquashed here, because the squash flattens the differences
  between good and very good keyword matches);
- ``rrf``: reciprocal-rank fusion, ``Σ w / (k + rank)``, scaled so a hit ranked first by
  both retrievers scores 1.

An item found by one retriever only was still scored by the other, just below its
cut: it gets the lowest score of the other's pool if that pool was full (an upper
bound, and a far better guess than zero for cosines, which are rarely near zero), and
zero if it was not (then the item was not found at all). :class:`Floors` keeps the
tightest bound known for each item: a search narrowed by a filter (a period, some
sessions) bounds the items it found too, and its pools' lowest scores are lower than
those of a scope where many items, relevant or not, compete (in a large scope the
unfiltered floors lift an item found by one retriever alone above most found by both).
The retriever gives items found by keywords alone their own cosines (the store
computes them); the vector floor is left for items without a vector. An item found by
keywords in the sessions of the people a query names has its keyword part relative to
the best match among those sessions (``Floors.narrow(..., own_best=True)``), as if their
conversations were searched alone: among other people's, the query's best match may be
anyone's, and it shrank the keyword part of every one of theirs.

Optional recency weighting blends in ``0.5 ** (age / half_life)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from loci.models import SearchHit
from loci.settings import SearchSettings

#: What identifies a candidate: a store's key for an item.
K = TypeVar("K", bound=Hashable)


@dataclass
class Floors(Generic[K]):
    """What an item missing from a candidate list gets from it: (vector, keyword)
    scores, the same for every item unless a narrowed search bounded it lower."""

    vector: float = 0.0
    keyword: float = 0.0
    tighter: dict[K, tuple[float, float]] = field(default_factory=dict)
    #: The raw BM25 an item's keyword part is relative to, where not the query's best.
    best: dict[K, float] = field(default_factory=dict)

    @classmethod
    def of(cls, keyword: Sequence[tuple[K, float]], vector: Sequence[tuple[K, float]],
           pool: int) -> Floors[K]:
        """The floors of a search that asked each retriever for ``pool`` candidates."""
        return cls(_lowest(vector, pool), _lowest(keyword, pool))

    def narrow(self, keyword: Sequence[tuple[K, float]], vector: Sequence[tuple[K, float]],
               pool: int, *, own_best: bool = False) -> None:
        """Bound the items a filtered search found (each retriever asked for ``pool``):
        each passes the filter, so the other retriever, searching with it, would have
        returned the item had it scored above its own lowest candidate. With
        ``own_best``, the keyword parts of the items it found are relative to its best."""
        vector_bound, keyword_bound = _lowest(vector, pool), _lowest(keyword, pool)
        best = max((_relevance(score) for _, score in keyword), default=0.0)
        for key, _ in keyword:
            if own_best and best > 0:
                self.best[key] = min(best, self.best.get(key, best))
            floor_v, floor_k = self.for_key(key)
            self.tighter[key] = (min(floor_v, vector_bound), floor_k)
        for key, _ in vector:
            floor_v, floor_k = self.for_key(key)
            self.tighter[key] = (floor_v, min(floor_k, keyword_bound))

    def for_key(self, key: K) -> tuple[float, float]:
        return self.tighter.get(key, (self.vector, self.keyword))


def fuse(
    keyword: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    config: SearchSettings,
    floors: Floors[K] | None = None,
) -> list[tuple[K, float]]:
    """One ranking of the union of both candidate lists (item key, score), best first.
    ``floors`` say what an item missing from one list gets from it (weighted fusion
    only; none: zero)."""
    total = config.vector_weight + config.keyword_weight
    wv, wk = config.vector_weight / total, config.keyword_weight / total
    parts: dict[K, list[float]] = {}
    best = max((_relevance(score) for _, score in keyword), default=0.0) or 1.0
    relative_to = floors.best if floors is not None else {}
    for slot, scored in enumerate((vector, keyword)):
        for rank, (key, score) in enumerate(scored, start=1):
            if config.fusion == "rrf":
                part = (config.rrf_k + 1) / (config.rrf_k + rank)
            elif slot:  # keyword scores are relative to the query's best
                part = min(1.0, _relevance(score) / relative_to.get(key, best))
            else:  # cosines are absolute
                part = score
            parts.setdefault(key, [-1.0, -1.0])[slot] = part
    if config.fusion == "rrf" or floors is None:
        floors = Floors()
    fused = []
    for key, (pv, pk) in parts.items():
        fv, fk = floors.for_key(key)
        pv = pv if pv >= 0 else fv
        pk = pk if pk >= 0 else min(1.0, _relevance(fk) / best)
        fused.append((key, min(1.0, wv * pv + wk * pk)))
    return sorted(fused, key=lambda c: c[1], reverse=True)


def with_recency(hits: Sequence[SearchHit], config: SearchSettings, now: datetime
                 ) -> list[SearchHit]:
    """``recency_weight`` of each score from ``0.5 ** (age / half_life)``, best first."""
    w = config.recency_weight
    blended = [h.rescored((1 - w) * h.score + w * _decay(h, config, now)) for h in hits]
    return sorted(blended, key=lambda h: h.score, reverse=True)


def _lowest(scored: Sequence[tuple[K, float]], pool: int) -> float:
    """The lowest score of a full pool; zero if the pool was not full (what it left
    out was not found at all)."""
    return scored[-1][1] if len(scored) >= pool else 0.0


def _relevance(score: float) -> float:
    """The raw BM25 relevance behind a keyword score ``r / (1 + r)``."""
    return score / max(1e-9, 1.0 - score)


def _decay(hit: SearchHit, config: SearchSettings, now: datetime) -> float:
    age_days = max(0.0, (now - hit.timestamp).total_seconds() / 86_400)
    return float(0.5 ** (age_days / config.recency_half_life_days))
