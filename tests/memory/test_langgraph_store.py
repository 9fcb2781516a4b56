"""Loci as a LangGraph store (``loci.integrations.langgraph_store``), through the
``langgraph-checkpoint`` package's own ``BaseStore`` methods (put, get, search,
list_namespaces, delete; sync and async), as LangGraph agents and LangMem call them."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.base import Item, SearchItem

from loci import Loci
from loci.integrations.langgraph_store import LociStore

pytestmark = [pytest.mark.loci_settings(memory_mirror=False), pytest.mark.real_clock]


def test_items_are_put_got_and_deleted_with_any_namespace_and_key(loci: Loci) -> None:
    store = LociStore(loci)
    odd = ("memories", "user 1/x", "café")
    store.put(odd, "../../etc/passwd", {"fact": "Maya likes rivers", "n": 1})
    item = store.get(odd, "../../etc/passwd")
    assert isinstance(item, Item) and item.value == {"fact": "Maya likes rivers", "n": 1}
    assert (item.namespace, item.key) == (odd, "../../etc/passwd")
    # The item is a versioned knowledge-base document of the user, under /langgraph/.
    [document] = loci.knowledge.ls("/langgraph/")
    assert document.path.startswith("/langgraph/memories/") and ".." not in document.path
    store.put(odd, "../../etc/passwd", {"fact": "Maya likes lakes", "n": 2})
    assert store.get(odd, "../../etc/passwd").value["n"] == 2  # type: ignore[union-attr]
    assert len(loci.knowledge.history(document.path)) == 1
    store.delete(odd, "../../etc/passwd")
    store.delete(odd, "../../etc/passwd")  # deleting what is gone is no error
    assert store.get(odd, "../../etc/passwd") is None
    assert store.get(("nothing",), "here") is None


def test_search_by_query_and_filter_within_a_namespace(loci: Loci) -> None:
    store = LociStore(loci)
    facts = {"a": ("Maya's sister Ana lives in Porto", "family", 3),
             "b": ("Maya prefers window seats on trains", "travel", 5),
             "c": ("The deploy key lives in the vault", "work", 1)}
    for key, (fact, kind, weight) in facts.items():
        store.put(("memories", "maya"), key, {"fact": fact, "kind": kind, "weight": weight})
    store.put(("memories", "omar"), "a", {"fact": "Omar's sister lives in Porto too",
                                          "kind": "family", "weight": 9})
    hits = store.search(("memories", "maya"), query="where does the sister live?", limit=2)
    assert hits and isinstance(hits[0], SearchItem) and hits[0].key == "a"
    assert all(h.namespace == ("memories", "maya") for h in hits)
    assert hits[0].score is not None and 0 <= hits[0].score <= 1
    family = store.search(("memories",), filter={"kind": "family"})
    assert sorted((h.namespace[1], h.key) for h in family) == [("maya", "a"), ("omar", "a")]
    heavy = store.search(("memories", "maya"), filter={"weight": {"$gte": 3}})
    assert sorted(h.key for h in heavy) == ["a", "b"]
    assert [h.key for h in store.search(("memories", "maya"), limit=1, offset=2)] == ["a"]


def test_namespaces_are_listed_and_matched(loci: Loci) -> None:
    store = LociStore(loci)
    for namespace in [("memories", "maya"), ("memories", "omar"), ("docs", "maya", "v1")]:
        store.put(namespace, "k", {"x": 1})
    assert store.list_namespaces() == [("docs", "maya", "v1"), ("memories", "maya"),
                                       ("memories", "omar")]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "maya"),
                                                           ("memories", "omar")]
    assert store.list_namespaces(suffix=("*", "v1")) == [("docs", "maya", "v1")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("memories",)]


def test_the_async_methods_work_too(loci: Loci) -> None:
    store = LociStore(loci)

    async def go() -> tuple[Item | None, list[SearchItem]]:
        await store.aput(("m",), "k", {"fact": "Maya likes rivers"})
        return await store.aget(("m",), "k"), await store.asearch(("m",), query="rivers")

    got, found = asyncio.run(go())
    assert got is not None and got.value == {"fact": "Maya likes rivers"}
    assert [h.key for h in found] == ["k"]
