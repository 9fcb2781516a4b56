"""Writes that never wait on the model: the background indexer (``loci.index_worker``).

The embedder here is the hash embedder behind a gate that holds the indexer's thread
(and only it: a search's query is embedded at once) until the test opens it, so what a
write or a search does while vectors are pending is observed, not timed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Loci, Memory, load_settings
from loci.embeddings.base import Vectors
from loci.embeddings.hashing import HashEmbedder
from loci.indexing import Indexer
from loci.store import open_store


class GatedEmbedder:
    """The hash embedder; the indexer's thread waits at the gate."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.gate = threading.Event()
        self.name, self.dim = self.inner.name, self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if threading.current_thread().name == "loci-indexer":
            self.gate.wait(30)
        return self.inner.embed(texts)


@pytest.fixture
def gated(home: Path) -> Iterator[tuple[Loci, GatedEmbedder]]:
    settings = load_settings(store=f"sqlite:///{home / 'w.db'}", memory_mirror=False)
    store = open_store(settings.store_url,
                       vector_memory_mb=settings.search.vector_memory_mb)
    embedder = GatedEmbedder()
    with Loci(settings, store=store, indexer=Indexer(store, embedder)) as loci:
        yield loci, embedder
        embedder.gate.set()
    store.close()


def test_a_write_returns_before_its_vector_and_keyword_search_finds_it_at_once(
        gated: tuple[Loci, GatedEmbedder]) -> None:
    loci, embedder = gated
    loci.add("s1", "user", "The staging database moved to the eu-west region.")
    assert loci.store.count_unembedded("event") == 1  # committed, its vector pending
    assert loci.wait_indexed(timeout=0.05) is False
    hits = loci.search_conversation("staging database", session="s1")
    assert [h.text for h in hits] == ["The staging database moved to the eu-west region."]
    embedder.gate.set()
    assert loci.wait_indexed(timeout=10) is True
    assert loci.store.count_unembedded("event") == 0


def test_close_finishes_what_the_process_wrote(gated: tuple[Loci, GatedEmbedder]) -> None:
    loci, embedder = gated
    loci.add_events("s1", [{"type": "message", "role": "user", "content": f"note {i}"}
                           for i in range(300)])
    closing = threading.Thread(target=loci.indexer.close)  # type: ignore[union-attr]
    closing.start()
    time.sleep(0.05)
    assert closing.is_alive()  # waiting for the vectors
    embedder.gate.set()
    closing.join(10)
    assert not closing.is_alive() and loci.store.count_unembedded("event") == 0


def test_rows_left_without_vectors_are_embedded_by_the_next_process(home: Path) -> None:
    db = home / "crash.db"
    settings = load_settings(store=f"sqlite:///{db}", memory_mirror=False)
    with Loci(settings) as loci:
        loci.remember("the store records its model")
        now = datetime(2026, 1, 1, tzinfo=UTC)
        # Committed without vectors: a process that died before its indexer ran.
        for i in range(50):
            loci.store.put_memory(loci.scope, Memory(f"m{i}", "fact", f"left {i}", (), now,
                                                     now, None))
    with Loci(settings) as loci:
        assert loci.store.count_unembedded("memory") == 50
        loci.add("s1", "user", "hello")  # the first write's pass takes them too
        assert loci.wait_indexed(timeout=10)
        assert loci.store.count_unembedded("memory") == 0


def test_a_fresh_process_waits_for_rows_another_process_left(home: Path) -> None:
    db = home / "left.db"
    # Another process writes with embeddings off: every row waits for a vector.
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from loci import Loci, load_settings
        with Loci(load_settings(store="sqlite:///{db}", memory_mirror=False,
                                embedding_provider="none")) as loci:
            loci.add_events("s1", [{{"role": "user", "content": f"turn {{i}}"}}
                                   for i in range(300)])
            loci.remember("a fact left without its vector")
        """)], check=True, env={**os.environ}, timeout=120)
    settings = load_settings(store=f"sqlite:///{db}", memory_mirror=False)
    with Loci(settings) as loci:  # no write, no search: nothing has asked for a pass
        assert loci.store.count_unembedded("event") == 300
        assert loci.wait_indexed(timeout=60)
        assert loci.store.count_unembedded("event") == 0
        assert loci.store.count_unembedded("memory") == 0


def test_a_writer_killed_mid_stream_loses_nothing_it_acknowledged(home: Path) -> None:
    db = home / "killed.db"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from loci import Loci, load_settings
        loci = Loci(load_settings(store="sqlite:///{db}", memory_mirror=False))
        for i in range(100_000):
            loci.add("s1", "user", f"turn {{i}} about the release plan")
            print(i, flush=True)
        """)], stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert child.stdout is not None
    acknowledged = -1
    for line in child.stdout:
        acknowledged = int(line)
        if acknowledged >= 300:
            break
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    child.stdout.close()
    settings = load_settings(store=f"sqlite:///{db}", memory_mirror=False)
    with Loci(settings) as loci:
        events = loci.events("s1")
        assert len(events) >= acknowledged + 1
        assert [e.content for e in events[:3]] == [f"turn {i} about the release plan"
                                                   for i in range(3)]
        loci.add("s1", "user", "after the crash")
        assert loci.wait_indexed(timeout=30)
        assert loci.store.count_unembedded("event") == 0


def test_the_lag_is_visible_in_status_health_and_the_overview(
        gated: tuple[Loci, GatedEmbedder]) -> None:
    from fastapi.testclient import TestClient

    from loci.server import create_app

    loci, embedder = gated
    loci.add("s1", "user", "one")
    status = loci.runtime.index_status()
    assert status is not None and status.unembedded["event"] == 1 and status.indexing
    app = create_app(loci.settings, store=loci.store)
    app.state.hub.runtime.indexer = loci.indexer  # the gated one, for this test
    with TestClient(app, base_url="http://127.0.0.1") as client:
        health = client.get("/api/health").json()
        assert health["vectors_pending"] == 1 and health["indexing"] is True
        assert client.get("/api/overview").json()["vectors_pending"] == 1
        embedder.gate.set()
        assert loci.wait_indexed(timeout=10)
        health = client.get("/api/health").json()
        assert health["vectors_pending"] == 0 and health["vector_memory_limit_mb"] == 2048
        # The vectors held for search: none until a search loads the scope's.
        held = health["vector_memory_mb"]
        loci.search_conversation("one")
        assert client.get("/api/health").json()["vector_memory_mb"] > held
