"""The offline summarizer on a chat between two named people over several days: facts
keep who said them and when, small talk and evaluative cue words do not make facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loci.models import Event
from loci.text import ExtractiveSummarizer
from loci.text.salience import CONSTRAINTS, FACTS, classify, score_sentence
from loci.tokens import heuristic_count

DAY1 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=17)

CHAT = [
    (DAY1, "Ana", "Hey Jo, good to see you again!"),
    (DAY1, "Jo", "Hi Ana! How have you been?"),
    (DAY1, "Ana", "I went to a pottery workshop in Porto yesterday and made a blue vase."),
    (DAY1, "Jo", "That must have been awesome. Taking time for yourself is so important."),
    (DAY1, "Ana", "Agreed, Jo! I'll never forget it."),
    (DAY2, "Jo", "Last week I adopted a beagle called Biscuit from the shelter."),
    (DAY2, "Ana", "Wow Jo, that's amazing! You're so brave."),
    (DAY2, "Jo", "Next month I'm running the Lisbon half marathon with my sister Rita."),
    (DAY2, "Ana", "Thanks so much, Jo!"),
]


def events() -> list[Event]:
    out = []
    for n, (when, name, text) in enumerate(CHAT, start=1):
        role = "user" if name == "Ana" else "assistant"
        out.append(Event(n, "s1", "message", role, text, when, heuristic_count(text),
                         metadata={"name": name}))
    return out


def items(summary: str) -> list[str]:
    return [line[2:] for line in summary.splitlines() if line.startswith("- ")]


def test_facts_keep_their_speaker_and_day_and_small_talk_is_left_out() -> None:
    summary = ExtractiveSummarizer().summarize(events(), max_tokens=400)
    kept = items(summary)
    assert "[8 May 2023] Ana: I went to a pottery workshop in Porto yesterday and made a blue " \
           "vase." in kept
    assert "[25 May 2023] Jo: Last week I adopted a beagle called Biscuit from the shelter." \
        in kept
    # A plan is a next step, dated as well; a day is written only where it changes.
    assert "## Next steps\n- [25 May 2023] Jo: Next month I'm running the Lisbon half " \
           "marathon with my sister Rita." in summary
    assert summary.count("[25 May 2023]") == 2 and summary.count("[8 May 2023]") == 1
    for noise in ("must have been awesome", "so important", "Agreed", "never forget",
                  "so brave", "Thanks so much", "good to see you"):
        assert noise not in summary, noise
    assert "## Constraints" not in summary


def test_a_later_summary_keeps_the_earlier_facts_with_their_days() -> None:
    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize(events()[:5], max_tokens=300)
    later = Event(10, "s1", "message", "user", "My brother Tiago moved to Berlin in March.",
                  DAY2 + timedelta(days=30), 12, metadata={"name": "Ana"})
    merged = summarizer.summarize([later], previous_summary=first, max_tokens=300)
    kept = items(merged)
    assert "[8 May 2023] Ana: I went to a pottery workshop in Porto yesterday and made a blue " \
           "vase." in kept
    assert "[24 June 2023] Ana: My brother Tiago moved to Berlin in March." in kept


def test_cue_words_that_guess_or_praise_are_not_rules() -> None:
    assert classify("That must have been awesome.")[0] != CONSTRAINTS
    assert classify("I'll never forget the day we met.")[0] != CONSTRAINTS
    assert classify("Never push directly to main on Fridays.")[0] == CONSTRAINTS
    assert classify("The service must use TLS 1.3.")[0] == CONSTRAINTS
    assert classify("My sister Rita has two cats.")[0] == FACTS
    # A name someone is addressed by is not a fact; the same name as a subject is.
    addressed = score_sentence("Thanks so much, Rita!", role="user", names=set())
    assert addressed.section is None
    named = score_sentence("Rita moved to Porto last week.", role="user", names=set())
    assert named.score > 1.0
