"""Without the postgres extra a PostgreSQL store says which extra to install."""

from __future__ import annotations

import sys

import pytest

from loci import ConfigError, open_store


def test_a_postgres_url_without_the_driver_names_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("loci.store.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r'pip install "loci-context\[postgres\]"'):
        open_store("postgresql://loci@localhost/loci")
