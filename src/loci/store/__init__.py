"""Storage backends behind one contract; :func:`open_store` picks one by URL."""

from __future__ import annotations

from loci.errors import ConfigError
from loci.store.base import NO_FILTERS, NewCompaction, ScopeData, SearchFilters, Store

__all__ = ["NO_FILTERS", "NewCompaction", "ScopeData", "SearchFilters", "Store", "open_store"]


def open_store(url: str) -> Store:
    """Open (creating and migrating if needed) the store at ``url``."""
    if url.startswith("sqlite:"):
        from loci.store.sqlite import SQLiteStore

        return SQLiteStore(url)
    if url.startswith(("postgresql:", "postgres:")):
        from loci.store.postgres import PostgresStore

        return PostgresStore(url)
    raise ConfigError(
        f"unknown store URL {url!r}: expected sqlite:///PATH or postgresql://USER@HOST/DB"
    )
