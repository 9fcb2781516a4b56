"""Loci as a LangGraph store: ``LociStore`` implements ``langgraph.store.base.BaseStore``
over a Loci view's knowledge base, so LangGraph agents (and LangMem, which keeps its
memories in the graph's store) keep theirs in Loci: versioned, searchable, exported and
erased with the user.

An item ``(namespace, key)`` is the document ``/langgraph/<namespace...>/<key>`` (each
part percent-encoded), its value the document's JSON, and the document's metadata names
the item; a document under ``/langgraph/`` that does not (written by other means) is no
item: ``get`` does not find it, searches and ``list_namespaces`` skip it. A value is a
dict of JSON values nested at most ``MAX_DEPTH`` levels; keys that are numbers, booleans
or None become strings, as JSON (and LangGraph's Postgres store) makes them.

``search`` finds the items in the namespace prefix that pass its ``filter`` (equality,
or the ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` operators), newest first;
with a ``query``, best first by Loci's hybrid search of the prefix, which is asked for
more hits until ``offset + limit`` of them pass the filter, it has no more, or it has
ranked ``MAX_RANKED``; the items it did not rank follow, newest first, without a score.
So a filter never loses an item, and pages go on past the knowledge search's 100 hits.
Items do not expire (``supports_ttl`` is False). Needs ``langgraph-checkpoint``
(``pip install ".[langgraph]"``)::

    graph = builder.compile(store=LociStore(Loci.open(user="maya")))
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from itertools import islice
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

from loci import Document, Loci, NotFoundError, SearchFilters, ValidationError
from loci.checks import check_text

ROOT = "/langgraph/"
#: Levels of nesting a value may have: deep enough for any real value, and far enough
#: from Python's recursion limit that encoding and decoding it cannot reach that.
MAX_DEPTH = 128
#: Hits of the knowledge search a query search ranks at most (pages past them go on
#: with the unranked items).
MAX_RANKED = 1_000
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
            return _entry(found) if found else None
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
        self.loci.knowledge.put(path, _content(op.value), metadata={_META: {
            "namespace": list(op.namespace), "key": op.key}})

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise ValidationError("a search filter maps fields to values or conditions")
        if op.offset < 0 or op.limit < 0:
            raise ValidationError("a search's offset and limit cannot be negative")
        folder = _folder(op.namespace_prefix)
        wanted = op.offset + op.limit
        found = self._ranked(op.query, folder, op.filter, wanted) if op.query else []
        if len(found) < wanted:  # the rest, as a search without a query has them
            ranked = {(item.namespace, item.key) for item, _ in found}
            listed = sorted(self.loci.knowledge.ls(folder), key=lambda d: d.updated_at,
                            reverse=True)
            rest = (item for item in _passing(listed, op.filter)
                    if (item.namespace, item.key) not in ranked)
            found += [(item, None) for item in islice(rest, wanted - len(found))]
        return [SearchItem(item.namespace, item.key, item.value, item.created_at,
                           item.updated_at, score) for item, score in found[op.offset:]]

    def _ranked(self, query: str, folder: str, wanted: Mapping[str, Any] | None,
                count: int) -> list[tuple[Item, float | None]]:
        """Up to ``count`` items of ``folder`` that pass ``wanted``, best first for
        ``query``. The hybrid search is asked for a pool of hits four times larger each
        time too few of them pass, until it has no more or ``MAX_RANKED``. It is the
        retriever's search: the knowledge base's stops at 100 hits."""
        if not isinstance(query, str):
            raise ValidationError("a search query must be text")
        if not count:
            return []
        filters = SearchFilters(path_prefix=folder)
        pool = min(count, MAX_RANKED)
        while True:
            hits = self.loci.retriever.search(self.loci.scope, "document", query,
                                              limit=pool, filters=filters,
                                              now=self.loci.clock())
            documents = {d.path: d for d in self.loci.store.get_documents(
                self.loci.scope, [h.id for h in hits])}
            ranked: list[tuple[Item, float | None]] = []
            for hit in hits:
                document = documents.get(hit.id)
                item = _entry(document) if document else None
                if item is not None and _matches(item.value, wanted):
                    ranked.append((item, hit.score))
            if len(ranked) >= count or len(hits) < pool or pool >= MAX_RANKED:
                return ranked[:count]
            pool = min(pool * 4, MAX_RANKED)


def _part(text: str) -> str:
    """A namespace label or key as one path segment: percent-encoded, dots too (so
    that no segment is "." or ".."), never empty."""
    if not isinstance(text, str):
        raise ValidationError(f"namespace labels and keys are text, not {type(text).__name__}")
    check_text("namespace label or key", text)  # a lone surrogate has no UTF-8 to quote
    return quote(text, safe="").replace(".", "%2E") or "%"


def _path(namespace: Sequence[str], key: str) -> str:
    return _folder(namespace) + _part(key)


def _folder(namespace: Sequence[str]) -> str:
    return ROOT + "".join(_part(label) + "/" for label in namespace)


def _content(value: Any) -> str:
    """``value`` as a document's JSON, keys sorted (so that putting an equal value
    again writes no new version)."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"a store value is a dict, not {type(value).__name__}")
    _check_depth(value)
    try:
        # A first round trip turns non-text keys into text, so that they can be sorted.
        plain = json.loads(json.dumps(dict(value), ensure_ascii=False))
    except (TypeError, ValueError) as error:  # not JSON: a set, bytes, a tuple key...
        raise ValidationError(f"a store value must be JSON: {error}") from None
    return json.dumps(plain, ensure_ascii=False, sort_keys=True, indent=1)


def _check_depth(value: Any) -> None:
    """A ``ValidationError`` if ``value`` is nested deeper than ``MAX_DEPTH`` (found
    without recursion, which such a value would exhaust; a value that holds itself
    is found too)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValidationError(f"a store value is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, Mapping):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)


def _where(document: Document) -> tuple[tuple[str, ...], str] | None:
    """The namespace and key ``document`` stands for, or None if it is no item: its
    metadata does not name one, or names one that is not at its path."""
    where = document.metadata.get(_META)
    if not isinstance(where, dict):
        return None
    namespace, key = where.get("namespace"), where.get("key")
    if not (isinstance(namespace, list) and all(isinstance(n, str) for n in namespace)
            and isinstance(key, str) and _path(namespace, key) == document.path):
        return None
    return tuple(namespace), key


def _entry(document: Document) -> Item | None:
    """The item ``document`` holds, or None if it holds none (see ``_where``) or its
    content is no JSON (edited by other means)."""
    where = _where(document)
    if where is None:
        return None
    try:
        value = json.loads(document.content)
    except (ValueError, RecursionError):  # no JSON, or nested past what can be read
        return None
    return Item(value=value if isinstance(value, dict) else {"value": value}, key=where[1],
                namespace=where[0], created_at=document.created_at,
                updated_at=document.updated_at)


def _passing(documents: Iterable[Document], wanted: Mapping[str, Any] | None
             ) -> Iterator[Item]:
    """The items of ``documents`` whose values pass ``wanted``, in order."""
    for document in documents:
        item = _entry(document)
        if item is not None and _matches(item.value, wanted):
            yield item


def _matches(value: dict[str, Any], wanted: Mapping[str, Any] | None) -> bool:
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
    found = {where[0] for d in documents if (where := _where(d)) is not None}
    for condition in op.match_conditions or ():
        found = {n for n in found if _fits(n, condition.match_type, condition.path)}
    if op.max_depth is not None:
        found = {n[:op.max_depth] for n in found}
    return sorted(found)[op.offset:op.offset + op.limit]


def _fits(namespace: tuple[str, ...], kind: str, pattern: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``pattern``,
    ``*`` matching any one label (an empty pattern: every namespace)."""
    if kind not in ("prefix", "suffix"):
        raise ValidationError(f"a namespace match is by prefix or suffix, not {kind!r}")
    if len(pattern) > len(namespace):
        return False
    start = 0 if kind == "prefix" else len(namespace) - len(pattern)
    part = namespace[start:start + len(pattern)]
    return all(p in ("*", n) for p, n in zip(pattern, part, strict=True))
