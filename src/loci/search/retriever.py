"""Hybrid retrieval: keyword (BM25) and vector hits for one kind of item, fused.

Without an embedder (provider ``none``) it is keyword search alone.
"""

from __future__ import annotations

from datetime import datetime

from loci.indexing import Indexer
from loci.models import Scope, SearchHit
from loci.search.fusion import FusionConfig, fuse
from loci.store.base import SearchFilters, Store

#: Each retriever returns this many times the requested hits before fusion.
POOL_FACTOR = 3
MIN_POOL = 30


class Retriever:
    def __init__(self, store: Store, indexer: Indexer | None, config: FusionConfig) -> None:
        self.store = store
        self.indexer = indexer
        self.config = config

    def search(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters,
        now: datetime | None = None,
    ) -> list[SearchHit]:
        pool = max(limit * POOL_FACTOR, MIN_POOL)
        keyword = self._keyword(scope, kind, query, pool, filters)
        if self.indexer is None or not query.strip():
            vector: list[SearchHit] = []
        else:
            self.indexer.embed_pending(kind, scope)
            query_vector = self.indexer.embed_query(query)
            vector = self.store.vector_search(scope, kind, query_vector, limit=pool,
                                              filters=filters)
        return fuse(keyword, vector, self.config, now)[:limit]

    def _keyword(
        self, scope: Scope, kind: str, query: str, limit: int, filters: SearchFilters
    ) -> list[SearchHit]:
        search = {
            "event": self.store.search_events,
            "memory": self.store.search_memories,
            "document": self.store.search_documents,
        }[kind]
        return search(scope, query, limit=limit, filters=filters)
