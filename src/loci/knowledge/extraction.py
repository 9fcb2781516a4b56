"""What the librarian keeps from a conversation:
decisions, action items, insights, and the user's preferences, goals, identity and
people, each with an importance in [0, 1].

Two ways, one result type:

- :func:`rule_findings`, offline: every sentence of the user's and the assistant's
  messages is scored by :mod:`loci.text.salience` (cue phrases pick decisions, action
  items and insights; specific content raises the score), and what the user says of
  themselves is matched against profile patterns (people by relation, goals, identity,
  preferences). What counts as such a statement is the memory's rule
  (:func:`loci.memory.facts.statement_of`: no questions, requests, greetings, talk
  about the conversation or pasted documents), so the profile and the memories keep
  the same kind of sentence. Importance is the salience score scaled to [0, 1].
- :func:`llm_findings`: a chat model lists items as ``kind | importance | text`` lines.

Neither reads what Loci injected (see :func:`loci.memory.extract.readable_lines`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from loci.llm.base import ChatModel
from loci.memory.extract import readable_lines
from loci.memory.facts import about_writer, sentences_of, statement_of
from loci.models import Event
from loci.text import salience as sal

KINDS = ("decision", "action", "insight", "preference", "goal", "identity", "person")
#: A salience score at this value or above is importance 1.
FULL_SCORE = 6.0
_SECTION_KIND = {sal.DECISIONS: "decision", sal.ACTIONS: "action", sal.NEXT: "action",
                 sal.INSIGHTS: "insight"}
_RELATIONS = (r"wife|husband|partner|girlfriend|boyfriend|son|daughter|mom|mother|dad|father"
              r"|brother|sister|friend|best friend|co-?founder|boss|manager|colleague"
              r"|co-?worker|teammate|mentor|client|investor|assistant|doctor|landlord"
              r"|neighbou?r|report|lead|designer|engineer|cto|ceo")
#: A name, not its possessive ("my brother Michael's team" is about Michael).
_NAME = r"[A-Z][a-z]+(?:[-'](?!s\b)[A-Z]?[a-z]+)?(?:\s+[A-Z][a-z]+(?:[-'](?!s\b)[A-Z]?[a-z]+)?)?"
_PERSON = (
    re.compile(rf"\b[Mm]y\s+(?P<rel>(?i:{_RELATIONS}))(?:,)?\s+(?P<name>{_NAME})"),
    re.compile(rf"\b(?P<name>{_NAME}),?\s+(?:is|was)\s+my\s+(?P<rel>(?i:{_RELATIONS}))\b"),
    # "Sam, my brother," names him; "my 2018 Toyota Corolla, my wife's car" does not.
    re.compile(rf"\b(?P<name>{_NAME}),\s+my\s+(?P<rel>(?i:{_RELATIONS}))\b(?!')"),
)
_NOT_NAMES = frozenset(
    "I The A An It This That We You He She They My Our Your Hi Hello Hey Thanks Sure "
    "User Assistant Today Tomorrow Yesterday Monday Tuesday Wednesday Thursday Friday "
    "Saturday Sunday Also Then Now Just So But And Or If Please".split())
_GOAL = re.compile(
    r"\b(?:my|our)\s+(?:main\s+|top\s+|current\s+|big\s+)?(?:goal|priority|priorities"
    r"|objective|aim|mission)\b|\bi(?:'m| am)\s+(?:trying|working|aiming|hoping|planning)"
    r"\s+to\b|\bi\s+want\s+to\s+(?:ship|launch|finish|build|get|reach|learn|become|run"
    r"|grow|raise|hire|write|save|lose|move)\b", re.IGNORECASE)
#: A plan for a day near ("this weekend", "tomorrow", "soon") is no lasting goal: it is a
#: memory, which expires; the profile is shown in every context for good.
_SOON = re.compile(r"\b(?:today|tonight|tomorrow|soon|right now|later today|(?:this|next)"
                   r"\s+(?:morning|afternoon|evening|weekend|week)|in the (?:morning|afternoon"
                   r"|evening)|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))"
                   r"\b", re.IGNORECASE)
_IDENTITY = (
    re.compile(r"\b(?:my name is|call me)\s+[A-Z][\w'-]+"),
    re.compile(r"\b[Ii](?:'m| am)\s+(?:an?|the)\s+(?!(?:bit|little|lot|few|tad|big fan|huge fan"
               r"|fan|while|moment|second)\b)\w+"),
    re.compile(r"\b[Ii](?:'m| am)\s+(?-i:[A-Z])[a-z]+[,.]"),
    # Where one lives or works; "I work on my sculptures" is no job.
    re.compile(r"\b[Ii]\s+(?:(?:live|work|am based|'m based)\s+(?:in|at|for|as)|grew up\s+(?:in|on)"
               r"|was born\s+(?:in|on|at))\b"),
    re.compile(r"\b[Ii](?:'m| am)\s+from\s+[A-Z]"),
    re.compile(r"\bmy\s+(?:pronouns|job|role|title|background|timezone|time zone)\b",
               re.IGNORECASE),
)
_PREFERENCE = re.compile(
    r"\bi\s+(?:really\s+|strongly\s+|usually\s+|generally\s+|always\s+|also\s+)?(?:prefer"
    r"|like|love|hate|dislike|enjoy|can'?t stand|don'?t like|do not like)\b|\bi'?d rather\b"
    r"|^(?:please\s+)?(?:always|never)\s+\w+"
    r"|^(?:please\s+)?(?:keep|make|use|answer|reply|respond|write)\b.*\b(?:short|concise|brief"
    r"|bullets?|detailed|formal|casual|english|language|metric|plain)\b", re.IGNORECASE)
_LLM_LINE = re.compile(r"^\s*[-*]?\s*(?P<kind>[a-z_ ]+?)(?::(?P<who>[^|]+?))?\s*\|\s*"
                       r"(?P<imp>[01](?:\.\d+)?)\s*\|\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_TITLE_LINE = re.compile(r"^\s*title\s*\|\s*(?P<title>.+?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """One thing worth keeping. ``person`` names who a ``person`` finding is about."""

    kind: str
    text: str
    importance: float
    event_id: int | None = None
    person: str | None = None
    relation: str | None = None


def rule_findings(events: Sequence[Event]) -> list[Finding]:
    """Findings by sentence patterns and salience; no model."""
    said = [(e, text, sentences_of(text)) for e in events if (text := readable_lines(e))]
    names = sal.known_names(s for _, _, sentences in said for s in sentences)
    found: list[Finding] = []
    for event, text, sentences in said:
        own = frozenset(about_writer(text, sentences) if event.role == "user" else ())
        for raw in sentences:
            sentence = sal.strip_discourse(raw.strip())
            if len(sentence) < 8 or sentence.endswith("?"):
                continue
            scored = sal.score_sentence(sentence, role=event.role, names=names)
            if scored.section is None:
                continue
            importance = round(min(max(scored.score / FULL_SCORE, 0.05), 1.0), 2)
            # Of a pasted document, only its edges may say something of the user.
            statement = statement_of(sentence) if raw in own else None
            finding = _classify(sentence, statement, event, scored, importance)
            if finding is not None:
                found.append(finding)
    return unique(found)


def _classify(sentence: str, statement: str | None, event: Event, scored: sal.Scored,
              importance: float) -> Finding | None:
    """A profile finding of the user's ``statement`` about themselves, if any, or else a
    decision, action item or insight of the ``sentence``."""
    if statement is not None:
        for pattern in _PERSON:
            match = pattern.search(statement)
            if match and match.group("name").split()[0] not in _NOT_NAMES:
                return Finding("person", statement, max(importance, 0.5), event.id,
                               match.group("name"), match.group("rel").lower())
        if _GOAL.search(statement) and not _SOON.search(statement):
            return Finding("goal", statement, max(importance, 0.5), event.id)
        if any(p.search(statement) for p in _IDENTITY):
            return Finding("identity", statement, max(importance, 0.6), event.id)
        if _PREFERENCE.search(statement):
            return Finding("preference", statement, max(importance, 0.5), event.id)
    kind = _SECTION_KIND.get(scored.section or "")
    if kind is None or scored.score < sal.MIN_SCORE:
        return None
    return Finding(kind, sentence, importance, event.id)


def unique(findings: Sequence[Finding]) -> list[Finding]:
    """Each (kind, text) once, ignoring case and spacing."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for finding in findings:
        key = (finding.kind, " ".join(finding.text.lower().split()))
        if key not in seen:
            seen.add(key)
            kept.append(finding)
    return kept


LIBRARIAN_PROMPT = """You are a librarian filing what matters from a conversation.
First line: TITLE | a short title of the conversation (3-6 words)
Then one line per item worth keeping, as KIND | IMPORTANCE | TEXT where
KIND is decision, action, insight, preference, goal, identity or person:<Full Name>
(preference, goal, identity and person: only what the user says about themselves or
people in their life), IMPORTANCE is a number from 0 to 1, and TEXT is one sentence
that makes sense on its own (write "The user ..." rather than "I ...").
Skip greetings and small talk. Write nothing but these lines."""


def llm_findings(model: ChatModel, events: Sequence[Event]) -> tuple[str | None, list[Finding]]:
    """(title, findings) from a chat model's ``KIND | IMPORTANCE | TEXT`` lines."""
    lines = [f"{e.role}: {text}" for e in events if (text := readable_lines(e))]
    if not lines:
        return None, []
    reply = model.complete([
        {"role": "system", "content": LIBRARIAN_PROMPT},
        {"role": "user", "content": "\n\n".join(lines)},
    ])
    title = None
    found = []
    for line in reply.content.splitlines():
        if (heading := _TITLE_LINE.match(line)) is not None:
            title = heading.group("title")
            continue
        match = _LLM_LINE.match(line)
        if match is None:
            continue
        kind = match.group("kind").strip().lower().replace(" ", "_")
        kind = {"action_item": "action", "people": "person"}.get(kind, kind)
        if kind not in KINDS or (kind == "person" and not match.group("who")):
            continue
        who = match.group("who").strip() if match.group("who") else None
        found.append(Finding(kind, match.group("text"), float(match.group("imp")), None, who))
    return title, unique(found)


def session_importance(findings: Sequence[Finding]) -> float:
    """The mean importance of the three most important findings (0 without any)."""
    top = sorted((f.importance for f in findings), reverse=True)[:3]
    return round(sum(top) / len(top), 2) if top else 0.0
