"""Storage backends behind one contract; :func:`open_store` picks one by URL."""

from __future__ import annotations

from loci.errors import ConfigError, StoreError
from loci.store.base import NO_FILTERS, NewCompaction, ScopeData, SearchFilters, Store

#: The modules of the ``postgres`` extra (``pip install "loci-context[postgres]"``).
POSTGRES_MODULES = frozenset({"psycopg", "psycopg_pool", "psycopg_binary", "pgvector"})

__all__ = ["NO_FILTERS", "NewCompaction", "ScopeData", "SearchFilters", "Store", "open_store"]


def open_store(url: str, *, vector_memory_mb: int | None = None,
               migrating: bool = False) -> Store:
    """Open (creating and migrating if needed) the store at ``url``. The vectors it
    keeps in memory for search take at most ``vector_memory_mb`` (None: no limit;
    ``[search] vector_memory_mb`` of the settings). A store that ``loci migrate`` is
    still copying (or was interrupted copying) is refused, unless ``migrating``: it
    would answer with part of its data."""
    store = _open(url, vector_memory_mb)
    source = None if migrating else store.copying_from()
    if source is not None:
        store.close()
        raise StoreError(
            f"the store {url} is an unfinished copy of {source}: `loci migrate` was "
            f"interrupted or is still running; run `loci migrate --from {source} --to "
            f"{url}` again to finish it")
    return store


def _open(url: str, vector_memory_mb: int | None) -> Store:
    if url.startswith("sqlite:"):
        from loci.store.sqlite import SQLiteStore

        return SQLiteStore(url, vector_memory_mb=vector_memory_mb)
    if url.startswith(("postgresql:", "postgres:")):
        try:
            from loci.store.postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in POSTGRES_MODULES:
                raise
            raise ConfigError(
                f"a PostgreSQL store needs the postgres extra ({exc.name} is not "
                f"installed): pip install \"loci-context[postgres]\"") from None
        return PostgresStore(url, vector_memory_mb=vector_memory_mb)
    raise ConfigError(
        f"unknown store URL {url!r}: expected sqlite:///PATH or postgresql://USER@HOST/DB"
    )
