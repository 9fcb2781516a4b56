"""Well-typed but bad values through the library: a typed ``LociError`` naming the
problem, never a raw Python exception (each case here raised one before)."""

from __future__ import annotations

import pytest

from loci import ConfigError, Focus, Loci, ValidationError, load_settings


def test_bad_values_are_validation_errors(loci: Loci) -> None:
    loci.add("s", "user", "hello")
    calls = [
        lambda: loci.search("x", kinds=["memories"]),
        lambda: loci.search("x", limit=0),
        lambda: loci.runtime.create_key("u", "label\ud800"),
        lambda: loci.runtime.create_key("u", "\x1b[31mred"),  # printed by `keys list`
        lambda: loci.runtime.create_key("u", "x" * 100_000),
        lambda: loci.runtime.revoke_key("k\ud800"),
        lambda: loci.maybe_compact("s\ud800"),
        lambda: loci.runtime.apply_retention(float("nan")),
        lambda: loci.runtime.apply_retention(1e9),
        lambda: loci.set_focus("s", Focus("g\ud800")),
        lambda: loci.compile("s", "hi", model="m\ud800"),
        lambda: loci.remember("the user lives in Lisbon", source="s\ud800"),
        lambda: loci.import_log("openai", ""),  # the working folder, not a log file
        lambda: loci.import_log("openai", "x" * 300),  # a name too long to look up
        lambda: loci.add_event("s", type="message", role="user", content="t",
                               timestamp="2024-01-01"),
        lambda: loci.add_events("s", [{"role": "user", "content": "t", "timestamp": None}]),
    ]
    for number, call in enumerate(calls):
        with pytest.raises(ValidationError):
            call()
        assert [e.content for e in loci.events("s")] == ["hello"], number
    assert loci.compile("s", "hi").messages


@pytest.mark.parametrize("days", ["nan", "-1", "1e9"])
def test_retention_settings_past_a_date_are_refused(days: str) -> None:
    with pytest.raises(ConfigError, match="retention"):
        load_settings(env={"LOCI_RETENTION_DAYS": days})


def test_waits_edits_and_usage_past_sense_are_handled(loci: Loci) -> None:
    loci.add("s", "user", "hello")
    assert loci.wait_indexed(1e20) and loci.wait_extracted(float("inf"))
    for timeout in (-1.0, float("nan")):
        with pytest.raises(ValidationError):
            loci.wait_indexed(timeout)
    for edits in (["clear\ud800"], ["a\nb"]):
        with pytest.raises(ValidationError):
            loci.compile("s", "hi", provider_edits=edits)
    record = loci.usage.record("s", {"prompt_tokens": 5, "completion_tokens": 1,
                                     "prompt_tokens_details": {"cached_tokens": 1_000_000}},
                               model="m")
    assert record.input_tokens == 5 and record.cached_tokens == 5
