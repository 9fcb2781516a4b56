"""Loci as a LangGraph store: ``LociStore`` implements ``langgraph.store.base.BaseStore``
over a Loci view's knowledge base, so LangGraph agents (and LangMem, which keeps its
memories in the graph's store) keep theirs in Loci: versioned, searchable, exported and
erased with the user.

An item ``(namespace, key)`` is the document ``/langgraph/<namespace...>/<key>`` (each
part percent-encoded), its value the document's JSON. ``search`` with a ``query`` is
Loci's hybrid search within the namespace prefix; filters match values (equality, or
the ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` operators). Items do not expire
(``supports_ttl`` is False). Needs ``langgraph-checkpoint`` (``pip install ".[langgraph]"``)::

    graph = builder.compile(store=LociStore(Loci.open(user="maya")))
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any
from urllib.parse import quote

from anyio.to_thread import run_sync
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from loci import Document, Loci, NotFoundError

ROOT = "/langgraph/"
#: Where a document keeps the namespace and key it stands for.
_META = "langgraph"
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge,
    "$lt": operator.lt, "$lte": operator.le}


class LociStore(BaseStore):
    """LangGraph's ``BaseStore`` kept by Loci (see the module's docstring)."""

    supports_ttl = False

    def __init__(self, loci: Loci) -> None:
        self.loci = loci

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await run_sync(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self.loci.knowledge.find(_path(op.namespace, op.key))
            return _item(found) if found else None
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return _namespaces(self.loci.knowledge.ls(ROOT), op)
        raise ValueError(f"unknown store operation {type(op).__name__}")

    def _put(self, op: PutOp) -> None:
        path = _path(op.namespace, op.key)
        if op.value is None:
            with suppress(NotFoundError):  # deleting what is gone is no error
                self.loci.knowledge.rm(path)
            return
        content = json.dumps(dict(op.value), ensure_ascii=False, sort_keys=True, indent=1)
        self.loci.knowledge.put(path, content, metadata={_META: {
            "namespace": list(op.namespace), "key": op.key}})

    def _search(self, op: SearchOp) -> list[SearchItem]:
        folder = _folder(op.namespace_prefix)
        scored: list[tuple[Document, float | None]]
        if op.query:
            pool = min(100, op.offset + op.limit + 20) if op.filter else op.offset + op.limit
            hits = self.loci.knowledge.search(op.query, path_prefix=folder, limit=pool)
            paths = [h.id for h in hits]
            found = {d.path: d for d in self.loci.store.get_documents(self.loci.scope, paths)}
            scored = [(found[h.id], h.score) for h in hits if h.id in found]
        else:
            documents = sorted(self.loci.knowledge.ls(folder),
                               key=lambda d: d.updated_at, reverse=True)
            scored = [(d, None) for d in documents]
        kept = [(d, score) for d, score in scored
                if _META in d.metadata and _matches(_value(d), op.filter)]
        return [_item(d, score) for d, score in kept[op.offset:op.offset + op.limit]]


def _part(text: str) -> str:
    """A namespace label or key as one path segment: percent-encoded, dots too (so
    that no segment is "." or ".."), never empty."""
    return quote(text, safe="").replace(".", "%2E") or "%"


def _path(namespace: Sequence[str], key: str) -> str:
    return _folder(namespace) + _part(key)


def _folder(namespace: Sequence[str]) -> str:
    return ROOT + "".join(_part(label) + "/" for label in namespace)


def _value(document: Document) -> dict[str, Any]:
    value = json.loads(document.content)
    return value if isinstance(value, dict) else {"value": value}


def _item(document: Document, score: float | None = None) -> Any:
    where = document.metadata[_META]
    namespace, key = tuple(where["namespace"]), str(where["key"])
    if score is None:
        return Item(value=_value(document), key=key, namespace=namespace,
                    created_at=document.created_at, updated_at=document.updated_at)
    return SearchItem(namespace, key, _value(document), document.created_at,
                      document.updated_at, score)


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    for field, condition in (wanted or {}).items():
        have = value.get(field)
        tests = condition.items() if isinstance(condition, dict) and condition and all(
            k in _COMPARE for k in condition) else [("$eq", condition)]
        try:
            if not all(_COMPARE[name](have, expected) for name, expected in tests):
                return False
        except TypeError:  # an order between values that have none
            return False
    return True


def _namespaces(documents: Sequence[Document], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    found = {tuple(d.metadata[_META]["namespace"]) for d in documents if _META in d.metadata}
    for condition in op.match_conditions or ():
        found = {n for n in found if _fits(n, condition.match_type, condition.path)}
    if op.max_depth is not None:
        found = {n[:op.max_depth] for n in found}
    return sorted(found)[op.offset:op.offset + op.limit]


def _fits(namespace: tuple[str, ...], kind: str, pattern: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``pattern``,
    ``*`` matching any one label."""
    if len(pattern) > len(namespace):
        return False
    part = namespace[:len(pattern)] if kind == "prefix" else namespace[-len(pattern):]
    return all(p in ("*", n) for p, n in zip(pattern, part, strict=True))
