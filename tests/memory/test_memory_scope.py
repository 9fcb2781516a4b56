"""``[memory] scope``: memories per agent (the default) or per user, shared by all of a
user's agents; on SQLite and PostgreSQL. Switching it loses nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loci import ConfigError, Loci, NotFoundError, Scope, ValidationError, load_settings
from loci.models import SHARED_AGENT
from tests.conftest import FakeClock

USER = pytest.mark.loci_settings(memory_scope="user")


def reopen(store_url: str, clock: FakeClock, **settings: object) -> Loci:
    """Another ``Loci`` over the same store, with settings of its own."""
    return Loci(load_settings(store=store_url, **settings), clock=clock)


@pytest.fixture
def by_agent(store_url: str, home: Path, clock: FakeClock) -> Iterator[Loci]:
    """A ``Loci`` of maya's agent "planner" with memories per agent (the default)."""
    with reopen(store_url, clock, user="maya", agent="planner") as loci:
        yield loci


@USER
def test_a_users_agents_share_facts_that_other_users_never_see(engine: Loci,
                                                              home: Path) -> None:
    planner = engine.for_scope("maya", "planner")
    coder = engine.for_scope("maya", "coder")
    fact = planner.remember("Maya's staging database is called heron-7.", "fact")
    assert [m.id for m in coder.memories()] == [fact.id]
    engine.wait_indexed()
    assert [h.id for h in coder.memory_search("What is the staging database called?")
            ] == [fact.id]
    assert coder.memory(fact.id).content == fact.content
    # Written by either agent, one fact: the same words refresh it.
    again = coder.remember("Maya's staging database is called heron-7.", "fact")
    assert again.id == fact.id and len(planner.memories()) == 1
    # The markdown mirror keeps the user's shared memories in memory/<user>/.
    assert (home / "memory" / "maya" / f"{fact.id}.md").is_file()
    # Another user, of an agent of the same name, sees none of it.
    other = engine.for_scope("ravi", "planner")
    assert other.memories() == [] and other.search("heron-7 staging database") == []
    with pytest.raises(NotFoundError):
        other.memory(fact.id)
    # No agent can be named as the one the shared memories are kept under.
    with pytest.raises(ValidationError, match="reserved"):
        engine.for_scope("maya", SHARED_AGENT)


@USER
def test_the_default_keeps_each_agents_facts_its_own(engine: Loci, store_url: str,
                                                    clock: FakeClock) -> None:
    fact = engine.for_scope("maya", "planner").remember("Maya deploys on Fridays.", "fact")
    with reopen(store_url, clock, user="maya", agent="coder") as coder:
        assert coder.settings.memory_scope == "agent"
        assert coder.memories() == [] and coder.search("deploys Fridays") == []
        with pytest.raises(NotFoundError):
            coder.memory(fact.id)
        mine = coder.remember("Maya reviews code in the morning.", "fact")
    # Nor does an agent with shared memories see what another kept as its own (the
    # coder still does: ``test_switching_to_user_scope_loses_no_memory_of_an_agent``).
    assert {m.id for m in engine.for_scope("maya", "planner").memories()} == {fact.id}
    assert mine.id in {m.id for m in engine.for_scope("maya", "coder").memories()}


@USER
def test_agent_b_is_shown_a_sticky_fact_agent_a_saved(engine: Loci) -> None:
    engine.for_scope("maya", "planner").remember("Maya's name is pronounced MY-uh.",
                                                 "sticky")
    engine.for_scope("maya", "planner").remember("Maya's team uses the heron-7 cluster.",
                                                 "fact")
    engine.wait_indexed()
    coder = engine.for_scope("maya", "coder")
    coder.add("s1", "user", "Hello there.")
    compiled = coder.compile("s1", "Which cluster does my team use?")
    assert "[STICKY] Maya's name is pronounced MY-uh." in compiled.dynamic
    assert "heron-7 cluster" in compiled.dynamic + compiled.retrieved
    # State stays the agent's own.
    engine.for_scope("maya", "planner").state_set("mood", "focused")
    assert coder.state() == []


@USER
def test_erasing_a_session_takes_only_its_agents_shared_facts(engine: Loci) -> None:
    planner = engine.for_scope("maya", "planner")
    coder = engine.for_scope("maya", "coder")
    planner.add("s1", "user", "Remember my editor.")
    _, mine = planner.add_reply("s1", "Noted. [MEMORY:preference] Maya uses Helix. [/MEMORY]")
    coder.add("s1", "user", "Remember my shell.")
    _, theirs = coder.add_reply("s1", "Noted. [MEMORY:preference] Maya uses fish. [/MEMORY]")
    engine.wait_extracted()
    coders = {m.id for m in coder.memories() if m.metadata.get("agent") == "coder"}
    assert theirs.saved[0].memory.id in coders
    erased = planner.erase_session("s1")
    assert mine.saved[0].memory.id in erased.memories
    assert not coders & set(erased.memories) and coders <= {m.id for m in coder.memories()}
    # Forgetting with the source redacted takes the tag out of the right agent's reply.
    assert planner.forget(theirs.saved[0].memory.id, redact_source=True) == 1
    assert "fish" not in coder.events("s1")[-1].metadata.get("raw", "")


def test_switching_to_user_scope_loses_no_memory_of_an_agent(
        by_agent: Loci, store_url: str, clock: FakeClock) -> None:
    old = by_agent.remember("Maya's laptop is a ThinkPad X1.", "fact")
    sticky = by_agent.remember("Maya prefers short answers.", "sticky")
    with reopen(store_url, clock, user="maya", agent="planner",
                memory_scope="user") as planner:
        new = planner.remember("Maya's phone is a Pixel 8.", "fact")
        planner.wait_indexed()
        # The agent's own memories stay where they were and are still found and shown.
        assert {m.id for m in planner.memories()} == {old.id, sticky.id, new.id}
        assert old.id in {h.id for h in planner.memory_search("Which laptop does Maya use?")}
        planner.add("s1", "user", "Hi.")
        assert "[STICKY] Maya prefers short answers." in planner.compile("s1", "Hi").dynamic
        assert [v.content for v in planner.memory_history(old.id)] == []
        changed = planner.memory_write("fact", [], "Maya's laptop is a ThinkPad X1 Carbon.",
                                       id=old.id)
        assert changed.id == old.id and planner.memory(old.id).content.endswith("Carbon.")
        # Another agent of hers sees the shared fact, not the planner's own.
        coder = planner.for_scope(agent="coder")
        assert [m.id for m in coder.memories()] == [new.id]
    # Back to memories per agent: the agent's own are there, the shared ones are kept.
    assert {m.id for m in by_agent.memories()} == {old.id, sticky.id}
    assert by_agent.store.get_memory(Scope("maya", SHARED_AGENT), new.id) is not None


def test_the_setting_reads_from_toml_and_environment(tmp_path: Path) -> None:
    assert load_settings(env={}, cwd=tmp_path).memory_scope == "agent"
    (tmp_path / "loci.toml").write_text('[memory]\nscope = "user"\n')
    assert load_settings(env={}, cwd=tmp_path).memory_scope == "user"
    assert load_settings(env={"LOCI_MEMORY_SCOPE": "agent"},
                         cwd=tmp_path).memory_scope == "agent"
    with pytest.raises(ConfigError, match="scope"):
        load_settings(env={"LOCI_MEMORY_SCOPE": "team"}, cwd=tmp_path)


def test_purging_expired_facts_takes_the_agents_own_older_ones_too(
        by_agent: Loci, store_url: str, clock: FakeClock) -> None:
    old = by_agent.remember("Maya's sprint ends on Friday.", "project_context")
    with reopen(store_url, clock, user="maya", agent="planner",
                memory_scope="user") as planner:
        planner.remember("Maya's release train leaves on Monday.", "project_context")
        kept = planner.remember("Maya's name is Maya.", "sticky")
        clock.advance(days=31)
        assert planner.purge_expired() == 2
        assert {m.id for m in planner.memories(include_expired=True)} == {kept.id}
    assert old.id not in {m.id for m in by_agent.memories(include_expired=True)}
