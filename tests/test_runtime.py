"""The runtime is built once per process: every scope shares its store, embedder and
chat client, a scope costs none of them, and closing the runtime closes them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from loci import ConfigError, Loci, Runtime, Scope, load_settings
from loci.server.hub import Hub, Principal
from tests.conftest import FakeClock

#: Nothing listens here: building a client must not connect.
NOWHERE = "http://127.0.0.1:9/v1"


def networked_settings(home: Path) -> object:
    return load_settings(
        store=f"sqlite:///{home / 'loci.db'}", llm_provider="openai",
        llm_model="gpt-4.1-mini", llm_base_url=NOWHERE, llm_api_key="sk-test",
        embedding_provider="openai", embedding_model="text-embedding-3-small",
        embedding_base_url=NOWHERE,
    )


def clients(runtime: Runtime) -> list[httpx.Client]:
    """The HTTP clients of the runtime's chat model and embedder."""
    chat = runtime.chat._http._client  # type: ignore[union-attr]
    embedder = runtime.indexer.embedder._client  # type: ignore[union-attr]
    return [chat, embedder]


def test_a_thousand_scopes_share_one_embedder_and_one_chat_client(home: Path) -> None:
    hub = Hub(networked_settings(home))  # type: ignore[arg-type]
    engines = [hub.engine(Principal(Scope(f"user{n}", "agent"))) for n in range(1_000)]
    assert len({id(e.chat) for e in engines}) == 1
    assert len({id(e.indexer) for e in engines}) == 1
    assert len({id(e.store) for e in engines}) == 1
    assert engines[0].chat is hub.runtime.chat is not None
    assert {e.scope.tenant for e in engines} == {f"user{n}" for n in range(1_000)}
    assert not any(client.is_closed for client in clients(hub.runtime))
    hub.close()
    assert all(client.is_closed for client in clients(hub.runtime))
    hub.close()  # twice is harmless


def test_scopes_of_a_runtime_see_their_own_data_and_outlive_nothing(
        home: Path, clock: FakeClock) -> None:
    with Runtime.open(store=f"sqlite:///{home / 'loci.db'}", clock=clock) as runtime:
        alice, bob = runtime.scope("alice"), runtime.scope("bob", agent="coder")
        alice.remember("Alice lives in Porto.", type="sticky")
        assert [m.content for m in alice.memories()] == ["Alice lives in Porto."]
        assert bob.memories() == [] and bob.scope == Scope("bob", "coder")
        bob.close()  # a view does not close the shared runtime
        assert runtime.scope("alice").memories()[0].created_at == clock.now
    assert runtime.closed


def test_loci_open_owns_its_runtime(home: Path) -> None:
    loci = Loci.open(store=f"sqlite:///{home / 'loci.db'}")
    other = loci.for_scope(user="bob")
    assert other.runtime is loci.runtime and other.scope.tenant == "bob"
    other.close()
    assert not loci.runtime.closed
    loci.close()
    assert loci.runtime.closed


def test_a_bad_threshold_fails_at_open_and_names_it(home: Path) -> None:
    (home / "loci.toml").write_text("[compaction]\nthreshold = 1.5\n")
    with pytest.raises(ConfigError) as error:
        Runtime.open(store=f"sqlite:///{home / 'loci.db'}")
    assert "loci.toml" in str(error.value) and "[compaction] threshold" in str(
        error.value) and "fraction" in str(error.value) and "1.5" in str(error.value)
    (home / "loci.toml").write_text("[compaction]\nthreshold = 0.9\nemergency = 0.8\n")
    with pytest.raises(ConfigError, match=r"\[compaction\] thresholds must rise"):
        Runtime.open(store=f"sqlite:///{home / 'loci.db'}")
    assert not (home / "loci.db").exists()  # nothing opened


def test_a_bad_provider_fails_before_the_store_is_opened(home: Path) -> None:
    with pytest.raises(ConfigError):
        Runtime.open(store=f"sqlite:///{home / 'x.db'}", llm_provider="nonesuch")
    with pytest.raises(ConfigError):
        Runtime.open(store=f"sqlite:///{home / 'x.db'}", embedding_provider="nonesuch")
    assert not (home / "x.db").exists()
