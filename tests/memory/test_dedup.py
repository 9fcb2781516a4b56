"""Superseding: a newer statement about the same thing replaces the older one."""

from __future__ import annotations

from loci import Loci
from loci.memory.dedup import restates


def test_a_new_value_of_the_same_thing_supersedes_the_old(loci: Loci) -> None:
    lisbon = loci.remember("The user lives in Lisbon", type="sticky")
    porto = loci.remember("The user lives in Porto now", type="sticky")
    # A fact of its own; the old one is kept, ended by it (``test_time``).
    assert loci.memory(lisbon.id).superseded_by == porto.id
    assert [v.content for v in loci.memory_history(lisbon.id)] == ["The user lives in Lisbon"]
    pg16 = loci.remember("The project uses PostgreSQL 16")
    pg17 = loci.remember("The project uses PostgreSQL 17")
    assert pg17.id != pg16.id and loci.memory(pg16.id).superseded_by == pg17.id
    # Facts that can hold together, or are about someone else, stay apart.
    tea = loci.remember("Maya likes green tea", type="user_preference")
    assert loci.remember("Maya likes black coffee", type="user_preference").id != tea.id
    assert loci.remember("Rui lives in Porto now", type="sticky").id != porto.id
    prompt = loci.compile(None, "where do I live?").to_text()
    assert "Lisbon" not in prompt and "PostgreSQL 16" not in prompt


def test_restates_needs_the_same_subject_and_a_single_valued_change() -> None:
    assert restates("User: I live in Porto now.", "User: I live in Lisbon.")
    assert restates("The API runs on port 8081", "The API runs on port 8080")
    assert not restates("I like coffee", "I like tea")
    assert not restates("Maya's flight is on Dec 3", "Rui's flight is on Dec 3")
    assert not restates("The user works at Globex as a designer", "The user works at Acme")


def test_another_number_in_the_same_words_is_a_new_value_however_worded() -> None:
    """Two turns of a LongMemEval dev history (knowledge-update), months apart."""
    before = ("The user has been experimenting with their French press and they've found "
              "that 1 tablespoon of coffee for every 6 ounces of water is the perfect ratio "
              "for them.")
    after = ("The user is planning to brew a fresh pot of coffee in the morning, and "
             "they're feeling excited to use their new beans - they've got their French "
             "press ratio down to a science: 1 tablespoon of coffee for every 5 ounces of "
             "water.")
    assert restates(after, before)
    # Too few words around the number to say what it counts: two runs are two facts.
    assert not restates("The user ran 5 miles in the park on Monday.",
                        "The user ran 3 miles in the park on Sunday.")
    assert not restates(after.replace("The user", "Maya"), before)  # someone else
