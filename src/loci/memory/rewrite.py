"""A person's first-person sentence as a statement about them, or None.

"I'm planning to go shopping this weekend" → "The user is planning to go shopping this
weekend"; "My dog is called Biscuit" → "The user's dog is called Biscuit"; "Call me Mo"
→ "The user goes by Mo"; with a speaker's name, "Caroline's dog …". The sentence's
subject is its opening "I" or "my", after a short phrase if one comes first ("Last week,
the user …"); later pronouns become "they"/"their" with the verb agreeing ("I was" →
"they were", never "they was"), and so does a verb joined to the first ("lives in Lisbon
and deploys", "is a beginner and doesn't"); a later "we", "our", "us" (a group the
person is in) becomes "they", "their", "them". A sentence is rewritten only when every
change is one the rules are sure of: an opening verb they cannot conjugate ("I wases" is
no word), an opening "we", quoted speech (a quoted title is kept as it is) or a joined
word that may be a verb or a noun returns None, and the caller keeps the person's words,
attributed.
"""

from __future__ import annotations

import re

_ADVERBS = frozenset(
    "really strongly usually generally always never also often mostly rarely sometimes "
    "absolutely totally definitely just still mainly actually recently finally already "
    "currently now even only probably certainly".split())
_MODALS = frozenset("can could will would should must may might shall".split())
#: Opening verbs with their third-person form (the regular ones are conjugated below).
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "was": "was",
              "be": "is", "'m": "is", "'ve": "has", "'d": "would", "'ll": "will"}
#: Past forms that do not end in -ed: kept as they are.
_PAST = frozenset(
    "was were had did went took got made bought saw met ran began found gave won lost left "
    "came became brought thought told said sold sent spent paid put read wrote drove flew "
    "grew knew kept heard held built felt fell caught taught fought chose broke spoke woke "
    "wore tore swam sang rang drank ate forgot understood stood sat set let hit cut quit "
    "shut hurt cost led fed slept swept meant dealt lent bent sent rode hid shook threw "
    "drew stole froze bit hung lit dug struck stuck rose been seen done gone taken known "
    "given written eaten begun grown driven flown chosen spoken broken forgotten worn "
    "shown thrown drawn ridden hidden bitten fallen forgiven gotten sworn torn woken "
    "stolen frozen sung rung drunk swum".split())
#: Pronouns and verbs after the subject, rewritten in agreement with "they".
_LATER = (
    (r"\bI(?:'m| am)\b", "they're"),
    (r"\bI was\b", "they were"),
    (r"\bI've\b", "they've"),
    (r"\bI have\b", "they have"),
    (r"\bI'd\b", "they'd"),
    (r"\bI'll\b", "they'll"),
    (r"\bI\b", "they"),
    (r"\bmyself\b", "themselves"),
    (r"\bmine\b", "theirs"),
    (r"\bmy\b", "their"),
    (r"\bme\b", "them"),
    # "We" after the subject is a group the person is in: "they" too, the verb plural.
    (r"\b[Ww]e\b", "they"),
    (r"\bourselves\b", "themselves"),
    (r"\bours\b", "theirs"),
    (r"\b[Oo]ur\b", "their"),
    (r"\bus\b", "them"),
)
_LATER_RX = tuple((re.compile(p, re.IGNORECASE if p.startswith(r"\bm") else 0), r)
                  for p, r in _LATER)
#: Bare verbs common in what people say of themselves: after "and"/"or"/"but" in a
#: present-tense sentence they agree with the subject too ("lives … and deploys").
_COMMON_VERBS = frozenset(
    "live work deploy use run write read cook bake play watch teach study train walk "
    "drive ride swim code build ship test review manage lead own rent share travel visit "
    "spend save earn pay buy sell eat drink sleep wake practice practise volunteer help "
    "attend go come stay commute speak talk call text meet love like hate prefer enjoy "
    "need want plan hope try keep make take get give send host sing dance paint draw knit "
    "garden hike climb bike cycle jog lift coach mentor fix maintain handle "
    "support design develop edit publish post blog collect grow raise care".split())
#: Words that open what follows a verb: a coordinated word before one of them is a verb.
_AFTER_VERB = frozenset(
    "a an the my his her their our this that these those it them him me us you in on at "
    "to for with from by about into over every each some all as out up off around".split())
_COORDINATED = re.compile(r"\b(?P<joint>and|or|but)\s+(?P<verb>[a-z]+)\b(?P<next>\s+[a-z]+)?")
#: "Call me Mo": a name follows ("call me anytime" is no name).
_CALL_ME = re.compile(r"^(?:please\s+)?call me\s+(?=(?-i:[A-Z]))", re.IGNORECASE)
#: "I … and don't" shares the opening "I": "The user is a beginner and doesn't …".
_JOINED_DONT = re.compile(r"\b(and|but|or)\s+(?:don't|dont)\b")
_OPENING = re.compile(r"^(?:I(?P<contraction>'m|'ve|'d|'ll)|I|my|My)\b\s*")
_WORD = re.compile(r"[A-Za-z']+")
#: A quotation: a title ("The Great Gatsby") stays as it is; quoted speech, whose
#: pronouns are the quoted person's, cannot be rewritten.
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')
_QUOTE_MARK = re.compile(r'["“”]')
_PERSON = re.compile(r"\b(?:I|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Uu]s|[Oo]ur|[Yy]ou|[Yy]our)\b")
#: A short phrase before the opening "I" or "my" ("Last week, I …"): kept before the
#: subject.
_LEAD = re.compile(r"^(?P<lead>[^,]{1,40}),\s+(?=(?:I|I'm|I've|I'd|I'll|[Mm]y)\b)")


def third_person(sentence: str, subject: str = "The user") -> str | None:
    """``sentence`` (a person's first-person statement) about ``subject``, or None if
    the rules cannot make it grammatical."""
    text = sentence.strip().rstrip(".!…").strip()
    if (call := _CALL_ME.match(text)) is not None:
        name = text[call.end():]
        return None if _PERSON.search(name) else f"{subject} goes by {name}."
    lead = _LEAD.match(text)
    if lead is not None:
        if _PERSON.search(lead["lead"]):
            return None
        rest = third_person(text[lead.end():], subject)
        return rest and f"{lead['lead']}, {_lowered(rest, subject)}"
    opening = _OPENING.match(text)
    if opening is None or not _quotes_keep(text):
        return None
    rest = text[opening.end():]
    if opening.group().lower().startswith("my"):
        head = f"{_possessive(subject)} "
    else:
        verb_phrase = _subject_verb(opening.group("contraction"), rest)
        if verb_phrase is None:
            return None
        head, rest = f"{subject} {verb_phrase[0]}", _JOINED_DONT.sub(r"\1 doesn't",
                                                                    verb_phrase[1])
        if verb_phrase[2]:
            agreed = _coordinated_verbs(rest)
            if agreed is None:
                return None
            rest = agreed
    rest = later_pronouns(rest)
    return f"{head}{rest}".rstrip(" ,;:") + "."


def _quotes_keep(text: str) -> bool:
    """Whether the quotations of ``text`` are titles or names, with no person in them
    whose pronoun a rewrite would have to change, and every quote mark is closed."""
    if any(_PERSON.search(q) for q in _QUOTED.findall(text)):
        return False
    return not _QUOTE_MARK.search(_QUOTED.sub("", text))


def _lowered(rewritten: str, subject: str) -> str:
    """A rewrite that opened with ``subject``, to follow a phrase: "the user …"."""
    if subject[:1].isupper() and subject.split(" ", 1)[0] in ("The", "A"):
        return subject[0].lower() + rewritten[1:]
    return rewritten


def _possessive(subject: str) -> str:
    return f"{subject}'" if subject.endswith("s") else f"{subject}'s"


def _subject_verb(contraction: str | None, rest: str) -> tuple[str, str, bool] | None:
    """The opening verb phrase agreeing with a third-person subject, what follows, and
    whether the verb took a present-tense ending (so coordinated verbs must too)."""
    if contraction:
        lead = _IRREGULAR[contraction]
        if contraction == "'ve" and not _starts_with_past(rest):
            # "I've got a dog" is "has got"; "I've two kids" is rare and unsure.
            return None
        return lead + " ", rest, False
    words = rest.split(" ", 3)
    adverbs = []
    while words and words[0].lower() in _ADVERBS:
        adverbs.append(words.pop(0))
    if not words or not words[0]:
        return None
    verb, after = words[0], " ".join(words[1:])
    conjugated = conjugate(verb)
    if conjugated is None:
        return None
    phrase = " ".join([*adverbs, conjugated])
    present = conjugated.lower().endswith("s") and not verb.lower().endswith("s")
    return phrase + (" " if after else ""), after, present


def _coordinated_verbs(rest: str) -> str | None:
    """``rest`` with each verb joined to a present-tense opening verb agreeing ("and
    deploy on Fridays" → "and deploys on Fridays"), or None when a joined common verb
    may be a noun ("tea and cake", "pizza and work") and the rules cannot tell."""
    unsure = False

    def agree(match: re.Match[str]) -> str:
        nonlocal unsure
        verb, following = match["verb"], (match["next"] or "").strip()
        if verb not in _COMMON_VERBS:
            return match.group()
        if following not in _AFTER_VERB:
            unsure = True
            return match.group()
        return f"{match['joint']} {conjugate(verb)}{match['next']}"

    agreed = _COORDINATED.sub(agree, rest)
    return None if unsure else agreed


def _starts_with_past(rest: str) -> bool:
    first = rest.split(" ", 1)[0].lower()
    return first.endswith("ed") or first in _PAST or first in _ADVERBS


def conjugate(verb: str) -> str | None:
    """``verb`` as it follows "she" or "the user", or None if that is not clear."""
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in ("don't", "dont"):
        return "doesn't"
    if lower in ("didn't", "can't", "won't", "couldn't", "wouldn't", "haven't"):
        return {"haven't": "hasn't"}.get(lower, lower)
    if lower in _MODALS or lower in _PAST or (lower.endswith("ed")
                                              and not lower.endswith("eed")):
        return verb
    if not lower.isalpha() or len(lower) < 2:
        return None
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def later_pronouns(text: str) -> str:
    for pattern, replacement in _LATER_RX:
        text = pattern.sub(replacement, text)
    return text
