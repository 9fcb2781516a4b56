"""Weighted fusion: raw BM25 ratios and floors for items one retriever cut."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from loci.models import SearchHit
from loci.search import bm25_to_score
from loci.search.fusion import fuse, with_recency
from loci.settings import SearchSettings

T = datetime(2026, 1, 1, tzinfo=UTC)


def hit(id: str, score: float) -> SearchHit:
    return SearchHit(kind="event", id=id, score=score, text=id, timestamp=T)


def test_keyword_part_is_the_raw_bm25_ratio() -> None:
    keyword = [("a", bm25_to_score(-12.0)), ("b", bm25_to_score(-3.0))]
    fused = dict(fuse(keyword, [], SearchSettings()))
    assert fused["a"] == pytest.approx(0.3)
    assert fused["b"] == pytest.approx(0.3 * 3.0 / 12.0)  # not 0.3 * 0.75 / 0.923


def test_items_cut_from_a_pool_get_its_floor() -> None:
    keyword = [("k", bm25_to_score(-5.0))]
    vector = [("v", 0.6), ("w", 0.4)]
    fused = dict(fuse(keyword, vector, SearchSettings(), vector_floor=0.4,
                      keyword_floor=bm25_to_score(-1.0)))
    assert fused["k"] == pytest.approx(0.7 * 0.4 + 0.3)
    assert fused["v"] == pytest.approx(0.7 * 0.6 + 0.3 * 1.0 / 5.0)
    without = dict(fuse(keyword, vector, SearchSettings()))
    assert without["k"] == pytest.approx(0.3) and without["v"] == pytest.approx(0.42)


def test_rrf_ignores_floors() -> None:
    config = SearchSettings(fusion="rrf")
    plain = fuse([("k", 0.5)], [("v", 0.9)], config)
    floored = fuse([("k", 0.5)], [("v", 0.9)], config, vector_floor=0.8, keyword_floor=0.4)
    assert plain == floored


def test_recency_blends_in_the_age() -> None:
    config = SearchSettings(recency_weight=0.5, recency_half_life_days=10)
    old = replace(hit("old", 0.8), timestamp=T.replace(month=1, day=1))
    new = replace(hit("new", 0.6), timestamp=T.replace(month=1, day=11))
    ranked = with_recency([old, new], config, T.replace(month=1, day=11))
    assert [(h.id, round(h.score, 6)) for h in ranked] == [("new", 0.8), ("old", 0.65)]


def test_session_evidence_lifts_turns_of_well_matching_sessions() -> None:
    from loci.retriever import SESSION_WEIGHT, _with_session_evidence

    hits = [replace(hit("x", 0.9), session="a"), replace(hit("y", 0.5), session="a"),
            replace(hit("z", 0.52), session="b")]
    blended = _with_session_evidence(hits)
    assert [h.id for h in blended] == ["x", "y", "z"]
    y = next(h for h in blended if h.id == "y")
    assert y.score == pytest.approx((1 - SESSION_WEIGHT) * 0.5 + SESSION_WEIGHT * 0.9)
