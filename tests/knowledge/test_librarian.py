"""The librarian on a fixture conversation: which facts land in which documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from loci import Loci, ProviderError
from loci.knowledge.extraction import LIBRARIAN_PROMPT
from loci.knowledge.librarian import profile_line
from loci.memory.decide import DECISION_PROMPT
from loci.testing import ScriptedChatModel
from tests.conftest import FakeClock

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True

CONVERSATION = [
    ("user", "Hi! I'm Maya, a backend engineer at Acme. I live in Lisbon."),
    ("assistant", "Nice to meet you, Maya. What are you working on?"),
    ("user", "We're building Loci. My cofounder Sarah Chen handles sales and hates long "
             "meetings."),
    ("user", "I prefer concise answers with code first. Please never use emojis."),
    ("assistant", "Noted. We decided to use PostgreSQL with pgvector for the team backend."),
    ("user", "I'll write the migration script by Friday."),
    ("user", "It turns out SQLite FTS5 handles 100k documents in under 10 ms."),
    ("user", "My main goal is to ship Loci v1 in March."),
    ("user", "What's the weather like today?"),
    ("user", "Thanks, that's all!"),
]


def converse(loci: Loci, session: str = "work") -> None:
    for role, text in CONVERSATION:
        loci.add(session, role, text)
    loci.add(session, "system", "[STICKY] The user's name is Maya")
    loci.add(session, "user", "I love injected text", injected=True)


def section(markdown: str, heading: str) -> list[str]:
    lines = markdown.split(f"## {heading}\n", 1)[1].split("\n\n", 1)[0]
    return [line for line in lines.splitlines() if line.startswith("- ")]


def test_findings_land_in_the_right_documents(loci: Loci) -> None:
    loci.knowledge.put("/profile/preferences.md", "# Preferences\n\n- Metric units, always.\n"
                       "- The user prefers concise answers with code first.\n")
    converse(loci)
    filed = loci.end_session("work")
    assert filed.method == "rules" and 0 < filed.importance <= 1
    assert filed.path is not None and filed.path.startswith("/conversations/2026-01-")
    record = loci.knowledge.get(filed.path)
    assert "conversation" in record.tags and record.metadata["session"] == "work"
    text = record.content
    assert text.startswith(f"# {filed.title}\n") and "- Session: work" in text
    assert section(text, "Decisions") == [
        "- Assistant: We decided to use PostgreSQL with pgvector for the team backend."]
    assert section(text, "Action items") == ["- [ ] User: I'll write the migration script "
                                             "by Friday."]
    assert section(text, "Insights") == [
        "- It turns out SQLite FTS5 handles 100k documents in under 10 ms."]
    assert "weather" not in text and "Thanks" not in text and "injected" not in text
    assert "[STICKY]" not in text

    identity = loci.knowledge.get("/profile/identity.md").content
    assert identity.splitlines() == ["# Identity", "", "- The user is Maya, a backend "
                                     "engineer at Acme.", "- The user lives in Lisbon."]
    preferences = loci.knowledge.get("/profile/preferences.md")
    assert preferences.content.splitlines()[2:] == [
        "- Metric units, always.",  # never dropped
        "- The user prefers concise answers with code first.",  # never repeated
        "- Please never use emojis."]
    assert preferences.version == 2 and len(loci.knowledge.history(preferences.path)) == 1
    person = loci.knowledge.get("/profile/people/sarah-chen.md").content
    assert person.splitlines() == ["# Sarah Chen", "", "- Relationship: cofounder",
                                   "- The user's cofounder Sarah Chen handles sales and "
                                   "hates long meetings."]
    goals = loci.knowledge.get("/profile/goals.md").content
    assert "- The user's main goal is to ship Loci v1 in March." in goals
    for path in ("/profile/identity.md", "/profile/goals.md", "/profile/people/sarah-chen.md"):
        assert "PostgreSQL" not in loci.knowledge.get(path).content
    assert set(filed.profile) == {"/profile/identity.md", "/profile/preferences.md",
                                  "/profile/people/sarah-chen.md", "/profile/goals.md"}
    assert filed.profile["/profile/preferences.md"] == ["Please never use emojis."]

    memories = [m.content for m in loci.memories()]
    assert any("PostgreSQL" in m for m in memories) and filed.memories
    dynamic = loci.compile(None, "hello").dynamic
    assert "- The user lives in Lisbon." in dynamic and "- Sarah Chen: Relationship" in dynamic


def test_ending_again_is_idempotent_and_new_turns_make_a_version(
    loci: Loci, clock: FakeClock
) -> None:
    converse(loci)
    first = loci.end_session("work")
    again = loci.end_session("work")
    assert again.path == first.path and again.profile == {}
    # The turns' facts were saved as they came: ending again adds none.
    assert {m.memory.id for m in again.memories} == {m.memory.id for m in first.memories}
    assert first.path is not None and loci.knowledge.get(first.path).version == 1
    clock.advance(hours=1)
    loci.add("work", "user", "We agreed to launch the beta on 2026-02-01.")
    later = loci.end_session("work")
    assert later.path == first.path
    record = loci.knowledge.get(first.path)
    assert record.version == 2 and "launch the beta on 2026-02-01" in record.content
    clock.advance(days=1)
    loci.add("other", "user", "We decided to rename the project to Atlas.")
    assert loci.end_session("other").path not in (None, first.path)


def test_a_user_s_own_document_naming_the_session_is_never_written_over(loci: Loci) -> None:
    """Notes the user filed under /conversations/ with ``session: work`` in their front
    matter are theirs: the librarian files its record beside them."""
    loci.knowledge.put("/conversations/my-notes.md", "My own notes.",
                       metadata={"session": "work"})
    converse(loci)
    filed = loci.end_session("work")
    assert filed.path is not None and filed.path != "/conversations/my-notes.md"
    mine = loci.knowledge.get("/conversations/my-notes.md")
    assert (mine.content, mine.version) == ("My own notes.", 1)


def test_a_full_profile_document_does_not_stop_the_rest(loci: Loci) -> None:
    """A profile document with no room left for a line keeps what it holds; the rest of
    the session is filed (the record, other profile documents), and ending again works."""
    full = "# Preferences\n\n- " + "a" * (2_000_000 - 40) + "\n"  # 20 characters left
    loci.knowledge.put("/profile/preferences.md", full)
    converse(loci)
    filed = loci.end_session("work")
    assert filed.path is not None and "/profile/identity.md" in filed.profile
    assert "/profile/preferences.md" not in filed.profile
    assert loci.end_session("work").path == filed.path
    assert loci.knowledge.get("/profile/preferences.md").content == full


def test_small_talk_files_nothing(loci: Loci) -> None:
    loci.add("chat", "user", "Hi there!")
    loci.add("chat", "assistant", "Hello! How can I help?")
    filed = loci.end_session("chat")
    assert filed.path is None and filed.findings == () and filed.profile == {}
    assert loci.knowledge.ls() == []


LLM_REPLY = """TITLE | Database planning
decision | 0.9 | The team will use PostgreSQL with pgvector.
action item | 0.6 | Maya writes the migration script by Friday.
preference | 0.8 | The user prefers concise answers.
person:Sarah Chen | 0.7 | Sarah Chen is the user's cofounder and handles sales.
identity | 0.2 | The user once had tea.
this line is not an item
"""


def _responder(fail: bool) -> Any:
    def respond(messages: Sequence[Mapping[str, Any]]) -> str:
        if messages[0]["content"] == LIBRARIAN_PROMPT:
            if fail:
                raise ProviderError("upstream is down")
            assert "Maya" in messages[1]["content"] and "injected" not in messages[1]["content"]
            return LLM_REPLY
        if messages[0]["content"] == DECISION_PROMPT:  # one call per user turn
            if "We're building Loci" in messages[1]["content"]:
                return ('{"memory": [{"event": "ADD", "text": "The user is building Loci",'
                        ' "type": "project_context"}]}')
            return '{"memory": [{"event": "NONE"}]}'
        raise AssertionError(f"unexpected prompt {messages[0]['content'][:60]!r}")
    return respond


def test_a_configured_chat_model_extracts_and_scores(loci: Loci) -> None:
    loci.chat = ScriptedChatModel(responder=_responder(fail=False))
    converse(loci)
    filed = loci.end_session("work")
    assert filed.method == "scripted" and filed.title == "Database planning"
    assert filed.path == "/conversations/2026-01-database-planning.md"
    assert filed.importance == pytest.approx((0.9 + 0.8 + 0.7) / 3, abs=0.01)
    text = loci.knowledge.get(filed.path).content
    assert "- The team will use PostgreSQL with pgvector." in text
    assert "- [ ] Maya writes the migration script by Friday." in text
    assert loci.knowledge.get("/profile/preferences.md").content.endswith(
        "- The user prefers concise answers.\n")
    assert "handles sales" in loci.knowledge.get("/profile/people/sarah-chen.md").content
    assert loci.knowledge.find("/profile/identity.md") is None  # importance 0.2: too low
    assert [m.memory.content for m in filed.memories] == ["The user is building Loci"]


def test_a_failing_chat_model_falls_back_to_rules(loci: Loci) -> None:
    loci.chat = ScriptedChatModel(responder=_responder(fail=True))
    converse(loci)
    filed = loci.end_session("work")
    assert filed.method == "rules"
    assert "Please never use emojis" in loci.knowledge.get("/profile/preferences.md").content


def test_the_profile_keeps_what_the_memories_would(loci: Loci) -> None:
    """Turns of LongMemEval_S histories whose sentences once reached the profile as
    requests, reactions to the assistant, a broken rewrite ("recentlies"), a car and a
    possessive taken for a person, a hobby taken for a job; the profile (shown in every
    context) now takes the user's statements by the memory's rule and only a rewrite the
    rules are sure of. A plan for this weekend is a memory (it expires), not a goal for
    good."""
    for text in [
        "Give me a list of 10 whacky nicknames for my friend Amanda Van West in the theme "
        "of 1920s gangster names.",
        "I'm trying to plan a hike with some friends this weekend and we were wondering if "
        "you could recommend some trails near my city.",
        "I like the outdoor games idea, maybe we can do a giant Jenga game or something "
        "similar.",
        "I recently attended a workshop on the topic and I'm trying to learn more about it.",
        "I've got a few vehicles to keep track of - my 2018 Toyota Corolla, my wife's 2015 "
        "Honda Civic, and my old 2007 Yamaha FZ6 motorcycle.",
        "I'm planning a surprise party for my brother Michael's basketball team to "
        "celebrate the end of the semester.",
        "I've been listening to a few while I work on my sculptures, but I'm running out "
        "of new episodes.",
    ]:
        loci.add("trip", "user", text)
    loci.end_session("trip")
    lines = [line for document in loci.knowledge.ls("/profile/")
             for line in document.content.splitlines() if line.startswith("- ")]
    hike = "The user is trying to plan a hike with some friends this weekend."
    assert hike in [m.content for m in loci.memories()] and f"- {hike}" not in lines
    assert ("- The user recently attended a workshop on the topic and they're trying to "
            "learn more about it.") in lines
    assert not [line for line in lines if "nicknames" in line or "Jenga" in line
                or "you" in line or "recentlies" in line]
    # A possessive is no part of a name, and working on sculptures is no job.
    assert [d.path for d in loci.knowledge.ls("/profile/people/")] == [
        "/profile/people/michael.md"]
    assert loci.knowledge.find("/profile/identity.md") is None


@pytest.mark.parametrize(("said", "filed"), [
    ("I prefer tea over coffee.", "The user prefers tea over coffee."),
    ("I really like my bike.", "The user really likes their bike."),
    ("I don't like meetings before 10.", "The user doesn't like meetings before 10."),
    ("I'm a nurse in Porto.", "The user is a nurse in Porto."),
    ("I've got two cats.", "The user has got two cats."),
    ("My name is Maya.", "The user's name is Maya."),
    ("Call me Mo.", "The user goes by Mo."),
    ("I watch films that make me think.", "The user watches films that make them think."),
    ("I can read Japanese.", "The user can read Japanese."),
    ("I worked at Acme.", "The user worked at Acme."),
    ("I study at night.", "The user studies at night."),
    ("Please keep answers short.", "Please keep answers short."),
])
def test_third_person(said: str, filed: str) -> None:
    assert profile_line(said) == filed
