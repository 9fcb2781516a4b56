from __future__ import annotations

from datetime import timedelta

import pytest

from loci import Loci, NotFoundError
from loci.memory.dedup import DUPLICATE_OVERLAP, word_overlap
from tests.conftest import FakeClock

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True

# 10 distinct words; variants share k of them, so the overlap is k / (20 - k).
BASE = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"


def variant(shared: int) -> str:
    words = BASE.split()[:shared] + [f"new{i}" for i in range(10 - shared)]
    return " ".join(words)


def test_overlap_is_jaccard_of_word_sets() -> None:
    assert word_overlap("User likes Python", "user LIKES python!") == 1.0
    assert word_overlap(BASE, variant(9)) == pytest.approx(9 / 11)
    assert word_overlap(BASE, variant(8)) == pytest.approx(8 / 12)
    assert word_overlap("", "") == 0.0


def test_the_70_percent_boundary(loci: Loci) -> None:
    original = loci.remember(BASE, type="project_context")
    # 8/12 = 0.667 <= 0.7: a different fact, stored beside the original.
    below = loci.remember(variant(8), type="project_context")
    assert below.id != original.id and word_overlap(BASE, variant(8)) <= DUPLICATE_OVERLAP
    # 9/11 = 0.818 > 0.7: the same fact with changed words supersedes the original.
    above = loci.remember(variant(9) + " ", type="project_context")
    assert word_overlap(BASE, variant(9)) > DUPLICATE_OVERLAP
    assert above.id in (original.id, below.id)
    assert len(loci.memories()) == 2


def test_exact_duplicate_refreshes_timestamps_and_ttl(loci: Loci, clock: FakeClock) -> None:
    first = loci.remember("User prefers dark mode", type="user_preference", tags=["ui"])
    clock.advance(days=60)
    again = loci.remember("user prefers DARK mode!", type="user_preference", tags=["theme"])
    assert again.id == first.id
    assert again.updated_at == clock.now and again.created_at == first.created_at
    assert again.expires_at == clock.now + timedelta(days=90)
    assert again.tags == ("ui", "theme")
    assert again.content == "user prefers DARK mode!"
    assert len(loci.memories()) == 1
    clock.advance(days=60)  # 120 days after the first save, 60 after the refresh
    assert [m.id for m in loci.memories()] == [first.id]


def test_supersede_keeps_history(loci: Loci, clock: FakeClock) -> None:
    first = loci.remember("The launch date is December 1st 2026", type="project_context")
    clock.advance(hours=1)
    # A new value (another number) is a fact of its own that ends the old one.
    second = loci.remember("The launch date is December 8th 2026", type="project_context")
    assert second.id != first.id and second.content.endswith("8th 2026")
    ended = loci.memory(first.id)
    assert ended.superseded_by == second.id and ended.expires_at == second.created_at
    assert [(v.version, v.content, v.reason) for v in loci.memory_history(first.id)] == [
        (1, "The launch date is December 1st 2026", f"superseded by {second.id}")]
    # Reworded, the same value: the memory is updated in place, the old words kept.
    clock.advance(hours=1)
    reworded = loci.remember("The launch date is set to December 8th 2026",
                             type="project_context")
    assert reworded.id == second.id
    assert [(v.content, v.reason) for v in loci.memory_history(second.id)] == [
        ("The launch date is December 8th 2026", "superseded by a near-duplicate")]
    updated = loci.memory_write("sticky", ["launch"], "Launch moved to January", id=second.id)
    assert updated.type == "sticky" and updated.expires_at is None
    assert [v.content for v in loci.memory_history(second.id)] == [
        "The launch date is December 8th 2026", "The launch date is set to December 8th 2026"]
    assert loci.memory_search("january launch")[0].id == second.id


def test_types_are_not_merged(loci: Loci) -> None:
    a = loci.remember("User's name is John", type="sticky")
    b = loci.remember("User's name is John", type="project_context")
    assert a.id != b.id


def test_near_duplicates_by_embedding(home: object, clock: FakeClock) -> None:
    with Loci.open(store="sqlite:///:memory:", embedding_provider="local", clock=clock) as lo:
        first = lo.remember("The user's favourite colour is deep blue", type="user_preference")
        again = lo.remember("The user's favorite color is deep blue", type="user_preference")
        other = lo.remember("The user owns a red bicycle", type="user_preference")
        assert again.id == first.id and other.id != first.id
        assert lo.memory_history(first.id)[0].content == "The user's favourite colour is deep blue"


def test_forget_and_purge_are_the_only_hard_deletes(loci: Loci, clock: FakeClock) -> None:
    keep = loci.remember("Sticky fact about the user", type="sticky")
    old = loci.remember("A short-lived project note", type="project_context")
    loci.remember("A short-lived project note, revised", type="project_context")
    clock.advance(days=31)
    assert [m.id for m in loci.memories(expired_only=True)] == [old.id]
    assert loci.purge_expired() == 1
    with pytest.raises(NotFoundError):
        loci.memory_history(old.id)
    assert [m.id for m in loci.memories(include_expired=True)] == [keep.id]
    loci.forget(keep.id)
    assert loci.memories(include_expired=True) == []


def test_reply_tags_are_saved_and_stripped(loci: Loci) -> None:
    event, result = loci.add_reply(
        "s", "Nice to meet you, John! [MEMORY:sticky] User's name is John [/MEMORY]\n"
             "[STATE:last_topic] introductions [/STATE]\n"
             "[MEMORY:brand_new_type] Works night shifts [/MEMORY]")
    assert event.content == "Nice to meet you, John!"
    assert event.metadata["raw"].startswith("Nice to meet you, John! [MEMORY:sticky]")
    assert [(r.action, r.memory.type) for r in result.saved] == [
        ("created", "sticky"), ("created", "brand_new_type")]
    assert result.saved[1].memory.expires_at is not None  # unknown types: default TTL
    assert loci.state_get("last_topic").value == "introductions"
    _, again = loci.add_reply("s", "[MEMORY:sticky] user's name is John [/MEMORY]")
    assert again.saved[0].action == "refreshed" and len(loci.memories()) == 2


def test_facts_about_different_things_are_not_merged(loci: Loci) -> None:
    a = loci.remember("Ticket OPS-2823 is blocked on the vendor API", type="project_context")
    b = loci.remember("Ticket OPS-8039 is blocked on the vendor API", type="project_context")
    c = loci.remember("Ticket OPS-8039 is blocked on the vendor API again", type="project_context")
    assert a.id != b.id and c.id == b.id
    assert len(loci.memories()) == 2
