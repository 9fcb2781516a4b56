"""Which sentences of a turn may become a fact about the person who said it.

What a person would write in a notebook about someone: statements that say something
about the speaker (an "I", "my", "we" or "our" in them), not what they ask, how they
greet, what they say about the conversation ("back to your project", "this will give me
a solid foundation"), what they paste, or commands they type.

- ``said_sentences``: a turn's sentences; of a pasted document (a long turn that is
  mostly not about its writer) only the opening and closing lines, where people say why
  they paste it;
- ``statement_of``: a sentence without what carries nothing ("Hi!", "I think",
  "I remember that", "Anyway,") and without a request that follows the fact
  ("... this weekend and I was wondering if you could help"), or None if it is no
  statement about the speaker;
- ``topics``: what a fact is about in words a question uses ("pet", "family", "name",
  "home", "work", "food"), kept as tags so that a search for "pet name" finds "the
  user's dog is called Biscuit".
"""

from __future__ import annotations

import re

from loci.text import salience as sal

MIN_FACT_CHARS = 8
MAX_FACT_CHARS = 300
#: A turn longer than this, with fewer than ``PASTED_SHARE`` of its sentences about its
#: writer, is a pasted document.
PASTED_CHARS = 1500
PASTED_SHARE = 0.2
#: Sentences read at each end of a pasted document.
PASTED_EDGE = 2

_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself|we|we're|we've"
                           r"|we'll|our|ours|us)\b", re.IGNORECASE)
#: Words before a statement that say nothing themselves.
_LEAD_IN = re.compile(
    r"^(?:(?:hi|hey|hello|oh|wow|well|so|yeah|yes|ok(?:ay)?|haha|by the way|btw|anyway"
    r"|actually|also|and|but|however|still|now|plus|for context|fun fact|speaking of which"
    r"|of course|for (?:example|instance)|additionally|in fact|overall|specifically|hence"
    r"|i (?:just )?(?:wanted|want) to (?:mention|let you know|say|add|share|note)(?: that)?"
    r"|i (?:think|guess|believe|feel like|remember|recall|realized?|know|mean)(?: that)?"
    r"|i'm (?:also )?(?:remembering|thinking|realizing)(?: that)?"
    r"|(?:as )?i (?:mentioned|said)(?: (?:earlier|before))?"
    r"|to be honest|honestly|to be fair|speaking of [^,.]{1,60}(?=,))\b[\s,:;!.-]*)+",
    re.IGNORECASE)
#: A request to the assistant that follows a statement: cut there.
_REQUEST_TAIL = re.compile(
    r"(?<=\S)\s*[,;]?\s*(?:\b(?:and|but|so)\s+)?(?:\b(?:i|we)\s+(?:was|were|am|are|'m|'re)"
    r"\s+wondering\b|\bi'?d\s+(?:like|love)\s+(?:you|some|your|to\s+(?:get|know|ask|find"
    r"|learn|see))\b|\b(?:can|could|would|will)\s+you\b|\bplease\b|\b(?:i|we)\s+(?:need"
    r"|want|could use)\s+(?:your\s+|some\s+|a\s+few\s+)?(?:[\w-]+\s+){0,2}?(?:help|advice"
    r"|suggestions|recommendations|ideas|tips|inspiration)\b|\bany (?:tips"
    r"|suggestions|ideas|advice|recommendations)\b|\bwhat (?:do|would) you\b"
    r"|\bdo you (?:have|know)\b|\band\s+(?:need|want)\s+(?:your\s+|some\s+)?(?:help|advice"
    r"|suggestions|recommendations|ideas|tips)\b).*$", re.IGNORECASE)
#: What is said to or about the conversation, not about the speaker's life or work.
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|you're|you've|you'd|you'll)\b",
                            re.IGNORECASE)
#: Where a sentence's clauses part: a dash, or a comma or "and"/"but"/"so" before a new one.
_CLAUSE = re.compile(r"\s+[-–—]+\s+|[,;]\s+(?=(?:and|but|so|which|because|especially)\b)"
                     r"|\s+(?:and|but|so)\s+(?=i\b|i'm\b|i've\b)", re.IGNORECASE)
_CHATTER = re.compile(
    r"\b(?:thanks|thank)\b|^(?:this|that|these|those|it|it's"
    r"|that's|here's|here is|there's|let me|let's|lets)\b"
    # What the assistant offered: "the idea", "the outdoor games idea", "these tips".
    r"|\b(?:the|this|that|these|those) (?:[\w'\"-]+ ){0,4}(?:ideas?|suggestions?"
    r"|recommendations?|tips)\b"
    r"|\b(?:the|this|that|these|those) (?:\w+ )?(?:sound|options|resources|list|steps"
    r"|section)\b"
    r"|\b(?:(?:a |the )?(?:better|good|clear|great|solid) (?:idea|understanding|sense|picture"
    r"|foundation|starting point)|get started|dive (?:in|into|deeper)|back to"
    r"|i'm looking for|i'm trying to (?:figure|decide|understand|find)"
    r"|i (?:need|want) to (?:know|find|figure|understand|learn more)|i'm curious"
    r"|\bi (?:need|want|could use) (?:your |some )?(?:help|advice|suggestions|ideas|tips"
    r"|recommendations)"
    r"|i have (?:a|one|another|some) (?:question|follow-up|idea))\b", re.IGNORECASE)
_BRACKETED = re.compile(r"^\s*[\[<{(]")
#: A request to the assistant ("Give me a list of …", "Can you show me …"): what the
#: speaker wants done now, not a fact about them.
_ASK = re.compile(r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\b|(?:give|tell|show"
                  r"|list|create|generate|suggest|recommend|find|explain|describe|help"
                  r"|provide|draft|summari[sz]e|compose|design|translate|rewrite|calculate"
                  r"|brainstorm|outline|compare|write|pretend|imagine|act as|include|add"
                  r"|make(?!\s+sure))\b)", re.IGNORECASE)
#: An instruction on how to work with the speaker: a fact about them without an "I".
_INSTRUCTION = re.compile(r"^(?:please\s+)?(?:remember|don'?t forget|note that|always|never"
                          r"|keep|make sure|use|answer|reply|respond|call me)\b",
                          re.IGNORECASE)
_SPACES = re.compile(r"\s+")
#: A word a sentence cut before a request cannot end with ("… separately will").
_DANGLING = re.compile(r"\b(?:to|will|would|can|could|should|and|or|but|the|a|an|of|with"
                       r"|that|for|also|is|are|was|were|be|their|my|our|as|if)$", re.IGNORECASE)
#: Topic → words of a fact that put it under the topic.
TOPICS: dict[str, re.Pattern[str]] = {
    topic: re.compile(rf"\b(?:{words})\b", re.IGNORECASE) for topic, words in (
        ("pet", r"dogs?|cats?|pupp(?:y|ies)|kittens?|pets?|hamsters?|rabbits?|parrots?"
                r"|fish|horses?|guinea pigs?"),
        ("family", r"wife|husband|partner|sons?|daughters?|kids?|children|mom|mother|dad"
                   r"|father|parents?|sisters?|brothers?|siblings?|grand\w+|aunt|uncle"
                   r"|cousins?|niece|nephew|fianc[eé]e?|family"),
        ("name", r"name[sd]?|called|goes by"),
        ("home", r"live[sd]?|living|moved|based in|home|apartment|house|neighbou?rhood"),
        ("work", r"job|works?|worked|working|career|company|employer|engineer|manager"
                 r"|colleagues?|boss|office|promotion|salary|team"),
        ("food", r"eat|ate|food|cook(?:ing|ed)?|recipes?|vegan|vegetarian|allergic|diet"
                 r"|restaurants?|coffee|tea"),
        ("health", r"doctor|allerg\w+|medication|therapy|injur\w+|sick|diagnos\w+"
                   r"|workout|gym|exercise|running|yoga"),
        ("travel", r"trip|travel\w*|flight|visit(?:ed|ing)?|vacation|holiday|hotel"),
    )
}


def said_sentences(text: str) -> list[str]:
    """The sentences of a turn that may hold facts about its writer (see the module)."""
    return about_writer(text, sentences_of(text))


def sentences_of(text: str) -> list[str]:
    """A turn's sentences, its typographic apostrophes made plain."""
    return sal.split_sentences(text.replace("’", "'"))


def about_writer(text: str, sentences: list[str]) -> list[str]:
    """Of the ``sentences`` of ``text``, those that may be about its writer: all, or of
    a pasted document only the opening and closing ones."""
    if len(text) > PASTED_CHARS and len(sentences) > 2 * PASTED_EDGE:
        mine = sum(bool(_FIRST_PERSON.search(s)) for s in sentences)
        if mine < PASTED_SHARE * len(sentences):
            return sentences[:PASTED_EDGE] + sentences[-PASTED_EDGE:]
    return sentences


def statement_of(sentence: str) -> str | None:
    """``sentence`` as a statement about its speaker, or None (see the module)."""
    text = _SPACES.sub(" ", sentence).strip()
    if not text or _BRACKETED.match(text) or text.endswith("?") or sal.is_command(text):
        return None
    text = _LEAD_IN.sub("", text)
    if is_request(text):
        return None
    said = text
    text = _before_second_person(_REQUEST_TAIL.sub("", text)).strip(" ,;:-")
    if not MIN_FACT_CHARS <= len(text) <= MAX_FACT_CHARS or (
            text != said and _DANGLING.search(text)):
        return None
    if sal.is_filler(text):
        return None
    if not _INSTRUCTION.match(text) and (
            _CHATTER.search(text) or not _FIRST_PERSON.search(text)):
        return None
    if text[0].islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!")) else text + "."


def is_request(text: str) -> bool:
    """Whether ``text`` asks the assistant for something ("Give me …", "Can you …")."""
    return _ASK.match(text) is not None


def in_first_person(text: str) -> bool:
    """Whether ``text`` speaks of its speaker ("I", "my", "we", "our" …)."""
    return _FIRST_PERSON.search(text) is not None


def _before_second_person(text: str) -> str:
    """The clauses of ``text`` before the first that speaks to "you" (the assistant):
    what follows is about the conversation, not the speaker."""
    kept = ""
    position = 0
    for boundary in (*_CLAUSE.finditer(text), None):
        end = boundary.start() if boundary is not None else len(text)
        if _SECOND_PERSON.search(text, position, end):
            return kept
        kept = text[:end]
        position = boundary.end() if boundary is not None else end
    return kept


def topics(statement: str) -> tuple[str, ...]:
    """The topics of ``statement`` (keys of ``TOPICS``), in that order."""
    return tuple(topic for topic, pattern in TOPICS.items() if pattern.search(statement))
