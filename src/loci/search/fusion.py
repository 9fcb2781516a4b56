"""Fusing keyword and vector hits into one ranking, with scores in [0, 1].

Two methods (seeds/002 gives the weights of the first):

- ``weighted``: ``vector_weight * cosine + keyword_weight * bm25 / best_bm25``;
- ``rrf``: reciprocal-rank fusion, ``Σ w / (k + rank)``, scaled so a hit ranked first by
  both retrievers scores 1.

Optional recency weighting blends in ``0.5 ** (age / half_life)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from loci.errors import ConfigError
from loci.models import SearchHit

METHODS = ("weighted", "rrf")


@dataclass(frozen=True)
class FusionConfig:
    method: str = "weighted"
    vector_weight: float = 0.7
    keyword_weight: float = 0.3
    rrf_k: int = 60
    #: Share of the final score given to recency (0 = off).
    recency_weight: float = 0.0
    recency_half_life_days: float = 30.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown fusion method {self.method!r}; use one of {METHODS}")
        if min(self.vector_weight, self.keyword_weight) < 0 or not (
            self.vector_weight + self.keyword_weight > 0
        ):
            raise ConfigError("search weights must be non-negative and not both zero")
        if not 0 <= self.recency_weight <= 1 or self.recency_half_life_days <= 0:
            raise ConfigError("recency_weight must be in [0, 1] and the half-life positive")


def fuse(
    keyword: Sequence[SearchHit],
    vector: Sequence[SearchHit],
    config: FusionConfig,
    now: datetime | None = None,
) -> list[SearchHit]:
    """One ranking of the union of both hit lists, best first."""
    total = config.vector_weight + config.keyword_weight
    wv, wk = config.vector_weight / total, config.keyword_weight / total
    by_id: dict[str, SearchHit] = {}
    scores: dict[str, float] = {}
    for weight, hits, is_keyword in ((wv, vector, False), (wk, keyword, True)):
        best = max((h.score for h in hits), default=0.0) or 1.0
        for rank, hit in enumerate(hits, start=1):
            if config.method == "rrf":
                part = (config.rrf_k + 1) / (config.rrf_k + rank)
            else:  # keyword scores are relative to the query's best, cosines absolute
                part = hit.score / best if is_keyword else hit.score
            by_id.setdefault(hit.id, hit)
            scores[hit.id] = scores.get(hit.id, 0.0) + weight * part
    fused = [replace(by_id[i], score=min(1.0, s)) for i, s in scores.items()]
    if config.recency_weight and now is not None:
        fused = [_with_recency(h, config, now) for h in fused]
    return sorted(fused, key=lambda h: h.score, reverse=True)


def _with_recency(hit: SearchHit, config: FusionConfig, now: datetime) -> SearchHit:
    age_days = max(0.0, (now - hit.timestamp).total_seconds() / 86_400)
    decay = 0.5 ** (age_days / config.recency_half_life_days)
    w = config.recency_weight
    return replace(hit, score=(1 - w) * hit.score + w * decay)
