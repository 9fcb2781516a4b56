"""Consolidation you can review: proposals, apply, history kept, nothing applied
without asking, stale proposals refused. The memories are sentences of the dev sets
(LongMemEval histories, a Claude Code session) and of the issue's ``loci demo``,
stored without dedup as an older store holds them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from loci import ConflictError, Loci, NotFoundError, Proposal
from loci.memory.consolidate import junk_reason
from loci.models import Memory
from loci.testing.scripted import ScriptedChatModel
from tests.conftest import FakeClock

PAGE_200 = ('I\'ve been reading "A Short History of Nearly Everything" and I\'m currently '
            'on page 200')
PAGE_220 = ('I\'ve been reading "A Short History of Nearly Everything" and I\'m now on '
            'page 220')
QUESTION = "User: Can you suggest some unique events to attend in Amsterdam?"
THANKS = "User: Thank you!"
COMMAND = "User: cd /usr/bin"
HARNESS = ("User: <task-notification>\n<task-id>bc34d29</task-id>\n<output-file>"
           "/tmp/claude/-Users-m/tasks/bc34d29.output</output-file>\n<status>completed"
           "</status>\n</task-notification>")
PASTED = "User: " + "\n".join(
    f"{n}. Trust types in Active Directory: parent-child, tree-root, external, realm, "
    f"forest and shortcut trusts, each with its own direction and transitivity."
    for n in range(1, 9))
MAYA = "The user is Maya, a backend engineer in Lisbon."
MAYA_QUOTED = "User: I'm Maya, a backend engineer in Lisbon."
PREFERS = "User: I prefer exploring off the beaten path."
ENGINEERS = "I lead a team of 4 engineers in my new role as Senior Software Engineer."
SAID = datetime(2023, 5, 20, tzinfo=UTC)


def stored(loci: Loci) -> dict[str, Memory]:
    """Memories as an older store (no dedup at write time) holds them, by text."""
    rows = [(PAGE_200, "project_context", SAID), (PAGE_220, "project_context",
                                                  SAID + timedelta(days=9)),
            (QUESTION, "project_context", SAID), (THANKS, "project_context", SAID),
            (COMMAND, "project_context", SAID), (HARNESS, "project_context", SAID),
            (PASTED, "project_context", SAID), (MAYA, "sticky", SAID),
            (MAYA_QUOTED, "project_context", SAID), (PREFERS, "project_context", SAID),
            (ENGINEERS, "project_context", SAID)]
    out = {}
    for text, kind, said in rows:
        saved = loci._memories.save(text, kind, source="event:1", dedupe=False,
                                    said_at=said)
        out[text] = saved.memory
    return out


def snapshot(loci: Loci) -> list[Memory]:
    return loci.memories(include_expired=True)


def test_rules_propose_each_kind_and_change_nothing(loci: Loci) -> None:
    ids = {text: m.id for text, m in stored(loci).items()}
    before = snapshot(loci)
    proposal = loci.consolidate()
    assert snapshot(loci) == before  # nothing applied without asking
    assert loci.consolidation() == proposal  # kept for review
    by_kind = {(c.kind, c.ids) for c in proposal.changes}
    retired = {c.ids[0]: c.reason for c in proposal.changes if c.kind == "retire"}
    assert retired == {ids[QUESTION]: "a question", ids[THANKS]: "a greeting or filler",
                       ids[COMMAND]: "a command line", ids[HARNESS]: "harness markup",
                       ids[PASTED]: "a pasted document"}
    assert ("merge", (ids[MAYA], ids[MAYA_QUOTED])) in by_kind  # the sticky one kept
    assert ("supersede", (ids[PAGE_200], ids[PAGE_220])) in by_kind
    (retype,) = [c for c in proposal.changes if c.kind == "retype"]
    assert retype.ids == (ids[PREFERS],) and retype.type == "user_preference"
    assert ids[ENGINEERS] not in {i for c in proposal.changes for i in c.ids}
    assert proposal.counts() == {"merge": 1, "supersede": 1, "retire": 5, "retype": 1}
    text = proposal.to_text()
    assert f"- {ids[PAGE_200]}: {PAGE_200}" in text and f"+ {ids[PAGE_220]}: {PAGE_220}" in text


def test_apply_writes_new_versions_and_keeps_history(loci: Loci) -> None:
    ids = {text: m.id for text, m in stored(loci).items()}
    proposal = loci.consolidate()
    done = loci.apply_consolidation(proposal.id)
    assert done.counts() == proposal.counts()
    active = {m.id for m in loci.memories()}
    assert active == {ids[PAGE_220], ids[MAYA], ids[PREFERS], ids[ENGINEERS]}
    assert loci.memory(ids[PREFERS]).type == "user_preference"
    old = loci.memory(ids[PAGE_200])
    assert old.superseded_by == ids[PAGE_220] and old.content == PAGE_200
    for text in (QUESTION, MAYA_QUOTED, PAGE_200, PREFERS):
        (version,) = loci.memory_history(ids[text])
        assert version.content == text and proposal.id in version.reason
    assert "merged into " + ids[MAYA] in loci.memory_history(ids[MAYA_QUOTED])[0].reason
    # Everything retired comes back on request.
    assert not loci.restore(ids[MAYA_QUOTED]).is_expired(loci.clock())
    # The proposal is used up.
    assert loci.consolidation() is None
    with pytest.raises(NotFoundError):
        loci.apply_consolidation(proposal.id)


def test_a_stale_proposal_is_refused_and_applies_nothing(
        loci: Loci, clock: FakeClock) -> None:
    ids = {text: m.id for text, m in stored(loci).items()}
    proposal = loci.consolidate()
    clock.advance(minutes=5)
    loci.memory_write("project_context", [], QUESTION + " (asked for a friend)",
                      id=ids[QUESTION])
    before = snapshot(loci)
    with pytest.raises(ConflictError, match=ids[QUESTION]):
        loci.apply_consolidation(proposal.id)
    assert snapshot(loci) == before
    fresh = loci.consolidate()  # proposed again, it applies
    assert fresh.id != proposal.id
    loci.apply_consolidation(fresh.id)
    assert loci.memory(ids[PAGE_200]).superseded_by == ids[PAGE_220]


def test_an_unknown_proposal_is_not_found(loci: Loci) -> None:
    stored(loci)
    loci.consolidate()
    with pytest.raises(NotFoundError):
        loci.apply_consolidation("prop_000000000000")


def test_a_configured_chat_model_proposes(loci: Loci) -> None:
    ids = {text: m.id for text, m in stored(loci).items()}
    answer = {"changes": [
        {"kind": "retire", "ids": [ids[THANKS]], "reason": "a pleasantry"},
        {"kind": "supersede", "ids": [ids[PAGE_200], ids[PAGE_220]], "reason": "newer page"},
        {"kind": "retype", "ids": [ids[ENGINEERS]], "type": "sticky", "reason": "role"},
        {"kind": "retire", "ids": ["mem_nosuchmemory"], "reason": "unknown id"},
        {"kind": "retire", "ids": [ids[THANKS]], "reason": "named twice"},
        {"kind": "explode", "ids": [ids[COMMAND]], "reason": "no such kind"},
        {"kind": "retype", "ids": [ids[MAYA]], "type": "Not A Type!", "reason": "bad"},
    ]}
    model = ScriptedChatModel([f"Here you are:\n{json.dumps(answer)}"])
    loci.chat = model
    proposal = loci.consolidate()
    assert proposal.proposer == "scripted" and not proposal.notes
    assert [(c.kind, c.ids, c.type) for c in proposal.changes] == [
        ("retire", (ids[THANKS],), None),
        ("supersede", (ids[PAGE_200], ids[PAGE_220]), None),
        ("retype", (ids[ENGINEERS],), "sticky")]
    (request,) = model.requests
    assert f"{ids[PAGE_220]} | project_context | 29 May 2023 | {PAGE_220}" in (
        request[-1]["content"])
    loci.apply_consolidation(proposal.id)
    assert loci.memory(ids[ENGINEERS]).type == "sticky"


def test_a_model_answering_nonsense_leaves_the_rules_proposal(loci: Loci) -> None:
    stored(loci)
    loci.chat = ScriptedChatModel(["I would merge a few of these."])
    proposal = loci.consolidate()
    assert proposal.proposer == "rules" and "unusable" in proposal.notes[0]
    assert proposal.counts()["retire"] == 5


def test_a_round_trip_through_the_pending_state(loci: Loci) -> None:
    stored(loci)
    proposal = loci.consolidate()
    assert Proposal.from_dict(json.loads(json.dumps(proposal.to_dict()))) == proposal
    # The pending proposal never reaches the model's context.
    assert "consolidation:pending" not in loci.compile(None, "hello").to_text()


@pytest.mark.parametrize(("text", "reason"), [
    (QUESTION, "a question"), (THANKS, "a greeting or filler"), (COMMAND, "a command line"),
    (HARNESS, "harness markup"), (PASTED, "a pasted document"),
    ("User: How to implement that", None),  # no question mark: left to a person
    (ENGINEERS, None), (MAYA, None), (PREFERS, None),
    ("User: Which one do you recommend? I'm leaning towards the Tamron.", None),
    # Said to the assistant about the conversation, nothing specific in it; one with a
    # name or a number in it stays.
    ("User: I love the variety of your recommendations!",
     "said to the assistant, with nothing specific"),
    ("User: I want you to function as medical content and graphic designer.",
     "said to the assistant, with nothing specific"),
    ("User: include scope of work, objective and project overview.",
     "said to the assistant, with nothing specific"),
    ("User: You know, I actually have a great leather jacket that I found on ThredUp last "
     "month for $60.", None),
    ("User: I need help finding a new scratching post for my cat, Luna.", None),
])
def test_junk_rules(text: str, reason: str | None) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert junk_reason(Memory("m", "project_context", text, (), now, now, None,
                              "event:1")) == reason


def test_an_agents_long_note_is_not_a_pasted_document() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    note = Memory("m", "sticky", PASTED.removeprefix("User: "), (), now, now)
    assert junk_reason(note) is None
