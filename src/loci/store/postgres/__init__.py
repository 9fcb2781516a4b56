"""The PostgreSQL backend, for teams and scale: one module per concern, with the same
names as the SQLite backend's."""

from loci.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
