"""The offline extractive summarizer on a conversation with planted facts and filler."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from loci.compaction.service import CompactionService, chat_model_from
from loci.errors import ConfigError
from loci.llm import make_chat_model
from loci.models import Event, Scope
from loci.settings import load_settings
from loci.store import open_store
from loci.text import ExtractiveSummarizer
from loci.text.extractive import PROSE_FLOOR, PROSE_SHARE
from loci.text.salience import is_filler, split_sentences
from loci.tokens import heuristic_count

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Log:
    """Builds a list of events the way a session log holds them."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, type: str, role: str, content: str, **extra: Any) -> None:
        self.events.append(Event(len(self.events) + 1, "s1", type, role, content, T0,
                                 heuristic_count(content), **extra))

    def user(self, text: str) -> None:
        self.add("message", "user", text)

    def assistant(self, text: str) -> None:
        self.add("message", "assistant", text)

    def tool(self, name: str, args: dict[str, Any], output: str) -> None:
        self.add("tool_call", "assistant", "", tool_name=name, args=args)
        self.add("tool_result", "tool", output, tool_name=name)


# (fact, the section it belongs in)
FACTS = {
    "The deploy key is stored in vault path secret/tidepool/deploy.": "Critical context",
    "Maya's flight is on 2026-12-03.": "Critical context",
    "We decided to use PostgreSQL 16 for the event store.": "Decisions",
    "I prefer pnpm over npm for the frontend.": "Preferences",
    "Never push directly to main on Fridays.": "Constraints",
    "I fixed the flaky test in tests/test_api.py by raising the timeout to 30s.":
        "Completed work",
    "I'm currently working on the OAuth refactor in src/auth/oauth.py.": "In-progress tasks",
    "Next, we need to migrate the billing service to queue v2.": "Next steps",
    "Action item: Priya will send the SOC2 report by Friday.": "Action items",
    "Turns out the root cause was a stale DNS cache on runner ci-07.": "Insights",
}
FILLER = [
    "Hi there! How are you doing today?",
    "Thanks so much, that's awesome!",
    "I had a lovely weekend, we went hiking by the lake.",
    "The weather has been really nice lately.",
    "Haha, my cat just walked across the keyboard.",
    "I just made another cup of coffee.",
]
ASSISTANT_FILLER = [
    "Hello! Happy to help. What would you like to work on?",
    "That sounds wonderful, hiking is a great way to relax.",
    "I hope that helps! Let me know if you have any other questions.",
]


def conversation() -> list[Event]:
    log = Log()
    speakers = {
        "I fixed the flaky": log.assistant, "I'm currently": log.assistant,
        "Turns out": log.assistant, "We decided": log.assistant,
    }
    for i, fact in enumerate(FACTS):
        log.user(FILLER[i % len(FILLER)])
        log.assistant(ASSISTANT_FILLER[i % len(ASSISTANT_FILLER)])
        say = next((f for k, f in speakers.items() if fact.startswith(k)), log.user)
        say(("Oh by the way, " if i % 3 == 0 else "") + fact)
        if i == 3:
            listing = "\n".join(f"-rw-r--r-- 1 dev staff {100 + j} Mar  1 09:{j % 60:02d} "
                                f"mod_{j}.py" for j in range(300))
            log.tool("bash", {"command": "ls -l"}, listing)
        if i == 6:
            output = "collected 120 items\n" + "\n".join(
                f"tests/test_api.py::test_{j} PASSED" for j in range(117)
            ) + ("\nFAILED tests/test_api.py::test_login - AssertionError: expected 200, got 503"
                 "\n=== 3 failed, 117 passed in 4.20s ===")
            log.tool("pytest", {"path": "tests/test_api.py"}, output)
    log.user("Great, thanks! Talk soon.")
    return log.events


def sections(summary: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in summary.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        elif line.startswith("- "):
            out[current].append(line[2:])
    return out


@pytest.fixture(scope="module")
def summarizer() -> ExtractiveSummarizer:
    return ExtractiveSummarizer()


def test_facts_survive_verbatim_in_their_sections(summarizer: ExtractiveSummarizer) -> None:
    summary = summarizer.summarize(conversation())
    found = sections(summary)
    for fact, section in FACTS.items():
        assert any(fact in line for line in found.get(section, [])), (fact, section, summary)
    assert not summary.startswith("[CONTEXT SUMMARY]")
    # First-person statements keep their speaker; discourse markers are dropped.
    assert "- User: I prefer pnpm over npm for the frontend." in summary
    assert "Oh by the way" not in summary


def test_filler_and_bulk_tool_output_are_left_out(summarizer: ExtractiveSummarizer) -> None:
    summary = summarizer.summarize(conversation())
    for text in [*FILLER, *ASSISTANT_FILLER, "Talk soon"]:
        assert text not in summary
    for word in ("weekend", "coffee", "cat", "weather", "hiking", "Hello"):
        assert word not in summary
    assert "mod_17.py" not in summary and "PASSED" not in summary
    # ...but the trail keeps each call with its outcome, the error and the file.
    found = sections(summary)
    assert found["Errors"] == ["FAILED tests/test_api.py::test_login - AssertionError: "
                               "expected 200, got 503"]
    assert found["Commands"][0] == "`ls -l`"
    assert "`pytest(path=tests/test_api.py)` → FAILED" in found["Commands"][1]
    assert "3 failed, 117 passed" in found["Commands"][1]
    assert found["Files"] == ["Read: tests/test_api.py"]


def test_budget_is_respected_and_the_best_facts_win(summarizer: ExtractiveSummarizer) -> None:
    events = conversation()
    total = sum(summarizer.count(e.content) for e in events)
    for budget in (40, 90, 200, 800):
        summary = summarizer.summarize(events, max_tokens=budget)
        assert summarizer.count(summary) <= budget
    tight = summarizer.summarize(events, max_tokens=110)
    kept = [line for lines in sections(tight).values() for line in lines]
    assert len(kept) >= 3
    assert all(any(fact in line for fact in FACTS) for line in kept), tight
    assert summarizer.summarize(events, max_tokens=0) == ""
    assert summarizer.count(summarizer.summarize(events)) < 0.1 * total


def test_a_custom_counter_is_used() -> None:
    summarizer = ExtractiveSummarizer(counter=heuristic_count)
    summary = summarizer.summarize(conversation(), max_tokens=120)
    assert 0 < heuristic_count(summary) <= 120


def test_a_previous_summary_is_folded_in(summarizer: ExtractiveSummarizer) -> None:
    first = summarizer.summarize(conversation())
    log = Log()
    log.user("Hello again! Hope you had a nice evening.")
    log.user("The release is scheduled for 2027-01-15 and the tag will be v3.2.0.")
    log.assistant("Sounds great!")
    second = summarizer.summarize(log.events, previous_summary=first)
    for fact, section in FACTS.items():
        assert any(fact in line for line in sections(second)[section]), fact
    assert "The release is scheduled for 2027-01-15 and the tag will be v3.2.0." in second
    assert "Hello again" not in second
    # Facts are not duplicated, and the trail carries over.
    assert second.count("secret/tidepool/deploy") == 1
    assert sections(second)["Commands"] == sections(first)["Commands"]
    assert sections(second)["Files"] == ["Read: tests/test_api.py"]
    # A summary event inside the span is folded the same way.
    log.add("summary", "system", "[CONTEXT SUMMARY]\n" + first)
    assert "secret/tidepool/deploy" in summarizer.summarize(log.events)


def test_older_facts_outlive_new_filler(summarizer: ExtractiveSummarizer) -> None:
    previous = summarizer.summarize(conversation(), max_tokens=250)
    log = Log()
    for i in range(200):
        log.user(f"{FILLER[i % len(FILLER)]} Anyway, I went for a walk around the block.")
        log.assistant(ASSISTANT_FILLER[i % len(ASSISTANT_FILLER)])
    again = summarizer.summarize(log.events, previous_summary=previous, max_tokens=250)
    assert sections(again) == sections(previous)


def test_output_is_deterministic() -> None:
    events = conversation()
    outputs = {ExtractiveSummarizer().summarize(events, max_tokens=b) for b in (300, 300, 300)}
    assert len(outputs) == 1


def test_injected_context_is_not_summarized(summarizer: ExtractiveSummarizer) -> None:
    log = Log()
    log.add("message", "system", "The secret token is abc-123-injected.",
            metadata={"injected": True})
    log.user("[STICKY] The admin password is hunter2-sticky.\nMy locker code is 4417.")
    summary = summarizer.summarize(log.events)
    assert "injected" not in summary and "hunter2" not in summary
    assert "My locker code is 4417." in summary


def test_many_needles_survive_a_long_noisy_session() -> None:
    rng = random.Random(7)
    needles = [
        "The staging database password is hunter2-staging.",
        "Alex is allergic to peanuts.",
        "Invoice INV-20931 was paid on March 4.",
        "Our AWS account id is 123456789012.",
        "The API rate limit is 600 requests per minute.",
        "Priya will review pull request #482 tomorrow.",
        "Use the blue-green strategy for the payments rollout.",
        "The quarterly budget for infrastructure is $45,000.",
        "The config file lives at ~/.config/tidepool/settings.toml.",
        "Jordan's new phone number is +1-415-555-0199.",
        *FACTS,
    ]
    log = Log()
    slots = set(rng.sample(range(300), len(needles)))
    pending = list(needles)
    for turn in range(300):
        if turn in slots:
            log.user(pending.pop(0))
        log.user(rng.choice(FILLER))
        log.assistant(rng.choice(ASSISTANT_FILLER))
        if turn % 25 == 0:
            log.tool("bash", {"command": "cat app.log"}, "\n".join(
                f"2026-03-01T09:{j % 60:02d}:00 INFO worker-{j % 4} batch {j} ok in {j}ms"
                for j in range(200)))
    summarizer = ExtractiveSummarizer()
    summary: str | None = None
    span = len(log.events) // 4
    for start in range(0, len(log.events), span):  # four compactions, folding each time
        summary = summarizer.summarize(log.events[start:start + span], previous_summary=summary)
    assert summary is not None
    kept = [n for n in needles if n.split(" ", 1)[1] in summary]
    assert len(kept) >= 0.9 * len(needles), set(needles) - set(kept)
    total = sum(summarizer.count(e.content) for e in log.events)
    assert summarizer.count(summary) <= 800 < 0.3 * total


def test_it_is_compactions_summarizer_and_no_chat_model(home: Path) -> None:
    """The offline provider names no chat model: compaction summarizes with the
    extractive summarizer itself, from the events."""
    with pytest.raises(ConfigError, match="names no chat model"):
        make_chat_model("extractive")
    settings = load_settings(llm_provider=" Extractive ")
    assert chat_model_from(settings) is None
    service = CompactionService(open_store(f"sqlite:///{home / 'x.db'}"), Scope("u", "a"),
                                settings, lambda: T0, lambda events: 0, None)
    assert isinstance(service.summarizer, ExtractiveSummarizer)
    service.store.close()
    log = Log()
    log.user("Hi! How's it going?")
    log.assistant("Great, thanks! What can I do for you?")
    log.user("We decided to ship v2.3.1 on 2026-02-10.")
    log.add("tool_result", "tool", "=== 3 failed, 10 passed in 1.2s ===", tool_name="pytest")
    log.assistant("I will fix test_login next.")
    log.tool("read_file", {"path": "src/app.py"}, "import os")
    summary = service.summarizer.summarize(
        log.events, previous_summary="## Critical context\n- Maya's flight is on 2026-12-03.",
        max_tokens=200)
    found = sections(summary)
    assert found["Decisions"] == ["[1 March 2026] User: We decided to ship v2.3.1 on 2026-02-10."]
    assert found["Critical context"] == ["Maya's flight is on 2026-12-03."]
    # The file read is listed once, under Files, not again as a command.
    assert found["Commands"] == ["`pytest` → === 3 failed, 10 passed in 1.2s ==="]
    assert found["Files"] == ["Read: src/app.py"]
    assert "How's it going" not in summary


def test_sentence_splitting_and_filler() -> None:
    text = "- Dr. Smith moved the file to src/app.py. It works, e.g. on v1.2 now!\n\n2) Next?"
    assert split_sentences(text) == [
        "Dr. Smith moved the file to src/app.py.", "It works, e.g. on v1.2 now!", "Next?",
    ]
    assert is_filler("Thanks so much, have a great weekend!")
    assert is_filler("ok :)")
    assert not is_filler("Thanks, the code is 4417.")


def test_a_prose_summary_written_by_an_llm_is_folded(summarizer: ExtractiveSummarizer) -> None:
    previous = ("## Summary\nThe team runs Kubernetes 1.29 on GKE. Ava's birthday is 2026-05-07. "
                "We talked about a few things.")
    summary = summarizer.summarize([], previous_summary=previous)
    assert "The team runs Kubernetes 1.29 on GKE." in summary
    assert "Ava's birthday is 2026-05-07." in summary
    assert "Summary" not in summary and "few things" not in summary


def test_huge_lines_are_cheap(summarizer: ExtractiveSummarizer) -> None:
    log = Log()
    log.user("x" * 200_000 + " The vault path is secret/big/line.")
    log.tool("node", {"path": "min.js"}, ("a=1;" * 50_000 + "\n") * 3 + "Error: boom at line 7")
    summary = summarizer.summarize(log.events)
    assert "Error: boom at line 7" in summary
    assert summarizer.count(summary) <= 800


def test_sentences_take_a_share_of_a_large_budget_and_the_trail_is_not_capped() -> None:
    log = Log()
    for n in range(400):  # many distinct facts: without the cap they would fill 6,000
        log.user(f"Order {n} for client {n * 7} ships from warehouse W{n % 13} on day {n}.")
    summarizer = ExtractiveSummarizer()
    summary = summarizer.summarize(log.events, max_tokens=6_000)
    assert PROSE_FLOOR < summarizer.count(summary) <= 6_000 * PROSE_SHARE + 60
    small = summarizer.summarize(log.events, max_tokens=400)  # the floor: all of it
    assert summarizer.count(small) > 300
    agent = Log()
    for n in range(300):
        agent.tool("bash", {"command": f"pytest tests/test_{n}.py"},
                   f"FAILED tests/test_{n}.py::test_case_{n} - AssertionError: {n} != {n + 1}")
    trail = summarizer.summarize(agent.events, max_tokens=6_000)
    assert summarizer.count(trail) > 6_000 * PROSE_SHARE
