"""Facts, not sentences, from every turn: the offline rules on real sentences of the dev
sets (LongMemEval_S, LoCoMo, Claude Code sessions under ../shared/data), the third-person
rewrite, the background extraction of each write and a chat model's decisions."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from loci import Loci
from loci.knowledge.librarian import profile_line
from loci.memory.decide import DECISION_PROMPT
from loci.memory.extract import RuleExtractor
from loci.memory.rewrite import third_person
from loci.testing import ScriptedChatModel

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True

#: (what a user said in a dev set, the fact the rules keep or None).
KEPT = [
    # LongMemEval_S: a plan before a request; who a relative is; a date; a preference.
    ("I'm planning to go shopping this weekend and I was wondering if you could help me "
     "organize my coupons and discounts.", "The user is planning to go shopping this weekend."),
    ("I'm trying to organize a baby gift for my sister's friend Christine, who's expecting "
     "twins through a surrogate.", "The user is trying to organize a baby gift for their "
     "sister's friend Christine, who's expecting twins through a surrogate."),
    ("Anyway, I remember that I signed up for the recreational volleyball league about 6 "
     "weeks ago.", "The user signed up for the recreational volleyball league about 6 weeks "
     "ago."),
    ("I'm a big fan of upbeat pop and rock music, as well as motivational podcasts that "
     "focus on self-improvement and personal growth.", "The user is a big fan of upbeat pop "
     "and rock music, as well as motivational podcasts that focus on self-improvement and "
     "personal growth."),
    ("I need help finding a good immigration lawyer who has experience with asylum cases.",
     None),
    ("My mom loves tea, and I think she'd appreciate trying some traditional Ethiopian tea "
     "alongside the coffee.", "The user's mom loves tea, and they think she'd appreciate "
     "trying some traditional Ethiopian tea alongside the coffee."),
    # A title in quotes, a phrase before the subject, a connective: rewritten all the same;
    # being "a bit" something is no identity, advice to "remember to" no request.
    ('I actually participated in the "Run Disney" 5K event at Disneyland on the 8th of '
     'October, and it was an amazing experience.', 'The user actually participated in the '
     '"Run Disney" 5K event at Disneyland on the 8th of October, and it was an amazing '
     'experience.'),
    ("For example, I recently watched a Crash Course video on world history, and it really "
     "helped me understand the context behind a recent news article I read.", "The user "
     "recently watched a Crash Course video on world history, and it really helped them "
     "understand the context behind a recent news article they read."),
    ("Last week, I smoked a beef brisket for 4 hours, and the hickory chips added an "
     "incredible depth of flavor.", "Last week, the user smoked a beef brisket for 4 hours, "
     "and the hickory chips added an incredible depth of flavor."),
    # A later "we", "our", "us" is a group the user is in.
    ("I'm planning to invite my manager Rachel to join us, so we'll be a group of 5 "
     "engineers and a manager.", "The user is planning to invite their manager Rachel to "
     "join them, so they'll be a group of 5 engineers and a manager."),
    ("I usually buy a 24-pack, which lasts us around 2 months.",
     "The user usually buys a 24-pack, which lasts them around 2 months."),
    ("I'm a bit concerned about odors.", None),
    ("Remember to be yourself, be present, and show genuine interest in their life.", None),
    # The offenders: the conversation, filler, a pasted news line, a command.
    ("Now, back to your project.", None),
    ("This will give me a solid foundation for the rest of the project.", None),
    ("I think I have a better idea of how to approach creating an outline now.", None),
    ("The Serious Fraud Office has refused to comment on suggestions that it may launch an "
     "inquiry.", None),
    ("cd /usr/bin", None),
    ("I'll ask my friend to check out these resources, thanks.", None),
    ("The user really likes these recipe ideas.", None),
    # LongMemEval_S again: a request to the assistant is no fact, even with "my friend";
    # a reaction to what the assistant offered neither; a request after a plan goes
    # ("we were wondering", "I need some recipe ideas"); "will help me" is no request.
    ("Give me a list of 10 whacky nicknames for my friend Amanda Van West in the theme of "
     "1920s gangster names.", None),
    ("Can you show me some waterproof phone cases, I'm planning to use my phone more "
     "outdoors and want to make sure it's protected from water and dust.", None),
    ("I like the outdoor games idea, maybe we can do a giant Jenga game or something "
     "similar.", None),
    ("I'm trying to plan a hike with some friends this weekend and we were wondering if you "
     "could recommend some trails near my city.",
     "The user is trying to plan a hike with some friends this weekend."),
    ("I'm planning a BBQ this weekend and I need some recipe ideas that feature fresh "
     "tomatoes.", "The user is planning a BBQ this weekend."),
    # A cut before a request that leaves half a sentence keeps nothing.
    ("I'll start looking for tax professionals and attorneys in my area and ask around for "
     "any recommendations.", None),
    ("I also have a few art prints and a sculpture that I'd like to know how to care for.",
     None),
    ("I'm confident that my background in Python and scikit-learn will help me with the "
     "programming aspects of the course.", "The user is confident that their background in "
     "Python and scikit-learn will help them with the programming aspects of the course."),
    # LoCoMo (the user's side of conv-26).
    ("I went to a LGBTQ support group yesterday and it was so powerful.",
     "The user went to a LGBTQ support group yesterday and it was so powerful."),
    ("Hey Mel! Good to see you! How have you been?", None),
    # Claude Code: a terminal paste and the harness's own line.
    ("m@book ~ % ~/documents/M-Claude/docs/security-audit-sudo.sh", None),
    ("[Request interrupted by user for tool use]", None),
]


@pytest.mark.parametrize(("said", "kept"), KEPT)
def test_rules_keep_facts_not_sentences(loci: Loci, said: str, kept: str | None) -> None:
    loci.settings = loci.settings.with_overrides(memory_extraction=False)
    loci.add("s", "user", said)
    found = [c.content for c in RuleExtractor().extract(loci.events("s"))]
    assert found == ([kept] if kept else [])


@pytest.mark.parametrize(("said", "rewritten"), [
    ("I was wondering about my options.", "The user was wondering about their options."),
    ("I'm sure I was there and I'm glad.", "The user is sure they were there and they're glad."),
    ("I need a new bike.", "The user needs a new bike."),
    ("I bought a bike for myself.", "The user bought a bike for themselves."),
    ("I've been to Lisbon twice.", "The user has been to Lisbon twice."),
    ("I don't eat meat.", "The user doesn't eat meat."),
    ("My dog is called Biscuit.", "The user's dog is called Biscuit."),
    # A verb joined to a present-tense one agrees too; a joined noun stays as it is.
    ("I live in Lisbon and deploy on Fridays.",
     "The user lives in Lisbon and deploys on Fridays."),
    ("I play guitar and sing in a band.", "The user plays guitar and sings in a band."),
    ("I like tea and cake.", "The user likes tea and cake."),
    ("I moved to Lisbon and started a job.", "The user moved to Lisbon and started a job."),
    # What the rules cannot make grammatical is left to the caller (kept attributed).
    ("We decided to use PostgreSQL.", None),
    ('I said "I love you" to her.', None),  # quoted speech keeps its own pronouns
    ('I\'ve read "The Great Gatsby" before.', 'The user has read "The Great Gatsby" before.'),
    ("Last week, my dog got sick.", "Last week, the user's dog got sick."),
    ("Since I had a cold, I stayed home.", None),
    ("I've two kids.", None),
    ("I love pizza and work.", None),  # "work" may be a noun or a verb here
    # A joined "don't" shares the opening "I" (LongMemEval_S); after "my dogs" it does not.
    ("I'm a beginner and don't want to feel overwhelmed.",
     "The user is a beginner and doesn't want to feel overwhelmed."),
    ("My dogs are old and don't run much.", "The user's dogs are old and don't run much."),
    ("Call me Mo.", "The user goes by Mo."),
    ("Call me anytime.", None),  # no name follows
])
def test_third_person_agrees_or_gives_up(said: str, rewritten: str | None) -> None:
    assert third_person(said) == rewritten
    assert third_person("My sister lives in Porto.", "Caroline") == (
        "Caroline's sister lives in Porto.")


def test_no_broken_rewrite_in_a_real_history(loci: Loci) -> None:
    """Turns from LongMemEval_S that produced "they was" and "wases" before."""
    loci.settings = loci.settings.with_overrides(memory_extraction=False)
    loci.add("s", "user", "I'm planning to go shopping this weekend and I was wondering if "
             "you could help me organize my coupons and discounts.")
    loci.add("s", "user", "I was at my sister's wedding last month and I was so happy.")
    facts = [c.content for c in RuleExtractor().extract(loci.events("s"))]
    assert facts and not any(" they was" in f or "wases" in f for f in facts)
    assert "The user was at their sister's wedding last month and they were so happy." in facts
    # The profile's rewrite (the librarian) of the other quote.
    assert profile_line("I was also thinking of sending a small gift.") == (
        "The user was also thinking of sending a small gift.")


def test_one_fact_typed_twice_is_one_memory(loci: Loci) -> None:
    """Two turns of a LongMemEval_S history state one fact that two rules type
    differently (a possession, never expiring; a statement, 30 days): one memory is
    kept, under the type that lives longer. A type an agent chose is kept apart."""
    loci.add("s", "user", "I'm looking to explore some online courses in data science. I "
             "have a background in finance, having completed my Bachelor's degree in "
             "Business Administration from the University of Michigan in 2015, with a major "
             "in Finance and minor in Economics.")
    loci.add("s", "user", "I am considering enrolling in the Data Science Specialization. As "
             "someone with a background in finance, I completed my Bachelor's degree in "
             "Business Administration from the University of Michigan in 2015, with a major "
             "in Finance and minor in Economics.")
    assert loci.wait_extracted(10)
    (fact,) = [m for m in loci.memories() if "Michigan" in m.content]
    assert fact.type == "sticky" and fact.content.startswith("As someone with a background")
    assert len(loci.memory_history(fact.id)) == 1
    loci.remember("The user has a background in finance.", type="project_context")
    assert len([m for m in loci.memories() if "background in finance" in m.content]) == 2


def test_every_write_is_extracted_in_the_background(loci: Loci) -> None:
    event = loci.add("s", "user", "Hi! My dog is called Biscuit. What should I feed him?")
    assert loci.wait_extracted(10)
    (memory,) = loci.memories()
    assert memory.content == "The user's dog is called Biscuit."
    assert memory.source == f"event:{event.id}" and memory.created_at == event.timestamp
    assert {"pet", "name"} <= set(memory.tags)
    loci.add_events("s", [{"type": "message", "role": "user", "content": "What time is it?"},
                          {"type": "message", "role": "user", "content": "I live in Lisbon.",
                           "metadata": {"injected": True}}])
    assert loci.wait_extracted(10) and len(loci.memories()) == 1


def test_what_was_written_is_read_back_without_waiting(loci: Loci) -> None:
    """A write returns before its facts are saved; a read of memories that follows it
    sees them all the same (the waiting extraction is finished first)."""
    said = ["I'm Sam.", "I work at Acme as a designer.", "My sister is called Ana.",
            "I prefer tea over coffee."]
    for sentence in said:
        loci.add("s", "user", sentence)
    assert sorted(m.content for m in loci.memories()) == sorted(
        third_person(s) for s in said)
    loci.add("s", "user", "My dog is called Rex.")
    assert loci.search("Rex")[0].text == "The user's dog is called Rex."


def test_a_search_for_a_pet_name_finds_the_pet(loci: Loci) -> None:
    loci.add("s", "user", "My name is Maya.")
    loci.add("s", "user", "My dog is called Biscuit.")
    assert loci.wait_extracted(10)
    hits = loci.memory_search("pet name")
    assert hits[0].summary == "The user's dog is called Biscuit."


def test_turns_extracted_with_the_extraction_off_wait_for_the_session_end(
        loci: Loci) -> None:
    loci.settings = loci.settings.with_overrides(memory_extraction=False)
    loci.add("s", "user", "I live in Lisbon.")
    assert loci.wait_extracted(10) and loci.memories() == []
    assert [m.memory.content for m in loci.end_session("s").memories] == [
        "The user lives in Lisbon."]


def _decider(replies: dict[str, str], seen: list[str]) -> Any:
    """A chat model that answers the decision prompt by the turn it reads."""
    def respond(messages: Sequence[Mapping[str, Any]]) -> str:
        assert messages[0]["content"] == DECISION_PROMPT
        prompt = str(messages[1]["content"])
        seen.append(prompt)
        return next((r for key, r in replies.items() if key in prompt), "not json")
    return respond


def test_a_chat_model_decides_add_update_delete_none_per_turn(loci: Loci) -> None:
    seen: list[str] = []
    loci.chat = ScriptedChatModel(responder=_decider({
        "I live in Lisbon": json.dumps({"memory": [
            {"event": "ADD", "text": "The user lives in Lisbon", "type": "sticky"}]}),
        "moved to Porto": json.dumps({"memory": [
            {"event": "UPDATE", "id": 0, "text": "The user lives in Porto"}]}),
        "Thanks": json.dumps({"memory": [{"event": "NONE"}]}),
        "forget where I live": json.dumps({"memory": [{"event": "DELETE", "id": 0}]}),
    }, seen))
    loci.add("s", "user", "I live in Lisbon.")
    loci.add("s", "assistant", "Lisbon is lovely.")  # not the user's: no call
    assert loci.wait_extracted(10)
    (lisbon,) = loci.memories()
    assert (lisbon.content, lisbon.type) == ("The user lives in Lisbon", "sticky")
    loci.add("s", "user", "I moved to Porto last week.")
    loci.add("s", "user", "Thanks!")
    assert loci.wait_extracted(10)
    (porto,) = loci.memories()
    assert porto.id == lisbon.id and porto.content == "The user lives in Porto"
    assert [v.content for v in loci.memory_history(porto.id)] == ["The user lives in Lisbon"]
    assert "0. The user lives in Lisbon" in seen[1]  # the stored fact, numbered
    loci.add("s", "user", "Please forget where I live.")
    assert loci.wait_extracted(10) and loci.memories() == []
    assert loci.memory(porto.id).content == "The user lives in Porto"  # retired, not lost
    assert len(seen) == 4


def test_a_reply_that_is_no_decision_falls_back_to_the_rules(loci: Loci) -> None:
    loci.chat = ScriptedChatModel(responder=_decider({}, []))
    loci.add("s", "user", "My dog is called Biscuit.")
    assert loci.wait_extracted(10)
    assert [m.content for m in loci.memories()] == ["The user's dog is called Biscuit."]


def test_a_write_returns_before_its_facts_are_decided(loci: Loci) -> None:
    release, asked = threading.Event(), threading.Event()

    def slow(messages: Sequence[Mapping[str, Any]]) -> str:
        asked.set()
        release.wait(10)
        return json.dumps({"memory": [{"event": "ADD", "text": "The user lives in Lisbon"}]})

    loci.chat = ScriptedChatModel(responder=slow)
    loci.add("s", "user", "I live in Lisbon.")  # returns while the model is still asked
    assert asked.wait(10) and loci.memories() == []
    release.set()
    assert loci.wait_extracted(10)
    assert [m.content for m in loci.memories()] == ["The user lives in Lisbon"]
