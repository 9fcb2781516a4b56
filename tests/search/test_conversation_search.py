"""Conversation search through the facade: speakers, captions, context and dates."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Loci, load_settings
from tests.conftest import FakeClock, open_loci


def turn(name: str, text: str, **metadata: object) -> dict[str, object]:
    return {"type": "message", "role": "user", "content": text,
            "metadata": {"name": name, **metadata}}


def top(loci: Loci, query: str, **kw: object) -> str:
    return loci.search_conversation(query, **kw)[0].text  # type: ignore[arg-type]


def test_speaker_names_and_captions_are_searchable(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        loci.add_events("s", [
            turn("Melanie", "Look at what I made last week!",
                 caption="a photo of a painting of a sunset over a lake"),
            turn("Caroline", "I went to a support group yesterday."),
            turn("Melanie", "That sounds powerful."),
        ])
        assert top(loci, "painting sunset lake") == "Look at what I made last week!"
        hits = loci.search_conversation("Caroline", limit=3)
        assert hits[0].text == "I went to a support group yesterday."


def test_an_answer_is_found_through_the_question_before_it(
    home: Path, clock: FakeClock
) -> None:
    with open_loci(home, clock) as loci:
        loci.add_events("noise", [turn("Ana", f"Unrelated remark number {i} about lunch.")
                                  for i in range(8)])
        loci.add_events("s", [
            turn("Jon", "Got any favourite dance styles?"),
            turn("Gina", "Contemporary, for sure. So expressive."),
        ])
        loci.add_events("s", [turn("Jon", "Nice. I am off to the bank now.")])
        texts = [h.text for h in loci.search_conversation("favourite dance styles", limit=3)]
        assert texts[:2] == ["Got any favourite dance styles?",
                             "Contemporary, for sure. So expressive."]
        # Context is the preceding turns: the turn after the answer comes later.
        assert texts[2] == "Nice. I am off to the bank now."


def test_context_never_crosses_sessions(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        loci.add_events("a", [turn("Jon", "What is the capital of Portugal?")])
        loci.add_events("b", [turn("Gina", "I have no idea.")])
        assert [h.session for h in loci.search_conversation("capital Portugal")] == ["a"]


def test_dates_in_the_query_favour_events_of_that_period(
    home: Path, clock: FakeClock
) -> None:
    with open_loci(home, clock) as loci:
        may = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
        june = datetime(2023, 6, 20, 9, 0, tzinfo=UTC)
        loci.add_events("s1", [{**turn("Ana", "We went hiking by the river."),
                                "timestamp": may}])
        loci.add_events("s2", [{**turn("Ana", "We went hiking by the river again!"),
                                "timestamp": june}])
        assert top(loci, "Where did Ana go hiking on 20 June, 2023?") == (
            "We went hiking by the river again!")
        assert top(loci, "Where did Ana go hiking on 8 May, 2023?") == (
            "We went hiking by the river.")
        hit = loci.search_conversation("hiking in May 2023", limit=1)[0]
        assert hit.timestamp == may and 0 < hit.score <= 1


def test_when_questions_favour_turns_that_say_when(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        loci.add_events("s", [turn("Nate", "I love winning video game tournaments.")])
        loci.add_events("t", [turn("Nate", "I won a video game tournament last Friday.")])
        assert top(loci, "When did Nate win a video game tournament?") == (
            "I won a video game tournament last Friday.")
        assert top(loci, "Does Nate love winning video game tournaments?") == (
            "I love winning video game tournaments.")


def test_a_named_person_favours_the_conversations_they_speak_in(
    home: Path, clock: FakeClock
) -> None:
    # Keywords alone, every run (vectors written in the background would come in at any
    # moment): what a name does as a word to match is the keyword index's doing.
    with open_loci(home, clock, embedding_provider="none") as loci:
        for day in range(6):
            loci.add_events(f"other{day}", [
                turn("Cy", f"Day {day}: how is the garden going?"),
                turn("Di", f"Good, I planted beans in the garden on day {day}."),
                turn("Cy", "Nice, enjoy the weekend.")])
        loci.add_events("ana", [turn("Ana", "Hi Ben!"),
                                turn("Ben", "Hi! Did you do anything this weekend?"),
                                turn("Ana", "Yes, I planted tomatoes in the garden.")])
        named = loci.search_conversation("What did Ana plant in the garden?", limit=3)
        assert named[0].text == "Yes, I planted tomatoes in the garden."
        # As a word to match, a name that only its speaker's turns carry is rare, and
        # ranks their shortest turn first ("ana" as written is no one's name).
        word = loci.search_conversation("What did ana plant in the garden?", limit=3)
        assert word[0].text == "Hi Ben!"
        # A query of names only searches for them.
        assert {h.session for h in loci.search_conversation("Ana", limit=3)} == {"ana"}


def test_a_question_naming_a_person_keeps_its_date(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        for day, text in ((8, "We went hiking by the river."), (20, "We went hiking again.")):
            loci.add_events(f"s{day}", [{**turn("Ana", text),
                                         "timestamp": datetime(2023, 5, day, tzinfo=UTC)},
                                        turn("Ben", "Sounds lovely.")])
        assert top(loci, "Where did Ana go hiking on 2023-05-20?") == "We went hiking again."
        assert top(loci, "Where did Ana go hiking on 2023-05-08?") == (
            "We went hiking by the river.")


def test_a_namesake_who_says_a_word_elsewhere_is_not_whom_the_question_means(
    home: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loci import retriever

    monkeypatch.setattr(retriever, "MAX_FOCUS_SESSIONS", 2)  # (as 50 among many more)
    with open_loci(home, clock, embedding_provider="none") as loci:  # (keywords, every run)
        for day in range(5):  # others' conversations, where some Ana says one line
            loci.add_events(f"others{day}", [
                turn("Cy", "What did you plant this spring?"),
                turn("Ana", "I planted roses in the garden."),
                turn("Di", f"Lovely, I planted beans on day {day}."), turn("Cy", "See you.")])
        for session in ("with_ana1", "with_ana2"):  # those of the Ana who speaks most
            loci.add_events(session, [
                turn("Ana", "Tomatoes went into my garden last week."),
                turn("Ben", "Nice!"), turn("Ana", "They grow fast."),
                turn("Ana", "I water them every day.")])
        found = loci.search_conversation("What did Ana plant in the garden?", limit=2)
        assert {hit.session for hit in found} == {"with_ana1", "with_ana2"}


def test_a_name_too_common_to_be_among_the_keyword_hits_is_still_recognized(
    home: Path, clock: FakeClock
) -> None:
    """Ana speaks in most turns, so "ana" is a word with no weight, and the question's
    other words pick the keyword candidates (others' turns): the name is looked up
    among the speakers, and her conversations are searched. (Keywords alone: what
    decides is whether she is recognized.)"""
    settings = load_settings(store=f"sqlite:///{home / 'c.db'}", embedding_provider="none")
    with Loci(settings, clock=clock) as loci:
        for day in range(40):
            loci.add_events(f"ana{day}", [turn("Ana", f"Morning! Day {day} here."),
                                          turn("Ana", "Ok."), turn("Ana", "Bye.")])
        for day in range(30):
            loci.add_events(f"others{day}", [
                turn("Cy", "What did you plant in the garden?"),
                turn("Di", f"I planted beans in the garden on day {day}.")])
        loci.add_events("ana_garden", [turn("Ana", "I planted tomatoes."),
                                       turn("Ben", "Nice!")])
        found = loci.search_conversation("What did Ana plant in the garden?", limit=3)
        assert found[0].text == "I planted tomatoes."


def test_a_query_of_many_capitalized_words_looks_up_few_of_them(
    home: Path, clock: FakeClock
) -> None:
    from loci import retriever

    with open_loci(home, clock) as loci:
        loci.add_events("s", [turn("Ana", "Hello there."), turn("Ben", "Hi.")])
        looked_up: list[list[str]] = []
        speakers = loci.store.speakers_among

        def counted(scope: object, names: list[str]) -> set[str]:
            looked_up.append(list(names))
            return speakers(scope, names)  # type: ignore[arg-type]

        loci.store.speakers_among = counted  # type: ignore[method-assign]
        query = " ".join(f"Word{i}" for i in range(10_000)) + " Ana"
        loci.search_conversation(query, limit=3)
        assert looked_up and all(len(names) <= retriever.MAX_NAME_LOOKUPS
                                 for names in looked_up)
