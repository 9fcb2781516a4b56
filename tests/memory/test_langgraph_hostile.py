"""``LociStore`` (``loci.integrations.langgraph_store``) under input LangGraph's own
methods pass through unchecked: filtered and deep query searches, documents under
``/langgraph/`` that are no items, values that are no JSON, raw ``batch`` operations.
LangGraph's ``InMemoryStore`` is the reference where the two should agree."""

from __future__ import annotations

from typing import Any, cast

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from loci import Loci, ValidationError
from loci.integrations.langgraph_store import MAX_DEPTH, LociStore

pytestmark = [pytest.mark.loci_settings(memory_mirror=False), pytest.mark.real_clock]


def test_a_query_search_with_a_filter_finds_matches_the_query_ranks_low(loci: Loci) -> None:
    store = LociStore(loci)
    for i in range(150):
        store.put(("notes",), f"n{i}", {"text": f"apples apples apples {i}", "kind": "other"})
    store.put(("notes",), "target", {"text": "apples " + "filler words here " * 300,
                                     "kind": "target"})
    loci.wait_indexed()
    # The target is not among the query's first 100 hits, where the filter once looked.
    assert "target" not in {h.key for h in store.search(("notes",), query="apples",
                                                        limit=100)}
    [found] = store.search(("notes",), query="apples", filter={"kind": "target"})
    assert found.key == "target" and found.score is not None  # ranked, not appended
    assert [h.key for h in store.search(("notes",), filter={"kind": "target"})] == ["target"]


def test_filtered_query_results_keep_the_query_order(loci: Loci) -> None:
    store = LociStore(loci)
    for i in range(40):
        store.put(("notes",), f"n{i}", {"text": f"pears {i}", "even": i % 2 == 0})
    store.put(("notes",), "best", {"text": "ripe pears and pears", "even": True})
    store.put(("notes",), "odd one", {"text": "ripe pears and pears", "even": False})
    loci.wait_indexed()
    hits = store.search(("notes",), query="ripe pears", filter={"even": True}, limit=30)
    assert len(hits) == 21 and all(h.value["even"] is True for h in hits)
    assert hits[0].key == "best"
    scores = [h.score for h in hits]
    assert None not in scores and scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_query_searches_page_past_the_knowledge_search_limit(loci: Loci) -> None:
    store = LociStore(loci)
    for i in range(130):
        store.put(("many",), f"i{i}", {"t": f"banana {i}"})
    loci.wait_indexed()
    pages = [store.search(("many",), query="banana", offset=offset, limit=50)
             for offset in (0, 50, 100)]
    assert [len(p) for p in pages] == [50, 50, 30]
    everything = store.search(("many",), query="banana", limit=500)
    assert sorted(h.key for h in everything) == sorted(f"i{i}" for i in range(130))
    assert all(h.score is not None for h in everything)  # all ranked
    # Pages are the whole list's (only among equal scores may the order differ).
    for page, offset in zip(pages, (0, 50, 100), strict=True):
        assert [h.score for h in page] == [h.score for h in everything[offset:offset + 50]]
    assert len(store.search(("many",), query="banana", offset=95)) == 10
    assert store.search(("many",), query="banana", offset=200) == []
    with pytest.raises(ValidationError):
        store.search(("many",), query="banana", offset=-1)


@pytest.mark.loci_settings(memory_mirror=False, embedding_provider="none")
def test_a_query_search_lists_the_items_it_does_not_rank_last(loci: Loci) -> None:
    # Keyword search alone: the items without the query's words are no hits.
    store = LociStore(loci)
    store.put(("m",), "hit", {"fact": "Maya keeps bees"})
    for i in range(3):
        store.put(("m",), f"other{i}", {"fact": f"zzz {i}"})
    hits = store.search(("m",), query="bees", limit=10)
    # Every item of the namespace, as without a query; the query's hit first.
    assert hits[0].key == "hit" and hits[0].score is not None
    assert sorted(h.key for h in hits) == ["hit", "other0", "other1", "other2"]
    assert [h.score for h in hits[1:]] == [None, None, None]


def test_documents_under_the_root_that_are_no_items_are_skipped(loci: Loci) -> None:
    store = LociStore(loci)
    store.put(("real",), "k", {"fact": "Maya likes rivers"})
    loci.knowledge.put("/langgraph/foreign/doc", "not json")
    loci.knowledge.put("/langgraph/foreign/junk", '{"a": 1}', metadata={"langgraph": "junk"})
    loci.knowledge.put("/langgraph/foreign/liar", '{"a": 1}', metadata={
        "langgraph": {"namespace": ["real"], "key": "stolen"}})  # not where it says
    loci.knowledge.put("/langgraph/foreign/bad", '{"a": 1}', metadata={
        "langgraph": {"namespace": [1], "key": None}})
    for key in ("doc", "junk", "liar", "bad"):
        assert store.get(("foreign",), key) is None
    assert store.get(("real",), "stolen") is None
    assert store.search(("foreign",)) == []
    assert store.search(("foreign",), query="a") == []
    assert store.list_namespaces() == [("real",)]
    assert [h.key for h in store.search((), query="rivers")] == ["k"]
    # An item's content edited into something else by other means is no item either.
    loci.knowledge.put("/langgraph/real/k", "[[[not json")
    assert store.get(("real",), "k") is None and store.search(("real",)) == []
    # Putting the item again makes it one.
    store.put(("foreign",), "doc", {"a": 2})
    assert store.get(("foreign",), "doc").value == {"a": 2}  # type: ignore[union-attr]


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"n": value}
    return value


def test_values_are_json_or_refused(loci: Loci) -> None:
    store = LociStore(loci)
    # Keys JSON can write become text, as in LangGraph's Postgres store.
    store.put(("v",), "keys", {1: "a", "b": 2, False: "f", None: "n", 1.5: "h"})  # type: ignore[dict-item]
    assert store.get(("v",), "keys").value == {  # type: ignore[union-attr]
        "1": "a", "b": 2, "false": "f", "null": "n", "1.5": "h"}
    store.put(("v",), "deep", _nested(MAX_DEPTH))
    assert store.get(("v",), "deep").value == _nested(MAX_DEPTH)  # type: ignore[union-attr]
    itself: dict[str, Any] = {}
    itself["me"] = itself
    refused: list[Any] = [_nested(MAX_DEPTH + 1), _nested(1000), itself, {"x": {1, 2}},
                          {"x": b"ab"}, {("a",): 1}, {"x": object()}]
    for value in refused:
        with pytest.raises(ValidationError):
            store.put(("v",), "bad", value)
    with pytest.raises(ValidationError):
        store.batch([PutOp(("v",), "bad", [1, 2])])  # type: ignore[arg-type]
    assert store.get(("v",), "bad") is None
    # The same value with its keys in another order writes no new version.
    store.put(("v",), "order", {"a": 1, 2: "b"})  # type: ignore[dict-item]
    store.put(("v",), "order", {2: "b", "a": 1})  # type: ignore[dict-item]
    assert loci.knowledge.history("/langgraph/v/order") == []


def test_bad_filters_labels_and_keys_are_validation_errors(loci: Loci) -> None:
    store = LociStore(loci)
    store.put(("v",), "k", {"x": 1})
    for bad in ("abc", [1], 3):
        with pytest.raises(ValidationError):
            store.search(("v",), filter=bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            store.search(("v",), query="x", filter=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        store.batch([SearchOp(("v",), query=3)])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        store.batch([GetOp((1,), "k")])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        store.batch([GetOp(("v",), 1)])  # type: ignore[arg-type]
    for call in (lambda: store.put(("v",), "k\ud800", {"x": 1}),
                 lambda: store.get(("v\udfff",), "k"), lambda: store.search(("v\udfff",))):
        with pytest.raises(ValidationError, match="surrogate"):
            call()
    with pytest.raises(ValidationError):
        store.batch([ListNamespacesOp(match_conditions=(MatchCondition("middle", ("v",)),))])  # type: ignore[arg-type]


NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("x", "b"), ("x", "y", "c")]
CONDITIONS = [(), ("*",), ("a",), ("b",), ("*", "b"), ("b", "*"), ("c",), ("x", "y", "c"),
              ("a", "b", "c", "d")]


@pytest.mark.parametrize("kind", ["prefix", "suffix"])
def test_namespaces_match_as_in_langgraphs_own_store(loci: Loci, kind: str) -> None:
    ours, theirs = LociStore(loci), InMemoryStore()
    for store in (ours, theirs):
        for namespace in NAMESPACES:
            store.put(namespace, "k", {"x": 1})
    for path in CONDITIONS:
        op = ListNamespacesOp(match_conditions=(MatchCondition(kind, path),))  # type: ignore[arg-type]
        [expected] = theirs.batch([op])
        assert ours.batch([op]) == [sorted(cast("list[tuple[str, ...]]", expected))], path
    [everything] = ours.batch([ListNamespacesOp(match_conditions=(MatchCondition(kind, ()),))])  # type: ignore[arg-type]
    assert everything == sorted(NAMESPACES)
