"""Weighted fusion: raw BM25 ratios and floors for items one retriever cut."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from loci.models import SearchHit
from loci.search import bm25_to_score
from loci.search.fusion import Floors, fuse, with_recency
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
    fused = dict(fuse(keyword, vector, SearchSettings(),
                      Floors(vector=0.4, keyword=bm25_to_score(-1.0))))
    assert fused["k"] == pytest.approx(0.7 * 0.4 + 0.3)
    assert fused["v"] == pytest.approx(0.7 * 0.6 + 0.3 * 1.0 / 5.0)
    without = dict(fuse(keyword, vector, SearchSettings()))
    assert without["k"] == pytest.approx(0.3) and without["v"] == pytest.approx(0.42)


def test_floors_are_the_lowest_scores_of_full_pools_only() -> None:
    keyword = [("a", 0.8), ("b", 0.5)]
    vector = [("c", 0.7), ("d", 0.3)]
    assert Floors.of(keyword, vector, pool=2) == Floors(vector=0.3, keyword=0.5)
    assert Floors.of(keyword, vector, pool=3) == Floors(vector=0.0, keyword=0.0)


def test_a_narrowed_search_bounds_the_items_it_found() -> None:
    # Unfiltered pools of a large scope: full, their lowest scores high.
    floors: Floors[str] = Floors(vector=0.6, keyword=0.7)
    # Narrowed to some sessions: "k" was found there by keyword only, "v" by vector
    # only; its vector pool was full, its keyword pool was not.
    floors.narrow([("k", 0.9)], [("v", 0.5), ("m", 0.2)], pool=2)
    assert floors.for_key("k") == (0.2, 0.7)  # cosine below that pool's lowest
    assert floors.for_key("v") == (0.6, 0.0)  # no keyword match at all, or it was found
    assert floors.for_key("other") == (0.6, 0.7)
    # A bound never loosens: a wider narrowed search leaves the tighter one.
    floors.narrow([("k", 0.9)], [("x", 0.4), ("y", 0.3)], pool=2)
    assert floors.for_key("k") == (0.2, 0.7)
    fused = dict(fuse([("k", 0.9)], [("v", 0.5), ("w", 0.55)], SearchSettings(), floors))
    assert fused["k"] == pytest.approx(0.7 * 0.2 + 0.3)
    assert fused["v"] == pytest.approx(0.7 * 0.5)
    # Relative to the best: raw BM25 of 0.7 squashed is 7/3, of 0.9 is 9.
    assert fused["w"] == pytest.approx(0.7 * 0.55 + 0.3 * (7 / 3) / 9)


def test_items_of_a_narrowed_search_may_be_relative_to_its_best() -> None:
    # The query's best keyword match overall (raw BM25 9) is someone else's; the best
    # among the sessions of the people it names is "k" (raw 3).
    keyword = [("other", bm25_to_score(-9.0)), ("k", bm25_to_score(-3.0)),
               ("j", bm25_to_score(-1.5))]
    floors: Floors[str] = Floors()
    floors.narrow(keyword[1:], [], pool=30)  # a period, say: relative to the query's best
    assert dict(fuse(keyword, [], SearchSettings(), floors))["k"] == pytest.approx(0.1)
    floors.narrow(keyword[1:], [], pool=30, own_best=True)
    fused = dict(fuse(keyword, [], SearchSettings(), floors))
    assert fused["k"] == pytest.approx(0.3) and fused["j"] == pytest.approx(0.15)
    assert fused["other"] == pytest.approx(0.3)


def test_rrf_ignores_floors() -> None:
    config = SearchSettings(fusion="rrf")
    plain = fuse([("k", 0.5)], [("v", 0.9)], config)
    floored = fuse([("k", 0.5)], [("v", 0.9)], config, Floors(vector=0.8, keyword=0.4))
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
