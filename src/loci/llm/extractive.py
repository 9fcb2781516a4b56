"""The offline default summarizer: a structured summary built from the events
themselves, with no language model.

Every sentence of the span (and every line of a previous summary) is scored by
:mod:`loci.llm.salience` and filed under one section: Completed work, Current state,
In-progress tasks, Next steps, Constraints, Critical context, Decisions, Action items,
Insights, Preferences (seeds/003 and seeds/004). Sentences are kept verbatim, so names,
numbers, ids, paths and dates survive exactly. The best-scoring sentences are taken
greedily until the token budget is spent, de-duplicated, then listed per section in
the order they were said. A previous summary is folded in with a bonus, so facts from
earlier compactions outlive newer small talk. Tool calls and their results become the
agent's trail (:mod:`loci.llm.trail`: files, edits, errors, commands with their
outcome), listed first and merged with an earlier summary's trail; code blocks in
messages contribute a couple of salient lines each. The result is deterministic.

``ExtractiveSummarizer`` is also a :class:`~loci.llm.base.ChatModel`: given the
messages of a summarization prompt it reads the conversation from them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loci.llm import salience as sal
from loci.llm._transcript import Turn, turns_from_events, turns_from_messages
from loci.llm.base import ChatReply
from loci.llm.trail import SECTIONS as TRAIL_SECTIONS
from loci.llm.trail import Trail
from loci.models import Event
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
    "key facts": sal.CRITICAL, "facts": sal.CRITICAL, "important context": sal.CRITICAL,
    "state": sal.STATE, "in progress": sal.IN_PROGRESS, "next": sal.NEXT, "todo": sal.NEXT,
    "decisions made": sal.DECISIONS, "action items committed": sal.ACTIONS,
    "key insights": sal.INSIGHTS, "preferences revealed": sal.PREFERENCES,
}
_SPEAKERS = {"user": "User", "assistant": "Assistant"}
_TRAIL_SECTIONS = {name.lower(): name for name in TRAIL_SECTIONS}
#: Of a summary's budget, at most this share goes to an agent's trail (loci.llm.trail),
#: scaled by the share of the span's turns that are tool calls and results.
TRAIL_SHARE = 0.7
#: The text of this many of the span's last tool calls is read as prose.
THINKING_CALLS = 3
TRAIL_FLOOR = 0.25
MAX_TOOL_LINE = 240


@dataclass(frozen=True)
class _Item:
    section: str
    text: str
    score: float
    order: int

    @property
    def key(self) -> str:
        return " ".join(sal.words(self.text))


class ExtractiveSummarizer:
    """Structured, extractive summaries under a token budget; no model, no network."""

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        counter: Callable[[str], int] | None = None,
        model: str = "gpt-4.1",
        tool_lines: int = 2,
        min_score: float = sal.MIN_SCORE,
    ) -> None:
        if counter is None:
            counter = token_counter(model).count
        self.name = "extractive"
        self.max_tokens = max_tokens
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

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None
    ) -> ChatReply:
        """Summarize the conversation found in ``messages`` (a summarization prompt).

        System messages are the instructions (their words steer scoring a little) unless
        they hold a previous summary; the conversation may be separate messages or one
        transcript of ``user:``/``assistant:``/``tool:`` lines. ``max_tokens`` is the budget.
        """
        turns, instructions = turns_from_messages(messages)
        budget = self.max_tokens if max_tokens is None else max_tokens
        text = self.summarize_turns(turns, None, "\n".join(instructions) or None, budget)
        seen = sum(self.count(t.text) for t in turns)
        return ChatReply(text, self.name, seen, self.count(text))

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
        prose = self._fit(items, max_tokens - spent)
        return "\n\n".join(part for part in (kept, prose) if part)

    # -- candidates -------------------------------------------------------------------

    def _carried(self, summary: str, trail: Trail) -> list[_Item]:
        """Lines of earlier summaries, with their section and a carry-over bonus."""
        items: list[_Item] = []
        section: str | None = None
        trail_section: str | None = None
        lines = [line for line in summary.splitlines() if line.strip()]
        names = sal.known_names(lines)
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
                scored = sal.score_sentence(text, role="summary", names=names)
                if scored.section is None:
                    continue
                home = section or scored.section
                bonus = CARRY_BONUS_VOLATILE if home in sal.VOLATILE else CARRY_BONUS
                score = scored.score + bonus
                if scored.score >= 0:  # an earlier fact is kept if the budget allows
                    score = max(score, self.min_score + 0.3)
                if score >= self.min_score:
                    order += 1
                    items.append(_Item(home, sal.clip(text), score, order))
        return items

    def _fresh(
        self, turns: Sequence[Turn], instructions: str | None, trail: Trail
    ) -> list[_Item]:
        """Scored sentences of the span's messages (and of the text an agent wrote with
        its tool calls) and salient lines of their code; tool calls and their results
        go to the trail."""
        units: list[tuple[str, str, int | None]] = []  # role, text, code block
        # What an agent wrote with its calls is mostly "let me look at X": only its
        # latest words (its current hypothesis and next step) are kept.
        thinking = {n for n, t in enumerate(turns) if t.kind == "tool_call" and t.text.strip()}
        thinking = set(sorted(thinking)[-THINKING_CALLS:])
        for number, turn in enumerate(turns):
            if turn.kind == "message":
                prose, code = _split_code(turn.text)
                units += [(turn.role, s, None) for s in sal.split_sentences(prose)]
                units += [(turn.role, line, number) for line in _salient_lines(code)]
            elif turn.kind == "tool_result":
                trail.result(turn.text, turn.tool_name)
            elif turn.kind == "tool_call":
                trail.call(turn.tool_name, turn.args)
                if number in thinking:
                    units += [("assistant", s, None) for s in sal.split_sentences(turn.text)]
        names = sal.known_names(text for _, text, group in units if group is None)
        shapes: dict[int, Counter[str]] = {}
        for _, text, group in units:
            if group is not None:
                shapes.setdefault(group, Counter())[_shape(text)] += 1
        focus = sal.content_words(instructions) if instructions else None
        items: list[_Item] = []
        outputs: dict[int, list[_Item]] = {}
        total = max(len(units) - 1, 1)
        for order, (role, raw, group) in enumerate(units):
            text = sal.clip(raw, sal.MAX_ITEM_CHARS if group is None else MAX_TOOL_LINE)
            scored = sal.score_sentence(text, role=role if group is None else "tool",
                                        names=names, recency=order / total, focus=focus)
            if scored.section is None:
                continue
            if group is None:
                if scored.score >= self.min_score:
                    speaker = _SPEAKERS.get(role)
                    text = sal.strip_discourse(text)
                    prefix = f"{speaker}: " if speaker and sal.needs_speaker(text) else ""
                    items.append(_Item(scored.section, prefix + text, scored.score, order))
                continue
            section, score = _tool_line(text, scored, shapes[group])
            outputs.setdefault(group, []).append(_Item(section, text, score, order))
        for group_items in outputs.values():
            best = sorted(group_items, key=lambda i: (-i.score, i.order))[: self.tool_lines]
            items += [i for i in best if i.score >= self.min_score]
        return items

    # -- selection and rendering -------------------------------------------------------

    def _fit(self, items: list[_Item], budget: int) -> str:
        """The best items that fit ``budget`` tokens once rendered, de-duplicated."""
        chosen: list[_Item] = []
        keys: set[str] = set()
        word_sets: list[frozenset[str]] = []
        sections: set[str] = set()
        spent = 0
        costs = {id(i): self.count(f"- {i.text}") + 1 for i in items}
        # Best first; among near-equals, the shorter (denser) item.
        ranked = sorted(items, key=lambda i: (-(i.score - COST_WEIGHT * costs[id(i)]), i.order))
        for item in ranked:
            key = item.key
            bag = frozenset(key.split())
            if not key or key in keys or any(_near(bag, other) for other in word_sets):
                continue
            cost = costs[id(item)]
            if item.section not in sections:
                cost += self.count(f"## {item.section}") + 2
            if spent + cost > budget:
                continue
            spent += cost
            chosen.append(item)
            keys.add(key)
            word_sets.append(bag)
            sections.add(item.section)
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
    blocks = []
    for section in sal.SECTIONS:
        lines = [f"- {i.text}" for i in sorted(items, key=lambda i: i.order)
                 if i.section == section]
        if lines:
            blocks.append(f"## {section}\n" + "\n".join(lines))
    return "\n\n".join(blocks)


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
