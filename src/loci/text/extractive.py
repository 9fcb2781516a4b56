"""The offline default summarizer: a structured summary built from the events
themselves, with no language model.

Every sentence of the span (and every line of a previous summary) is scored by
:mod:`loci.text.salience` and filed under one section: Completed work, Current state,
In-progress tasks, Next steps, Constraints, Critical context, Decisions, Action items,
Insights, Preferences. Sentences are kept verbatim, so names,
numbers, ids, paths and dates survive exactly. The best-scoring sentences are taken
greedily until the token budget is spent, de-duplicated, then listed per section in
the order they were said. A previous summary is folded in with a bonus, so facts from
earlier compactions outlive newer small talk. Tool calls and their results become the
agent's trail (:mod:`loci.text.trail`: files, edits, errors, commands with their
outcome), listed first and merged with an earlier summary's trail; code blocks in
messages contribute a couple of salient lines each. The result is deterministic.

``ExtractiveSummarizer`` is compaction's ``Summarizer`` (``compaction/summarize.py``)
when no chat model is configured (``[llm] provider = "extractive"``, the default).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from loci.models import Event
from loci.text import salience as sal
from loci.text.trail import SECTIONS as TRAIL_SECTIONS
from loci.text.trail import Trail
from loci.text.transcript import Turn, turns_from_events
from loci.timeutil import day_label
from loci.tokens import token_counter

DEFAULT_MAX_TOKENS = 800
#: Score bonus for a line carried over from a previous summary (volatile sections less).
#: Score lost per token of an item, so a dense fact beats a wordy one of equal score.
COST_WEIGHT = 0.015
CARRY_BONUS = 1.0
CARRY_BONUS_VOLATILE = 0.3
_TOOL_CUE = re.compile(
    r"\b(?:error|errors|exception|failed|failures?|fatal|denied|refused|not found|no such"
    r"|warning|timed? ?out|passed|succeeded|success(?:ful(?:ly)?)?|exit (?:code|status)"
    r"|returned|created|wrote|written|saved|deleted|total|result|status)\b|[✓✗]",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(r"^\s*(?:\w+\.)*\w*(?:Error|Exception)\b|\b(?:error|failed|fatal)\b",
                         re.IGNORECASE)
_RESULT_LINE = re.compile(r"\b\d+ (?:passed|failed|errors?|warnings?|tests?|files?|items?"
                          r"|rows?|skipped)\b|\b(?:total|exit (?:code|status))\b", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_TOOL_NOISE = re.compile(r"^\s*(?:Traceback \(most recent call last\)|File \"|at \S+\(|\^+$)")
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|$)|~~~[^\n]*\n(.*?)(?:~~~|$)", re.DOTALL)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s*(?P<h>[^#].*?)\s*#*|(?P<c>[A-Z][\w -]{2,30}):)\s*$")
_SECTION_ALIASES = {s.lower(): s for s in sal.SECTIONS} | {
    "key facts": sal.FACTS, "important context": sal.CRITICAL,
    "state": sal.STATE, "in progress": sal.IN_PROGRESS, "next": sal.NEXT, "todo": sal.NEXT,
    "decisions made": sal.DECISIONS, "action items committed": sal.ACTIONS,
    "key insights": sal.INSIGHTS, "preferences revealed": sal.PREFERENCES,
}
_SPEAKERS = {"user": "User", "assistant": "Assistant"}
_TRAIL_SECTIONS = {name.lower(): name for name in TRAIL_SECTIONS}
#: The day an item of a summary was said, in front of the first item of that day.
_DAY = re.compile(r"^\[(\d{1,2} [A-Z][a-z]+ \d{4})\]\s*")
#: The speaker in front of a summary item ("Caroline: ...").
_SAID_BY = re.compile(r"^(?:-\s+)?(?:\[[^\]]*\]\s*)?([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s")
#: Of a summary's budget, at most this share goes to an agent's trail (loci.text.trail),
#: scaled by the share of the span's turns that are tool calls and results.
TRAIL_SHARE = 0.7
#: The text of this many of the span's last tool calls is read as prose.
THINKING_CALLS = 3
TRAIL_FLOOR = 0.25
#: Of a summary's budget beyond ``PROSE_FLOOR`` tokens, at most this share goes to
#: sentences. Sentences picked without a model are worth less per token the more of
#: them there are, and recall brings back the turns a question needs from the event log;
#: an agent's trail is not capped by it.
PROSE_SHARE = 0.4
PROSE_FLOOR = 500
MAX_TOOL_LINE = 240


@dataclass(frozen=True)
class _Unit:
    """A sentence (or, with a ``group``, a line of a code block) to score."""

    role: str
    text: str
    group: int | None
    speaker: str | None
    day: str


@dataclass(frozen=True)
class _Item:
    section: str
    text: str
    score: float
    order: int
    #: The day it was said ("8 May 2023"), when known.
    day: str = ""

    @property
    def key(self) -> str:
        return " ".join(sal.words(self.text))


class ExtractiveSummarizer:
    """Structured, extractive summaries under a token budget; no model, no network.
    Compaction's ``Summarizer`` (structurally: this package imports no domain)."""

    def __init__(
        self,
        *,
        counter: Callable[[str], int] | None = None,
        model: str = "gpt-4.1",
        tool_lines: int = 2,
        min_score: float = sal.MIN_SCORE,
    ) -> None:
        if counter is None:
            counter = token_counter(model).count
        self.count = counter
        self.tool_lines = tool_lines
        self.min_score = min_score

    def summarize(
        self,
        events: Sequence[Event],
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> str:
        """The summary body (no ``[CONTEXT SUMMARY]`` header) of ``events``; "" if none."""
        return self.summarize_turns(turns_from_events(events), previous_summary,
                                    instructions, max_tokens)

    def summarize_turns(
        self,
        turns: Sequence[Turn],
        previous_summary: str | None,
        instructions: str | None,
        max_tokens: int,
    ) -> str:
        """The summary of already-parsed turns; ``summary`` turns are folded in."""
        if max_tokens <= 0:
            return ""
        previous = [previous_summary or ""] + [t.text for t in turns if t.kind == "summary"]
        trail = Trail()
        items = [*self._carried("\n".join(previous), trail),
                 *self._fresh(turns, instructions, trail)]
        tooling = sum(t.kind in ("tool_call", "tool_result") for t in turns) / max(len(turns), 1)
        share = TRAIL_SHARE * max(tooling, TRAIL_FLOOR)
        kept = trail.render(int(max_tokens * share), self.count) if trail else ""
        spent = self.count(kept) + 2 if kept else 0
        prose_cap = max(PROSE_FLOOR, int(max_tokens * PROSE_SHARE))
        prose = self._fit(items, min(max_tokens - spent, prose_cap))
        return "\n\n".join(part for part in (kept, prose) if part)

    # -- candidates -------------------------------------------------------------------

    def _carried(self, summary: str, trail: Trail) -> list[_Item]:
        """Lines of earlier summaries, with their section and a carry-over bonus."""
        items: list[_Item] = []
        section: str | None = None
        trail_section: str | None = None
        day = ""
        lines = [line for line in summary.splitlines() if line.strip()]
        names = sal.known_names(lines)
        people = _participants(m.group(1) for m in map(_SAID_BY.match, lines) if m)
        order = -(1 << 40)  # before everything said in the span
        for line in lines:
            heading = _HEADING.match(line)
            if heading:
                name = (heading["h"] or heading["c"] or "").strip().lower()
                trail_section = _TRAIL_SECTIONS.get(name)
                if trail_section is not None:
                    continue
                if name in _SECTION_ALIASES:
                    section = _SECTION_ALIASES[name]
                    continue
                if heading["h"]:  # some other markdown heading: a title, not a fact
                    continue
            bulleted = line.lstrip().startswith(("- ", "* ", "• "))
            texts = [line.lstrip()[2:].strip()] if bulleted else sal.split_sentences(line)
            if trail_section is not None and trail.absorb(trail_section, line):
                continue
            for text in texts:
                dated = _DAY.match(text)
                if dated:
                    day, text = dated.group(1), text[dated.end():]
                said = _SAID_BY.match(text)
                scored = sal.score_sentence(text[said.end():] if said else text,
                                            role="summary", names=names, ignore=people)
                if scored.section is None:
                    continue
                home = section or scored.section
                bonus = CARRY_BONUS_VOLATILE if home in sal.VOLATILE else CARRY_BONUS
                score = scored.score + bonus
                if scored.score >= 0:  # an earlier fact is kept if the budget allows
                    score = max(score, self.min_score + 0.3)
                if score >= self.min_score:
                    order += 1
                    items.append(_Item(home, sal.clip(text), score, order, day))
        return items

    def _fresh(
        self, turns: Sequence[Turn], instructions: str | None, trail: Trail
    ) -> list[_Item]:
        """Scored sentences of the span's messages (and of the text an agent wrote with
        its tool calls), each with its speaker and day, and salient lines of their code;
        tool calls and their results go to the trail."""
        units: list[_Unit] = []
        # What an agent wrote with its calls is mostly "let me look at X": only its
        # latest words (its current hypothesis and next step) are kept.
        thinking = {n for n, t in enumerate(turns) if t.kind == "tool_call" and t.text.strip()}
        thinking = set(sorted(thinking)[-THINKING_CALLS:])
        for number, turn in enumerate(turns):
            day = day_label(turn.when) if turn.when else ""
            if turn.kind == "message":
                prose, code = _split_code(turn.text)
                units += [_Unit(turn.role, s, None, turn.speaker, day)
                          for s in sal.split_sentences(prose)]
                units += [_Unit(turn.role, line, number, None, day)
                          for line in _salient_lines(code)]
            elif turn.kind == "tool_result":
                trail.result(turn.text, turn.tool_name)
            elif turn.kind == "tool_call":
                trail.call(turn.tool_name, turn.args)
                if number in thinking:
                    units += [_Unit("assistant", s, None, None, day)
                              for s in sal.split_sentences(turn.text)]
        sentences = [unit for unit in units if unit.group is None]
        names = sal.known_names(unit.text for unit in sentences)
        rare = dict(zip(map(id, sentences), sal.rarity([unit.text for unit in sentences]),
                        strict=True))
        people = _participants(t.speaker for t in turns)
        shapes: dict[int, Counter[str]] = {}
        for unit in units:
            if unit.group is not None:
                shapes.setdefault(unit.group, Counter())[_shape(unit.text)] += 1
        focus = sal.content_words(instructions) if instructions else None
        items: list[_Item] = []
        outputs: dict[int, list[_Item]] = {}
        total = max(len(units) - 1, 1)
        for order, unit in enumerate(units):
            if unit.group is None:
                item = self._sentence(unit, order, total, names, focus, rare[id(unit)],
                                      people)
                if item is not None:
                    items.append(item)
                continue
            text = sal.clip(unit.text, MAX_TOOL_LINE)
            scored = sal.score_sentence(text, role="tool", names=names,
                                        recency=order / total, focus=focus)
            if scored.section is None:
                continue
            section, score = _tool_line(text, scored, shapes[unit.group])
            outputs.setdefault(unit.group, []).append(_Item(section, text, score, order))
        for group_items in outputs.values():
            best = sorted(group_items, key=lambda i: (-i.score, i.order))[: self.tool_lines]
            items += [i for i in best if i.score >= self.min_score]
        return items

    def _sentence(
        self, unit: _Unit, order: int, total: int, names: set[str],
        focus: set[str] | None, rarity: float, people: frozenset[str],
    ) -> _Item | None:
        """One sentence as a summary item, with who said it, or None below the bar."""
        text = sal.clip(unit.text)
        scored = sal.score_sentence(text, role=unit.role, names=names, recency=order / total,
                                    focus=focus, rarity=rarity, ignore=people)
        if scored.section is None or scored.score < self.min_score:
            return None
        text = sal.strip_discourse(text)
        if unit.speaker:
            text = f"{unit.speaker}: {text}"
        elif unit.role in _SPEAKERS and sal.needs_speaker(text):
            text = f"{_SPEAKERS[unit.role]}: {text}"
        return _Item(scored.section, text, scored.score, order, unit.day)

    # -- selection and rendering -------------------------------------------------------

    def _fit(self, items: list[_Item], budget: int) -> str:
        """The best items that fit ``budget`` tokens once rendered, de-duplicated."""
        chosen: list[_Item] = []
        keys: set[str] = set()
        word_sets: list[frozenset[str]] = []
        sections: set[str] = set()
        dated: set[str] = set()
        spent = 0
        costs = {id(i): self.count(f"- {i.text}") + 1 for i in items}
        # Best first; among near-equals, the shorter (denser) item.
        ranked = sorted(items, key=lambda i: (-(i.score - COST_WEIGHT * costs[id(i)]), i.order))
        for item in ranked:
            key = item.key
            if not key or key in keys:
                continue
            cost = costs[id(item)]
            if item.section not in sections:
                cost += self.count(f"## {item.section}") + 2
            if item.day and item.day not in dated:
                cost += self.count(f"[{item.day}] ")  # one per day, if said in one stretch
            if spent + cost > budget:
                continue  # before the near-duplicate scan: most items of a long span end here
            bag = frozenset(key.split())
            if any(_near(bag, other) for other in word_sets):
                continue
            spent += cost
            chosen.append(item)
            keys.add(key)
            word_sets.append(bag)
            sections.add(item.section)
            dated.add(item.day)
        text = _render(chosen)
        while chosen and self.count(text) > budget:
            chosen.remove(min(chosen, key=lambda i: (i.score, -i.order)))
            text = _render(chosen)
        return text


def _tool_line(text: str, scored: sal.Scored, shapes: Counter[str]) -> tuple[str, float]:
    """Section and score of one line of tool output (or of a code block).

    Errors beat result summaries ("3 failed, 117 passed"), which beat other result lines;
    a line whose shape (digits aside) repeats in the same output is bulk, not news.
    A note in plain language with a strong cue ("remember", "must") scores as prose.
    """
    section = scored.section or sal.STATE
    if not _TOOL_CUE.search(text):
        return section, scored.score
    if _ERROR_LINE.search(text):
        base = 2.0
    elif _RESULT_LINE.search(text):
        base = 1.7
    else:
        base = 1.3
    if section == sal.CRITICAL or base == 2.0:
        section = sal.STATE
    score = base + 0.3 * min(sal.specificity(text, set()), 1.0)
    if shapes[_shape(text)] >= 3:
        score -= 2.0
    return section, round(score, 4)


def _shape(line: str) -> str:
    return _DIGITS.sub("#", line.lower())


def _near(a: frozenset[str], b: frozenset[str]) -> bool:
    """Near-duplicates: one is contained in the other, or they share 80% of their words."""
    if min(len(a), len(b)) < 4:
        return a == b
    shared = len(a & b)
    return shared == min(len(a), len(b)) or shared / len(a | b) >= 0.8


def _render(items: Sequence[_Item]) -> str:
    """Sections in their order, items in the order they were said; the day in front of
    an item said on another day than the item above it."""
    blocks = []
    day = ""
    for section in sal.SECTIONS:
        lines = []
        for item in sorted((i for i in items if i.section == section), key=lambda i: i.order):
            dated = f"[{item.day}] " if item.day and item.day != day else ""
            day = item.day or day
            lines.append(f"- {dated}{item.text}")
        if lines:
            blocks.append(f"## {section}\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def _participants(speakers: Iterable[str | None]) -> frozenset[str]:
    """The names of the people talking and their first names: naming them is no news."""
    names: set[str] = set()
    for speaker in speakers:
        if speaker:
            names.add(speaker)
            names.update(speaker.split())
    return frozenset(names)


def _split_code(text: str) -> tuple[str, str]:
    """(prose, code) of a message: fenced blocks are read like tool output."""
    code = "\n".join((m.group(1) or m.group(2) or "") for m in _FENCE.finditer(text))
    return _FENCE.sub("\n", text), code


def _salient_lines(text: str, limit: int = 200) -> list[str]:
    """Short lines of tool output or code with a result/error cue or a strong cue."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not 4 <= len(line) <= 4 * MAX_TOOL_LINE or _TOOL_NOISE.match(line):
            continue
        head = line[:MAX_TOOL_LINE]
        if _TOOL_CUE.search(head) or sal.STRONG_CUE.search(head):
            lines.append(line)
            if len(lines) >= limit:
                break
    return lines
