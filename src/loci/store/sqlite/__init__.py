"""The SQLite backend, the embedded default: one module per concern, with the same
names as the PostgreSQL backend's (``store``, ``base``, ``events``, ``memories``,
``documents``, ``records``, ``keywords``, ``vectors``, ``rows``, ``schema``,
``transfer``)."""

from loci.store.sqlite.store import SQLiteStore, sqlite_path

__all__ = ["SQLiteStore", "sqlite_path"]
