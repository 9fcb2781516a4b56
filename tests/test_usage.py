"""The usage ledger on every backend: provider usage read in its own shape, the session's
log counted for the counterfactual, compactions noticed, reports priced, time ranges,
isolation, erasure and transfer."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from loci import Loci, Usage, ValidationError, load_settings
from loci.models import NewUsage
from loci.pricing import Price, price_of
from loci.settings import ConfigError
from loci.store import open_store
from loci.usage import full_input
from tests.compaction.test_compaction import SMALL_WINDOW, chat
from tests.conftest import FakeClock

OPENAI = {"prompt_tokens": 3000, "completion_tokens": 40,
          "prompt_tokens_details": {"cached_tokens": 2048}}
ANTHROPIC = {"input_tokens": 100, "cache_read_input_tokens": 2500,
             "cache_creation_input_tokens": 400, "output_tokens": 30}


pytestmark = pytest.mark.loci_settings(
    **SMALL_WINDOW, compaction_auto=False,
    prices={"house-model": {"input": 1.0, "output": 2.0}})


def test_each_providers_usage_is_read_as_it_comes(engine: Loci) -> None:
    chat = engine.usage.record("s", OPENAI, model="gpt-4o")
    messages = engine.usage.record("s", ANTHROPIC, model="claude-sonnet-4-5")
    # The providers' SDKs hand out objects, not dicts.
    responses = engine.usage.record("s", SimpleNamespace(
        input_tokens=1200, output_tokens=5, input_tokens_details=SimpleNamespace(
            cached_tokens=1024)), model="gpt-5")
    assert chat.usage == Usage(3000, 2048, 0, 40)
    assert messages.usage == Usage(3000, 2500, 400, 30)
    assert responses.usage == Usage(1200, 1024, 0, 5)
    assert [r.id for r in engine.usage.records("s")] == [chat.id, messages.id, responses.id]


def test_the_counterfactual_is_the_whole_log_as_it_stood(engine: Loci) -> None:
    engine.add("s", "user", "Remember that the deploy key lives in vault path secret/app.")
    engine.add_reply("s", "Noted.")
    context = engine.compile("s", "Where is the deploy key?")
    record = engine.usage.record("s", OPENAI, model="gpt-4o", context=context,
                                 client_text=["You are terse."])
    events = engine.events("s")
    assert (record.log_events, record.log_tokens) == (2, sum(e.tokens for e in events))
    # The client's system text and the new message, which the log does not hold yet.
    assert record.base_tokens > engine.counter.count("Where is the deploy key?")
    assert full_input(record) > record.log_tokens + record.base_tokens
    assert record.context_tokens == context.total_tokens
    assert record.prefix_hash == context.prefix_hash
    assert record.layers["history"] > 0 and sum(record.layers.values()) <= context.total_tokens


def test_summaries_are_not_the_clients_and_compactions_are_counted(
        engine: Loci) -> None:
    engine.add("s", "user", "Remember that the deploy key lives in vault path secret/app.")
    chat(engine, 12, big=600)
    before = engine.usage.record("s", OPENAI, model="gpt-4o")
    engine.compact("s")
    after = engine.usage.record("s", OPENAI, model="gpt-4o")
    assert (before.compactions, after.compactions) == (0, 1)
    # The summary the compaction added is Loci's: the client's log did not grow.
    assert (after.log_events, after.log_tokens) == (before.log_events, before.log_tokens)
    assert engine.usage.report("s").totals.compactions == 1


def test_reports_price_the_calls_and_the_counterfactual(engine: Loci) -> None:
    engine.add("s", "user", "hello " * 3000)
    engine.usage.record("s", OPENAI, model="gpt-4o")
    engine.usage.record("s", ANTHROPIC, model="claude-sonnet-4-5")
    report = engine.usage.report("s")
    totals = report.totals
    assert totals.calls == 2 and totals.usage == Usage(6000, 4548, 400, 70)
    assert totals.hit_rate == pytest.approx(4548 / 6000)
    gpt, claude = price_of("gpt-4o"), price_of("claude-sonnet-4-5")
    assert gpt and claude
    expected = ((952 * 2.5 + 2048 * 1.25 + 40 * 10)
                + (100 * 3 + 2500 * 0.3 + 400 * 3.75 + 30 * 15)) / 1e6
    assert totals.cost == pytest.approx(expected)
    full = [full_input(r) for r in report.calls]
    assert totals.full_input_tokens == sum(full)
    assert totals.full_cost == pytest.approx((full[0] * 2.5 + 40 * 10
                                              + full[1] * 3 + 30 * 15) / 1e6)
    assert report.unpriced == [] and [s.session for s in report.sessions] == ["s"]


def test_a_price_from_settings_wins_and_unpriced_models_are_named(engine: Loci) -> None:
    engine.usage.record("a", OPENAI, model="house-model")
    assert engine.usage.report("a").totals.cost == pytest.approx(
        (952 * 1.0 + 2048 * 1.0 + 40 * 2.0) / 1e6)  # cache prices default to input's
    engine.usage.record("b", OPENAI, model="mystery-7b")
    report = engine.usage.report()
    assert report.unpriced == ["mystery-7b"] and report.totals.cost is None
    assert report.calls == []  # calls are listed for one session
    assert {s.session: s.totals.cost is None for s in report.sessions} == {
        "a": False, "b": True}


def test_time_ranges_agents_and_users_are_kept_apart(engine: Loci, clock: FakeClock) -> None:
    early = engine.usage.record("s", OPENAI, model="gpt-4o")
    clock.advance(hours=2)
    late = engine.usage.record("s", OPENAI, model="gpt-4o")
    since = early.at + timedelta(hours=1)
    assert [r.id for r in engine.usage.records(since=since)] == [late.id]
    assert [r.id for r in engine.usage.records(until=since)] == [early.id]
    other_agent = engine.for_scope(engine.scope.tenant, "coder")
    other_agent.usage.record("s", OPENAI, model="gpt-4o")
    other_user = engine.for_scope("mallory", "default")
    other_user.usage.record("s", OPENAI, model="gpt-4o")
    assert len(engine.usage.records()) == 2
    assert len(engine.usage.records(all_agents=True)) == 3
    assert len(other_user.usage.records(all_agents=True)) == 1


def test_bad_records_are_refused(engine: Loci) -> None:
    with pytest.raises(ValidationError, match="face"):
        engine.usage.record("s", OPENAI, model="gpt-4o", face="fax")
    with pytest.raises(ValidationError, match="latency"):
        engine.usage.record("s", OPENAI, model="gpt-4o", latency_ms=-1)
    with pytest.raises(ValidationError):
        engine.usage.record("s", OPENAI, model="x\x00y")
    assert engine.usage.records() == []


def test_erasing_a_session_or_user_erases_its_usage(engine: Loci) -> None:
    engine.add("s", "user", "hi")
    engine.usage.record("s", OPENAI, model="gpt-4o")
    engine.usage.record("t", OPENAI, model="gpt-4o")
    engine.erase_session("s")
    assert [r.session for r in engine.usage.records()] == ["t"]
    engine.runtime.erase_user(engine.scope.tenant)
    assert engine.usage.records(all_agents=True) == []


def test_usage_moves_with_the_scope(engine: Loci, tmp_path: Path) -> None:
    engine.add("s", "user", "hi")
    first = engine.usage.record("s", ANTHROPIC, model="claude-sonnet-4-5", latency_ms=12.5)
    target = open_store(f"sqlite:///{tmp_path / 'copy.db'}")
    try:
        target.import_scope(engine.store.export_scope(engine.scope))
        assert target.list_usage(engine.scope.tenant) == [first]
        # A call recorded in the copy gets a new id.
        call = NewUsage(session="s", model="m", face="chat", usage=Usage(1, 0, 0, 1),
                        at=first.at)
        assert target.add_usage(engine.scope, call).id > first.id
    finally:
        target.close()


def test_price_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="input and output"):
        load_settings(prices={"m": {"input": 1}})
    with pytest.raises(ConfigError, match="unknown price"):
        load_settings(prices={"m": {"input": 1, "output": 2, "discount": 3}})
    with pytest.raises(ConfigError, match="negative"):
        load_settings(prices={"m": {"input": -1, "output": 2}})
    assert load_settings(prices={"m*": {"input": 1, "output": 2, "cached_input": 0.1}}
                         ).prices["m*"] == Price(1, 2, 0.1, 1)
