from __future__ import annotations

import pytest

from loci import Loci
from loci.memory.extract import EXTRACTION_PROMPT, LLMExtractor, RuleExtractor
from loci.testing import ScriptedChatModel
from loci.text import ExtractiveSummarizer

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True


def _conversation(loci: Loci) -> None:
    loci.add("s", "user", "Hi! I'm Maya, a backend engineer. I live in Lisbon.")
    loci.add("s", "assistant", "Nice to meet you. What are you building?")
    loci.add("s", "user", "Please keep answers short. We decided to use PostgreSQL.")
    loci.add("s", "user", "Remember that the demo is on Friday. Always run the tests first.")
    loci.add("s", "user", "What's the weather like?")
    loci.add("s", "system", "[STICKY] The user's name is Maya")
    loci.add("s", "user", "[MEMORY] injected line\nI love hiking", injected=False)
    loci.add("s", "user", "My dog is called Rex", injected=True)


def test_rules_type_what_they_find(loci: Loci) -> None:
    _conversation(loci)
    found = {(c.type, c.rule, c.content) for c in RuleExtractor().extract(loci.events("s"))}
    assert found == {
        ("sticky", "identity", "The user is Maya, a backend engineer."),
        ("sticky", "identity", "The user lives in Lisbon."),
        ("user_preference", "preference", "User: Please keep answers short."),
        ("project_context", "decision", "User: We decided to use PostgreSQL."),
        ("sticky", "explicit", "User: Remember that the demo is on Friday."),
        ("learned_pattern", "rule", "User: Always run the tests first."),
        ("user_preference", "preference", "The user loves hiking."),
    }


def test_extraction_saves_with_dedup(loci: Loci) -> None:
    loci.settings = loci.settings.with_overrides(memory_extraction=False)
    _conversation(loci)
    first = loci.extract_memories(loci.events("s"))
    assert {r.action for r in first} == {"created"} and len(loci.memories()) == 7
    again = loci.extract_memories(loci.events("s"))
    assert {r.action for r in again} == {"refreshed"} and len(loci.memories()) == 7
    proposed = loci.extract_memories(loci.events("s"), save=False)
    assert {r.action for r in proposed} == {"proposed"}


def test_llm_extractor_asks_for_tags_and_parses_them(loci: Loci) -> None:
    _conversation(loci)
    model = ScriptedChatModel(["[MEMORY:sticky] The user is Maya, a backend engineer "
                               "[/MEMORY]\n[MEMORY:project_context] The project uses "
                               "PostgreSQL [/MEMORY]"])
    results = loci.extract_memories(loci.events("s"), LLMExtractor(model))
    assert [(r.memory.type, r.memory.content) for r in results] == [
        ("sticky", "The user is Maya, a backend engineer"),
        ("project_context", "The project uses PostgreSQL")]
    request = model.requests[0]
    assert request[0] == {"role": "system", "content": EXTRACTION_PROMPT}
    transcript = request[1]["content"]
    assert "I live in Lisbon" in transcript
    assert "[STICKY]" not in transcript and "injected line" not in transcript
    assert "Rex" not in transcript


def test_personal_facts_of_either_named_speaker_are_saved_under_their_name(
        loci: Loci) -> None:
    loci.add("s", "user", "Hey! I adopted a puppy named Luna from the shelter.", name="Caroline")
    loci.add("s", "assistant", "Wow, so cool! I went to a pottery class last Friday. "
             "Have you tried ramen yet?", name="Melanie")
    loci.add("s", "assistant", "I went to the docs and found the flag.")  # the AI: no name
    loci.add("s", "user", "My sister is visiting next week. I'm planning to paint a mural.",
             name="Caroline")
    found = {(c.type, c.rule, c.content) for c in RuleExtractor().extract(loci.events("s"))}
    assert found == {
        ("sticky", "possession", "Caroline adopted a puppy named Luna from the shelter."),
        ("project_context", "event", "Melanie went to a pottery class last Friday."),
        ("project_context", "relationship", "Caroline's sister is visiting next week."),
        ("project_context", "plan", "Caroline is planning to paint a mural."),
    }
    # Who a relative is lasts (sticky); a mention of them, or "I love it!", is no fact.
    loci.add("s", "user", "My sister lives in Porto. My kids loved it! I love it! "
             "I want to tell you something.", name="Caroline")
    later = {(c.type, c.content) for c in RuleExtractor().extract(loci.events("s")[-1:])}
    assert later == {("sticky", "Caroline's sister lives in Porto."),
                     ("project_context", "Caroline's kids loved it.")}


#: Real turns of a Claude Code session (../shared/data/claude_code_sessions) and of the
#: issue's report: what a harness or a terminal wrote, not what the user said.
HARNESS_TURNS = (
    "<task-notification>\n<task-id>bc34d29</task-id>\n<output-file>/tmp/claude/-Users-m/"
    "tasks/bc34d29.output</output-file>\n<status>completed</status>\n<summary>Background "
    'command "Get first and last occurrence" completed (exit code 0).</summary>\n'
    "</task-notification>",
    "cd /usr/bin",
    "<system-reminder>The deadline for the launch is 2026-03-01.</system-reminder>",
)


def test_harness_markup_and_command_lines_are_not_facts(loci: Loci) -> None:
    for text in HARNESS_TURNS:
        loci.add("cc", "user", text)
    loci.add("cc", "user", "<system-reminder>Be brief.</system-reminder> We decided to use "
             "PostgreSQL for the project.")
    found = [c.content for c in RuleExtractor().extract(loci.events("cc"))]
    assert found == ["User: We decided to use PostgreSQL for the project."]
    summary = ExtractiveSummarizer().summarize(loci.events("cc"), max_tokens=400)
    assert "PostgreSQL for the project" in summary
    assert "task-notification" not in summary and "bc34d29" not in summary
    assert "deadline" not in summary and "Be brief" not in summary


def test_an_extracted_fact_is_dated_when_it_was_said(loci: Loci) -> None:
    loci.settings = loci.settings.with_overrides(memory_extraction=False)
    lines = ['{"role": "user", "content": "We decided to use PostgreSQL for the project.", '
             '"timestamp": "2025-11-02T09:30:00Z"}']
    events = loci.import_jsonl(lines, "kickoff")
    (saved,) = loci.extract_memories(events)
    memory = saved.memory
    assert memory.created_at == events[0].timestamp  # said then ...
    assert memory.updated_at > memory.created_at  # ... confirmed now
    assert memory.expires_at is not None and memory.expires_at > memory.updated_at
    assert memory in loci.memories()  # not expired: its time to live counts from now
    text = loci.compile(None, "hi").dynamic
    assert "[MEMORY 2 November 2025] User: We decided to use PostgreSQL" in text


#: Turns of the LongMemEval dev histories that the possession rule made sticky facts
#: (never expiring, shown in every context): purchases are events, and "I have a few",
#: "a lot of", "a meeting" are no possessions.
@pytest.mark.parametrize(("said", "kind"), [
    ("I bought a wireless charging pad from Best Buy's website on March 15th, which has "
     "been really convenient for keeping my phone charged.", ("project_context", "event")),
    ("I got a 20% off coupon from Everlane in mid-February.", ("project_context", "event")),
    ("I got my kitten on February 10th, and I've been busy with her ever since.",
     ("sticky", "possession")),
    ("I got a new cat litter box on January 10th.", ("project_context", "event")),
    ("I have a few pieces that need alterations, like a silk blouse that's too loose.", None),
    ("I have a lot of them and they tend to get jumbled up in my closet.", None),
    ("I think I got a bit carried away with the response.", None),
    ("Wait, I think I got carried away there!", None),
    ("Why I considered taking the train on Wednesdays - I have a meeting at 9 AM on "
     "Wednesdays, and the train is way more reliable than the bus.", None),
    ("I have a dog named Max who is 10 years old.", ("sticky", "possession")),
    ("I own a 2015 Honda Civic.", ("sticky", "possession")),
    # An appointment is had on a day, not for good (a knowledge-update history: "every two
    # weeks" then became "every week", and the sticky older one never expired).
    ("I have a therapy session with Dr. Smith coming up soon - it's every two weeks, so "
     "I'm looking forward to discussing my progress.", ("project_context", "statement")),
    # What the user remembers of their own past is theirs to be asked about.
    ("I still remember the happy high school experiences such as being part of the "
     "debate team and taking advanced placement courses in economics.",
     ("project_context", "recollection")),
    ("I remember to take my pills.", None),
])
def test_what_the_user_has_lasts_and_what_they_got_is_an_event(
        loci: Loci, said: str, kind: tuple[str, str] | None) -> None:
    loci.settings = loci.settings.with_overrides(memory_extraction=False)
    loci.add("s", "user", said)
    found = [(c.type, c.rule) for c in RuleExtractor().extract(loci.events("s"))]
    assert found == ([kind] if kind else [])
