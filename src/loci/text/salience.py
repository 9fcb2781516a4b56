"""Sentence-level salience for the offline extractive summarizer.

A sentence earns points for what it says that is worth keeping after its turn is gone:

- **specific content** kept verbatim: dates and times, days said relative to the day
  they were said ("yesterday", "last Friday"), paths and URLs, e-mail addresses,
  identifiers (``ABC-123``, ``snake_case``, hashes, `code`), numbers and amounts, proper
  nouns (not the names of the people talking, nor a name someone is addressed by),
  quoted strings;
- **rare words** for the span it comes from, and **who did what** ("I adopted…",
  "Maya moved…") when that is concrete or rare;
- a **cue phrase** that also picks its section ("we decided" → Decisions, "must" →
  Constraints, "I prefer" → Preferences, "remember" → Critical context, "fixed" →
  Completed work, "next" → Next steps, ...; first match in :data:`CUES` wins; none:
  Facts). A cue counts only as far as the sentence says something, unless it asks
  explicitly to be remembered: "Agreed!", "that must have been fun" and "so important"
  are no news;
- who said it (the user's own statements weigh a little more) and a little recency.

It loses points for questions, hedges, reactions and generic remarks about nobody in
particular, and very short fragments; greetings, thanks and small talk are dropped
outright. Everything here is pure and deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

COMPLETED = "Completed work"
STATE = "Current state"
IN_PROGRESS = "In-progress tasks"
NEXT = "Next steps"
CONSTRAINTS = "Constraints"
CRITICAL = "Critical context"
DECISIONS = "Decisions"
ACTIONS = "Action items"
INSIGHTS = "Insights"
PREFERENCES = "Preferences"
#: What was said without a cue: events, possessions, relationships, numbers, names.
FACTS = "Facts"
#: Sections in the order the summary lists them (the work, then the conversation, then facts).
SECTIONS = (COMPLETED, STATE, IN_PROGRESS, NEXT, CONSTRAINTS, CRITICAL, DECISIONS,
            ACTIONS, INSIGHTS, PREFERENCES, FACTS)
#: Sections that describe a moment (a newer statement supersedes an older one).
VOLATILE = frozenset({STATE, IN_PROGRESS, NEXT})
#: A sentence needs at least this score to enter a summary at all.
MIN_SCORE = 1.0
#: Points for a sentence whose words are rare in the span (rarity 1).
RARITY_WEIGHT = 0.5
#: A cue counts for at most this much more than the sentence's information, unless it
#: asks explicitly to be remembered (weight ``EXPLICIT_CUE``).
CUE_MARGIN = 1.0
EXPLICIT_CUE = 2.5
#: A sentence this rare (or more) in its span says something new.
RARE = 0.5
#: Sentences a span needs before rarity counts fully.
RARITY_SPAN = 100
#: Points for a sentence that says who did (or will do) what.
AGENCY_WEIGHT = 0.5


def _rx(pattern: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile(pattern, flags)


#: (section, weight, pattern) in priority order: the first match picks the section.
CUES: tuple[tuple[str, float, re.Pattern[str]], ...] = (
    (CRITICAL, 2.5, _rx(r"\b(?:remember|don'?t forget|do not forget|keep in mind|note that"
                        r"|for the record|fyi|must not lose)\b")),
    (CRITICAL, 2.0, _rx(r"\b(?:password|passphrase|passcode|api key|access key|secret|token"
                        r"|credentials?|pin|(?:door|access|entry|gate|locker) code"
                        r"|account (?:id|number)"
                        r"|(?:id|number|code|key) is)\b")),
    (DECISIONS, 2.2, _rx(r"\b(?:decided|decision|agreed|chose|chosen|settled on|opted (?:for|to)"
                         r"|go(?:ing)? with|went with|stick(?:ing)? with|we'?ll use|let'?s use"
                         r"|final call|approved)\b")),
    (PREFERENCES, 2.2, _rx(r"\b(?:i|we|you|he|she|they)\s+(?:really\s+|strongly\s+|generally\s+"
                           r"|usually\s+|always\s+)?(?:prefer|like|love|hate|dislike|enjoy"
                           r"|can'?t stand)\b|\b(?:prefers|likes|loves|hates|dislikes)\b"
                           r"|\bfavou?rite\b|\b(?:i'?d|would) rather\b|\bpreference\b")),
    # "Must" that guesses ("that must have been fun") and "always"/"never" inside a
    # sentence ("I'll never forget it") are not rules.
    (CONSTRAINTS, 2.0, _rx(r"\bmust\b(?!\s+(?:have|'ve|feel|be\s+(?:so|really|very|such|quite"
                           r"|pretty|a|an)\b))|^(?:please\s+)?(?:never|always)\b"
                           r"|\bshould (?:always|never)\b"
                           r"|\b(?:mustn'?t|required?|requirement|mandatory"
                           r"|not allowed|forbidden|prohibited|only (?:use|allowed)|deadline"
                           r"|due (?:by|on)|no later than|at most|at least|limit(?:ed)? to"
                           r"|maximum|minimum|(?:cannot|can'?t) (?:be|use|exceed|access|touch)"
                           r"|compliance)\b|^(?:please\s+)?(?:don'?t|do not|avoid)\b")),
    (CONSTRAINTS, 1.4, _rx(r"^(?:please\s+)?(?:use|make sure|ensure|keep|stick to|only|store"
                           r"|set|switch to|stop|start using|put|send|call)\b")),
    (ACTIONS, 1.8, _rx(r"\baction items?\b|\bassigned to\b|\bowner\b|\bremind me\b"
                       r"|\bfollow(?:s|ing)?[- ]up\b|\b(?:i'll|i will|we'll|we will)\b")),
    (ACTIONS, 1.8, _rx(r"\b[A-Z][a-z]+ (?:will|is going to|has to|needs to|agreed to|owns)\b", 0)),
    (NEXT, 1.6, _rx(r"\b(?:next|then we|tomorrow|todo|to-do|plan(?:ning|s)? to|going to|gonna"
                    r"|later today|upcoming|after that|need to|needs to|should|has to"
                    r"|have to|remaining steps?)\b")),
    (IN_PROGRESS, 1.6, _rx(r"\b(?:working on|in progress|currently (?:working|doing|fixing"
                           r"|writing|building|running|migrating|testing)|wip|halfway|started"
                           r"|underway|ongoing|still (?:working|fixing|waiting|running)"
                           r"|in the middle of|partially)\b")),
    (COMPLETED, 1.6, _rx(r"\b(?:done|fixed|finished|completed?|implemented|merged|deployed"
                         r"|shipped|resolved|released|landed|migrated|set up|configured|installed"
                         r"|created|added|wrote|updated|upgraded|removed|refactored|passed"
                         r"|works now|succeeded|booked|paid|signed)\b")),
    (INSIGHTS, 1.6, _rx(r"\b(?:turns? out|turned out|learned|learnt|realized|realised|root cause"
                        r"|found (?:out )?that|the (?:issue|problem|bug|cause) (?:was|is)|because"
                        r"|lesson|insight|discovered|noticed|caused by|the trick is)\b")),
    (STATE, 1.3, _rx(r"\b(?:currently|right now|at the moment|status|is now|are now|as of|so far"
                     r"|remaining|blocked|failing|broken|is down|is up|running on|stands at)\b")),
    (CRITICAL, 1.0, _rx(r"\b(?:important(?:ly)?|critical|crucial)\b")),
    (CRITICAL, 1.0, _rx(r"\b(?:my name is|call me|i live|i work|i'?m based|stored (?:in|at)"
                        r"|located|lives (?:in|at|on)|is called|is named|address|phone"
                        r"|e-?mail|port|host|server|database|branch|repo(?:sitory)?|endpoint"
                        r"|url|birthday|anniversary|flight|appointment|meeting|reservation"
                        r"|scheduled|budget|price|cost|allergic)\b")),
    (CRITICAL, 0.8, _rx(r"\bmy (?:\w+ ){1,2}(?:is|are|was)\b")),
)

#: One pattern for the strong cues (weight 2 or more), for quick screening of tool output.
STRONG_CUE = re.compile(
    "|".join(f"(?:{p.pattern})" for _, w, p in CUES if w >= 2.0), re.IGNORECASE
)

_MONTHS = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
           r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATE = _rx(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2})?\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
            rf"|\b{_MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?\b"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS}\b"
            r"|\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b"
            r"|\b\d{1,2}:\d{2}\b|\b\d{1,2} ?(?:am|pm)\b|\bq[1-4] \d{4}\b")
#: When something happened, said relative to the day it was said.
_WHEN = _rx(r"\b(?:yesterday|tomorrow|tonight|(?:last|next|this) (?:week|weekend|month|year"
            r"|night|summer|winter|spring|fall|\w+day)|(?:\d+|a|an|one|two|three|four|five|a few"
            r"|several) (?:days?|weeks?|months?|years?) ago|since \d{4})\b")
_PATH = _rx(r"https?://\S+|~/\S+|\b[\w.-]+(?:/[\w.-]+)+/?|\b[\w-]+\.(?:py|js|ts|tsx|md|json"
            r"|ya?ml|toml|txt|sh|go|rs|sql|csv|env|conf|cfg|ini|html|css|lock|log|pdf)\b")
_EMAIL = _rx(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b")
_IDENT = re.compile(r"`[^`]{2,80}`|\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{3,}\b"
                    r"|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z]\w+\b|\b[A-Z]{2,}-\d+\b")
_NUMBER = re.compile(r"[$€£]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:%|k|m|ms|s|gb|mb|kb|usd|eur)?\b",
                     re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"]{2,80}\"|“[^”]{2,80}”")
_CAPITAL = re.compile(r"\b[A-Z][\w'’-]*[a-z0-9][\w'’-]*|\b[A-Z]{2,}[0-9]*\b")
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_PRONOUN = _rx(r"\b(?:i|i'm|i'll|i've|i'd|me|my|mine|we|we're|we'll|we've|our|us|you|your)\b")
_QUESTION_START = _rx(r"^(?:what|why|how|when|where|who|which|can|could|would|should|do|does"
                      r"|did|is|are|will|shall)\b")
_HEDGE = _rx(r"\b(?:maybe|perhaps|i think|i guess|not sure|probably|might|kind of|sort of)\b")
_DISCOURSE = _rx(r"^(?:(?:oh|so|and|but|also|anyway|btw|by the way|well|ok(?:ay)?|alright"
                 r"|hey|oh and|one more thing|quick note)\b[\s,.:;!-]*)+")
#: Words that small talk is made of; a sentence of nothing else is filler.
_FILLER_WORDS = frozenset(
    "hi hello hey heya yo good morning afternoon evening night thanks thank thx ty cheers "
    "you you're youre welcome no problem worries np sure thing ok okay k great awesome cool "
    "nice perfect sounds sound got it gotcha understood of course absolutely definitely yes "
    "yeah yep yup nope lol haha hahaha hah wow oh ah hmm right bye goodbye see later soon "
    "take care have a an the day weekend how are is was doing it's going i'm im fine not bad "
    "back happy to help glad could hope this that helps let me know feel free anything else "
    "any other questions rush my pleasure will do on sorry bad fair enough makes sense "
    "interesting point idea question and but so also well then too again all for with very "
    "really much lot indeed today now here there great job work excellent amazing super "
    "wonderful love lovely brilliant fantastic appreciate appreciated much far thing things "
    "sounds stuff agree agreed totally exactly true".split()
)
_STOP = frozenset(
    "a an the and or but if then so to of in on at by for with from as is are was were be "
    "been being it its this that these those there here i you he she we they me my our "
    "your their his her them us do does did done have has had not no yes can could would "
    "should will shall may might must just very really also too about into over under "
    "what which who whom when where why how all any some each more most other such only "
    "own same than now up down out off again once summary summarize summarise conversation "
    "following include including focus keep facts key important format concise context "
    "history messages message details detail information thing things sure look okay great "
    "good nice well stuff pretty quite lot bit i'll i've i'm i'd we'll we've we're we'd "
    "you'll you've you're you'd they're they've it's that's there's what's let's never "
    "always ever".split()
)
_COMMON_CAPS = frozenset(
    "I I'm I'll I've I'd OK Okay Ok Mr Mrs Ms Dr Sir Yes No The A An It This That We You "
    "He She They My Our Your Hi Hello Hey Thanks Sure User Assistant Tool Monday Tuesday "
    "Wednesday Thursday Friday Saturday Sunday January February March April May June July "
    "August September October November December There Here What Which Who Why How When "
    "Where Everything Nothing Something Someone Everyone Nobody Anyone Each Every Some Any "
    "All Both Also Then Now Just So But And Or If Please Let Maybe Actually Anyway".split()
)
#: A capitalised first word followed by one of these verbs is most likely a name.
_NAME_SUBJECT = re.compile(
    r"^([A-Z][a-z]+)(?:['’]s)? (?:prefers|likes|loves|hates|lives|works|wants|needs|said|says"
    r"|asked|owns|leads|joined|moved|is allergic|was born|turns)\b"
)
MAX_SPECIFICITY = 3.5
#: Someone (I, we, my sister, a name) did, does or will do something: who did what.
_AGENCY = re.compile(
    r"\b(?:I|I'm|I've|I'll|we|we're|we've|we'll|[Mm]y \w+|[Oo]ur \w+|[A-Z][a-z]+)\s+"
    r"(?:just\s+|finally\s+|recently\s+|also\s+|already\s+|actually\s+)?"
    r"(?:\w{3,}ed|went|took|got|made|bought|saw|met|ran|began|found|gave|won|lost|left|"
    r"moved|joined|adopted|visited|tried|finished|applied|signed|started|read|wrote|"
    r"am going to|'m going to|going to|will|plan(?:ning)? to|have|has|had|own|live|work"
    r"|teach|study|play)\b")
#: Reactions to what the other person said ("That's so cool!", "You're so brave").
_REACTION = _rx(r"^(?:you|your|you'?re|you'?ve|that|that'?s|it|it'?s|this|what an?|how|wow"
                r"|aww?|so|such|congrats|congratulations)\b")
_FIRST_PERSON = _rx(r"\b(?:i|i'm|i've|i'll|i'd|me|my|we|we're|we've|our|us)\b")
#: A name at either end of a sentence, set off by a comma: said to someone, not about them.
_VOCATIVE_END = re.compile(r",\s*[A-Z][a-z]+\s*[.!?…]*$")
_VOCATIVE_START = re.compile(r"^(?:\w+\s+)?[A-Z][a-z]+,\s*")
_ABBREVIATIONS = frozenset("e.g i.e etc vs mr mrs ms dr st no approx fig inc ltd jr sr".split())
_SPLIT = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9`~/])")
_BULLET = re.compile(r"^\s*(?:[-*•>+]|\d{1,2}[.)]|#{1,6})\s+")

MAX_ITEM_CHARS = 400


@dataclass(frozen=True)
class Scored:
    """A sentence's section and score (``None`` section: filler, never kept)."""

    section: str | None
    score: float


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: one per line, lines split at sentence ends; bullets removed."""
    sentences: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        pieces = _SPLIT.split(line)
        merged: list[str] = []
        for piece in pieces:
            last_word = merged[-1].rsplit(" ", 1)[-1].rstrip(".").lower() if merged else ""
            if merged and (last_word in _ABBREVIATIONS or len(last_word) == 1):
                merged[-1] += " " + piece
            else:
                merged.append(piece)
        sentences.extend(p.strip() for p in merged if p.strip())
    return sentences


def is_filler(sentence: str) -> bool:
    """Greetings, thanks, acknowledgements and pleasantries with nothing else in them."""
    return all(word in _FILLER_WORDS for word in words(sentence))


def strip_discourse(sentence: str) -> str:
    """``sentence`` without leading discourse markers ("Oh by the way, ", "Also, ")."""
    stripped = _DISCOURSE.sub("", sentence)
    return stripped if len(words(stripped)) >= 3 else sentence


def rarity(sentences: Sequence[str]) -> list[float]:
    """How rare each sentence's content words are among ``sentences``, 0 to 1: the mean
    inverse document frequency of its two rarest words (a word in one sentence of a
    thousand weighs 1, a word in every sentence 0)."""
    bags = [content_words(s) for s in sentences]
    frequency = Counter(w for bag in bags for w in bag)
    scale = math.log(max(len(bags), 2))
    # In a short span every word is rare: rarity says little until there are many.
    trust = min(len(bags) / RARITY_SPAN, 1.0)
    out = []
    for bag in bags:
        weights = sorted((math.log(len(bags) / frequency[w]) / scale for w in bag),
                         reverse=True)[:2]
        out.append(trust * min(sum(weights) / 2, 1.0) if weights else 0.0)
    return out


def without_vocatives(sentence: str) -> str:
    """``sentence`` without the name it is addressed to ("Thanks, Mel!" → "Thanks")."""
    return _VOCATIVE_START.sub("", _VOCATIVE_END.sub("", sentence))


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    """Lower-cased words of four letters or more that are not stop words."""
    return {w for w in words(text) if len(w) >= 4 and w not in _STOP}


def known_names(sentences: Iterable[str]) -> set[str]:
    """Capitalised words seen mid-sentence: names, products, places (not "I", "OK")."""
    names: set[str] = set()
    for sentence in sentences:
        for match in _CAPITAL.finditer(sentence):
            if match.start() > 0 and sentence[match.start() - 2: match.start()] not in (". ", ": "):
                name = _strip_possessive(match.group())
                if name not in _COMMON_CAPS:
                    names.add(name)
    return names


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


def specificity(sentence: str, names: set[str],
                ignore: frozenset[str] = frozenset()) -> float:
    """Points for concrete content: dates, paths, ids, numbers, names, quotes. Names in
    ``ignore`` (the people talking) and names someone is addressed by do not count."""
    score = 0.0
    sentence = without_vocatives(sentence)
    rest = sentence
    if _DATE.search(rest):
        score += 1.5
        rest = _DATE.sub(" ", rest)
    if _WHEN.search(rest):
        score += 1.0
    if _EMAIL.search(rest):
        score += 1.5
        rest = _EMAIL.sub(" ", rest)
    if _PATH.search(rest):
        score += 1.5
        rest = _PATH.sub(" ", rest)
    idents = {m.group() for m in _IDENT.finditer(rest)}
    if idents:
        score += 1.0 + (0.5 if len(idents) > 1 else 0.0)
        rest = _IDENT.sub(" ", rest)
    if _NUMBER.search(rest):
        score += 1.0
    if _QUOTED.search(sentence):
        score += 0.5
    proper = 0
    subject = _NAME_SUBJECT.match(sentence)
    if subject and subject.group(1) not in _COMMON_CAPS and subject.group(1) not in names:
        proper += 1
    for match in _CAPITAL.finditer(sentence):
        name = _strip_possessive(match.group())
        if name in _COMMON_CAPS or name in ignore:
            continue
        mid = match.start() > 0
        if mid or name in names or match.group() != name:
            proper += 1
    return min(score + min(proper, 3) * 0.5, MAX_SPECIFICITY)


def classify(sentence: str) -> tuple[str, float]:
    """The section of the first cue that matches, and its weight (Facts, 0 if none)."""
    for section, weight, pattern in CUES:
        if pattern.search(sentence):
            return section, weight
    return FACTS, 0.0


#: A line that is a shell command someone typed, not something said about the world.
_COMMAND_LINE = re.compile(
    r"^(?:\$\s*|[\w.-]+@[\w.-]+(?:\s+\S+)?\s*[%$#]\s*)?(?:sudo\s+)?(?:cd|ls|cat|less|git|npm|npx|yarn|pnpm|pip3?|python3?|node"
    r"|make|rm|cp|mv|mkdir|touch|echo|curl|wget|grep|rg|find|docker|kubectl|ssh|scp|export"
    r"|source|chmod|chown|brew|apt(?:-get)?|cargo|go|uv|pytest|ruff|tail|head|~?/[\w./-]+)"
    r"(?:\s+[-\w./~:=@'\"*]+)*\s*$")


def is_command(sentence: str) -> bool:
    """Whether ``sentence`` is a shell command someone typed (not a fact to keep)."""
    return _COMMAND_LINE.match(sentence) is not None


def score_sentence(
    sentence: str,
    *,
    role: str,
    names: set[str],
    recency: float = 0.0,
    focus: set[str] | None = None,
    rarity: float = 0.0,
    ignore: frozenset[str] = frozenset(),
) -> Scored:
    """Section and salience of one sentence said by ``role`` ("user", "assistant", ...).

    ``recency`` is the sentence's position in the span, 0 (oldest) to 1 (newest);
    ``focus`` holds words from the caller's instructions that earn a small bonus;
    ``rarity`` is how rare its words are in the span (0 to 1); names in ``ignore``
    (the people talking) are not specific content.
    """
    text = sentence.strip()
    if not text or is_filler(without_vocatives(text)) or is_command(text):
        return Scored(None, 0.0)
    section, cue = classify(text)
    specific = specificity(text, names, ignore)
    agency = bool(_AGENCY.search(text))
    # Who did what counts when what they did is concrete or rare in the span.
    did = agency and (specific > 0 or rarity >= RARE)
    information = specific + RARITY_WEIGHT * rarity + (AGENCY_WEIGHT if did else 0.0)
    if cue < EXPLICIT_CUE:
        # A cue word with little behind it ("Agreed!", "so important") is not news.
        cue = min(cue, information + CUE_MARGIN)
    score = cue + information
    n_words = len(words(text))
    if specific == 0 and not _FIRST_PERSON.search(text) and (
            _REACTION.match(text) or not agency):
        score -= 0.6  # a reaction or a generic remark, about nobody in particular
    if specific == 0 and len(content_words(text)) < 3:
        score -= 1.0  # vague: "I'll keep that in mind", "we should look into it"
    if text.endswith("?") or (_QUESTION_START.match(text) and not text.endswith(".")):
        score -= 1.0
    if _HEDGE.search(text):
        score -= 0.3
    if specific == 0 and text.endswith("!"):
        score -= 0.4
    if n_words < 4:
        score -= 0.7
    elif n_words > 60:
        score -= 0.5
    score += {"user": 0.3, "assistant": -0.1, "tool": -0.5}.get(role, 0.0)
    if focus:
        score += min(len(content_words(text) & focus), 3) * 0.25
    weight = 0.6 if section in VOLATILE else 0.3
    return Scored(section, round(score + weight * recency, 4))


def clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters (marked with …)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def needs_speaker(sentence: str) -> bool:
    """Whether a sentence says "I", "we" or "you" and so needs its speaker to make sense."""
    return bool(_PRONOUN.search(sentence))
