"""Query processing and ranking shared by every backend and search path."""

from loci.search.query import bm25_to_score, fts_query, query_terms

__all__ = ["bm25_to_score", "fts_query", "query_terms"]
