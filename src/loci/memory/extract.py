"""Memory extraction from conversation events: of every turn as it
is written (``loci.memory.live``), or, with that off, before compaction and at the end
of a conversation.

Two extractors behind one protocol:

- :class:`RuleExtractor`, offline: of the sentences that are statements about their
  speaker (``loci.memory.facts``), those that match a pattern for identity,
  relationships, possessions, preferences, explicit "remember that…", decisions,
  events, plans, project facts and working rules, or that say something concrete about
  the speaker, typed accordingly and written in the third person with the speaker as
  subject ("The user …", or the speaker's name, ``metadata["name"]``: a named speaker
  is a person, whatever its role; ``loci.memory.rewrite``), or in the speaker's own
  words, attributed, when no grammatical rewrite is sure; tagged with the rule and the
  fact's topics;
- :class:`LLMExtractor`: asks a chat model for ``[MEMORY:type]`` tags and parses them.

Neither reads what Loci injected itself: system and summary events, events marked
``metadata["injected"]``, and lines that carry Loci's own ``[STICKY]``/``[MEMORY …]``/
``[STATE]``/``[RECALL …]`` prefixes are skipped, so compiled context is never
re-extracted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from loci.llm.base import ChatModel
from loci.memory.facts import said_sentences, statement_of, topics
from loci.memory.rewrite import third_person
from loci.memory.tags import parse_reply
from loci.models import Event, speaker
from loci.text import salience as sal
from loci.text.transcript import without_injected_lines

_FENCED = re.compile(r"```.*?```|~~~.*?~~~", re.DOTALL)
_RELATIVES = (r"my\s+(?:wife|husband|partner|son|daughter|kids?|children|dog|cat|pets?|puppy"
              r"|kitten|co-?founder|boss|manager|team|mom|mother|dad|father|parents?|sister"
              r"|brother|siblings?|grand\w+|aunt|uncle|cousin|(?:best\s+)?friends?|girlfriend"
              r"|boyfriend|fianc[eé]e?)")

#: What one has on a day, not for good: "I have a therapy session", "a job interview".
_APPOINTMENTS = (r"(?:session|class|lesson|call|date|exam|test|party|trip|event|conference"
                 r"|flight|reservation|presentation|interview|appointment|meeting|deadline"
                 r"|game|match|concert|show|wedding|surgery|check-?up)s?\b")

#: (memory type, pattern) in priority order; the first match types a sentence.
USER_RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (memory_type, name, re.compile(pattern, re.IGNORECASE))
    for memory_type, name, pattern in (
        # "Remember that I …" asks to keep a fact; "Remember to be yourself" is advice.
        ("sticky", "explicit", r"^(?:please\s+)?(?:remember|don'?t forget|note)\s+(?:that\s+\S"
                               r"|(?!to\b)(?=.*\b(?:i|i'm|my|me)\b)\S)"),
        ("sticky", "identity", r"\b(?:my name is|call me|i am|i'm)\s+(?-i:[A-Z])[\w'-]+"),
        # "I'm a nurse" is who someone is; "I'm a bit worried", "a big fan of" are not.
        ("sticky", "identity", r"\bi(?:'m| am)\s+(?:an?|the)\s+(?!(?:bit|little|lot|tad|few"
                               r"|couple|big|huge|fan)\b)\w+"),
        ("sticky", "identity", r"\bi(?:'m| am)\s+(?:allergic|intolerant|vegan|vegetarian"
                               r"|diabetic|pregnant)\b"),
        ("sticky", "identity", r"\bi\s+(?:live|work|am based|'m based)\s+(?:in|at|for|as)\b"),
        # Who someone's relatives are is lasting; "my kids loved it" is an event.
        ("sticky", "identity", rf"\b{_RELATIVES}(?:'s)?\s+(?:is|are|was|lives|lived|works"
                               r"|worked|studies|moved|turns|turned|has|had|called|named)\s+"
                               r"(?:an?\b|the\b|my\b|in\b|at\b|for\b|called\b|named\b"
                               r"|\d|(?-i:[A-Z]))"),
        # What the user has lasts; what they got or bought is an event (below), and "I
        # have a few questions", "a lot of them", "a therapy session coming up" are not
        # possessions.
        ("sticky", "possession", r"\bi\s+(?:have|own|adopted)\s+(?!a\s+(?:lot|few|bit|couple"
                                 r"|question|feeling|hard|great|good|chance|total"
                                 r"|busy|long|tendency|habit)\b|an\s+idea\b"
                                 rf"|an?\s+(?:[\w-]+\s+)?{_APPOINTMENTS})"
                                 r"(?:a|an|my|two|three|\d+)\s"
                                 # An animal got or bought is one the user has.
                                 r"|\bi\s+(?:just\s+)?(?:got|bought)\s+(?:a|an|my|two|three"
                                 r"|\d+)\s+(?:\w+\s+)?(?:cat|dog|pupp(?:y|ies)|kittens?"
                                 r"|pets?|birds?|parrots?|fish|hamsters?|rabbits?|horses?"
                                 r"|turtles?|snakes?|lizards?|chickens?)\b(?!\s+(?:litter|food"
                                 r"|beds?|toys?|tree|carrier|bowls?|collar|leash|door|sitter"
                                 r"|treats?|house|crate|cage|tank|insurance|shampoo))"),
        ("user_preference", "preference",
         # Saying what: "I love it!" and "I want to tell you" are not preferences.
         r"\bi\s+(?:really\s+|also\s+|still\s+|usually\s+|generally\s+)?(?:prefer|like|love"
         r"|hate|dislike|enjoy)\s+(?!(?:it|that|this"
         r"|them|to|you)(?:\s+(?:so\s+much|a\s+lot|too))?[\s.!,]*$)"
         r"|\bi\s+(?:really\s+)?(?:want|need)\s+(?!to\b)"
         r"|\bi(?:'m| am)\s+(?:a\s+)?(?:big\s+|huge\s+|great\s+)?fan\s+of\b"),
        ("user_preference", "preference",
         r"^(?:please\s+)?(?:keep|make|use|answer|reply|respond)\b.*\b(?:short|concise|brief|"
         r"bullet|detailed|formal|casual|english|language)\b"),
        ("learned_pattern", "rule", r"^(?:please\s+)?(?:always|never)\s+\w+"),
        ("project_context", "event",
         r"\bi\s+(?:just\s+|recently\s+|also\s+)?(?:went|visited|took|started|joined"
         r"|finished|ran|attended|moved|travel?led|painted|won|graduated|met|signed up"
         r"|volunteered|learned|celebrated|bought|got|purchased|ordered)\s+"
         r"(?!a\s+bit\b|carried\b|it\b|that\b|this\b|you\b)"),
        ("project_context", "plan",
         r"\bi(?:'m| am)\s+(?:\w+ly\s+|also\s+|still\s+)?(?:going|planning|hoping)\s+to\b"
         r"|\bi\s+(?:plan|intend|hope)\s+to\b"),
        # What the user remembers of their own past ("I still remember the debate team").
        ("project_context", "recollection",
         r"\bi\s+(?:still\s+|really\s+|clearly\s+|fondly\s+)?remember\s+"
         r"(?!to\b|you\b|that\s+you\b|what\s+you\b|it\b|this\b)"),
        ("project_context", "relationship", rf"\b{_RELATIVES}\b"),
        ("project_context", "decision",
         r"\b(?:we|i)\s+(?:decided|agreed|chose|will go with|'ll go with|settled on)\b|"
         r"^(?:decision|let'?s go with|let'?s use)\b"),
        ("project_context", "project",
         r"\b(?:deadline|launch(?:es)?|goes live|release|milestone|sprint|project|repo|"
         r"stack|we(?:'re| are) using|built with)\b"),
        # A statement carrying a concrete value (a date, time, address, path, id, amount)
        # is a fact someone may ask about later.
        ("project_context", "specific",
         r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|"
         r"[\w.-]+@[\w-]+\.\w+|(?:^|\s)(?:/[\w.-]+){2,}|\b[\w.-]+/[\w.-]+/[\w./-]+|"
         r"\$\s?\d|\b(?-i:[A-Z]{2,})-\d+\b"),
    )
)
#: A statement about the speaker themselves: it opens with "I" or "my" (after a short
#: phrase, "Besides great views, I …").
_OWN = re.compile(r"^(?:[^,]{1,40},\s+)?(?:i|i'm|i've|i'd|i'll|my)\b", re.IGNORECASE)
ASSISTANT_RULES = tuple(r for r in USER_RULES if r[1] == "decision")


@dataclass(frozen=True)
class Candidate:
    """A fact proposed for saving, with the topics it is about (memory tags)."""

    type: str
    content: str
    event_id: int | None
    rule: str
    topics: tuple[str, ...] = ()


class Extractor(Protocol):
    def extract(self, events: Sequence[Event]) -> list[Candidate]: ...


def readable_lines(event: Event) -> str | None:
    """The part of an event an extractor may read, or None if Loci injected it."""
    if event.type != "message" or event.role not in ("user", "assistant"):
        return None
    if event.metadata.get("injected"):
        return None
    text = _FENCED.sub(" ", event.content)
    return without_injected_lines(text)


class RuleExtractor:
    """Offline extraction by sentence patterns (see :mod:`loci.memory.facts`)."""

    def extract(self, events: Sequence[Event]) -> list[Candidate]:
        found: list[Candidate] = []
        for event in events:
            text = readable_lines(event)
            if not text:
                continue
            # A named speaker is a person in the conversation, whatever its role.
            name = speaker(event.metadata)
            person = event.role == "user" or name is not None
            rules = USER_RULES if person else ASSISTANT_RULES
            who = name or ("User" if event.role == "user" else "Assistant")
            for sentence in said_sentences(text):
                candidate = _classify(sentence, rules, event.id, who)
                if candidate is not None:
                    found.append(candidate)
        return _unique(found)


def _classify(
    sentence: str, rules: Sequence[tuple[str, str, re.Pattern[str]]], event_id: int | None,
    who: str,
) -> Candidate | None:
    statement = statement_of(sentence)
    if statement is None:
        return None
    typed = next(((t, n) for t, n, pattern in rules if pattern.search(statement)), None)
    if typed is None and who != "Assistant" and _OWN.match(statement) and (
            sal.specificity(statement, set()) > 0):
        typed = ("project_context", "statement")  # something concrete about themselves
    if typed is None:
        return None
    subject = "The user" if who == "User" else who
    fact = (third_person(statement, subject) if who != "Assistant" else None
            ) or f"{who}: {statement}"
    return Candidate(typed[0], fact, event_id, typed[1], topics(statement))


def _unique(candidates: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    unique = []
    for c in candidates:
        key = c.content.lower()
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


EXTRACTION_PROMPT = """Extract the important, lasting facts from the conversation below.
Write each fact as one tag on its own line, choosing the type that fits:
[MEMORY:sticky] identity and facts about the user that never expire [/MEMORY]
[MEMORY:user_preference] how the user likes things done [/MEMORY]
[MEMORY:project_context] projects, decisions, deadlines, current work [/MEMORY]
[MEMORY:learned_pattern] rules and habits learned while working [/MEMORY]
Skip greetings, small talk, transient requests and step-by-step tool details.
Write nothing but the tags."""


class LLMExtractor:
    """Extraction by a chat model that answers with ``[MEMORY:type]`` tags."""

    def __init__(self, model: ChatModel, prompt: str = EXTRACTION_PROMPT) -> None:
        self.model = model
        self.prompt = prompt

    def extract(self, events: Sequence[Event]) -> list[Candidate]:
        lines = []
        for event in events:
            text = readable_lines(event)
            if text:
                lines.append(f"{event.role}: {text}")
        if not lines:
            return []
        reply = self.model.complete([
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": "\n\n".join(lines)},
        ])
        parsed = parse_reply(reply.content)
        return _unique([Candidate(t.key, t.body, None, "llm") for t in parsed.memories])
