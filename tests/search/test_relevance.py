"""What makes a memory answer a question: coverage of its words and topics, and the
calibrated floor of recall and memory search."""

from __future__ import annotations

from datetime import UTC, datetime

from loci.models import SearchHit
from loci.search.relevance import by_coverage, calibrated_floor, coverage

NOW = datetime(2026, 1, 15, tzinfo=UTC)


def hit(text: str, score: float, tags: list[str]) -> SearchHit:
    return SearchHit("memory", text, score, text, NOW, metadata={"tags": tags})


def test_a_fact_that_answers_outranks_one_that_shares_a_name() -> None:
    # The scores: the user's name 0.45, the dog's name 0.31.
    name = hit("The user's name is Maya.", 0.45, ["identity", "name"])
    dog = hit("The user's dog is called Biscuit.", 0.31, ["identity", "pet", "name"])
    assert coverage("pet name", dog.text, ["pet", "name"]) == 1.0
    assert coverage("pet name", name.text, ["name"]) == 0.5
    assert [h.text for h in by_coverage("pet name", [name, dog])] == [dog.text, name.text]
    # Plural or not, "pets" is the "pet" topic.
    assert coverage("tell me about my pets", "The user's cat is called Miso.", ["pet"]) > 0


def test_the_floor_keeps_the_share_of_answer_holding_hits_asked_for() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05]
    assert calibrated_floor(scores, keep=0.9) == 0.1
    assert calibrated_floor(scores, keep=0.5) == 0.5
    assert sum(s >= calibrated_floor(scores, keep=0.8) for s in scores) == 8
    assert calibrated_floor([]) == 0.0
