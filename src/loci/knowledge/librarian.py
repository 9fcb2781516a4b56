"""The librarian: when a
session ends it files what matters into the knowledge base.

1. Findings (decisions, action items, insights, preferences, goals, identity, people)
   come from the configured chat model, or offline from rules
   (:mod:`loci.knowledge.extraction`), each with an importance in [0, 1].
2. ``/conversations/YYYY-MM-<slug>.md`` gets a readable record with one section per
   kind; ending the same session again writes the next version of the same document.
3. The user's own statements update ``/profile/preferences.md``, ``goals.md``,
   ``identity.md`` and ``people/<name>.md``: new lines are appended in the third person
   (only those a rewrite is sure of: the profile is shown in every context),
   existing lines are never dropped, and a line that says what one already says (70%
   word overlap) is not added again.
4. The session is consolidated into typed memories (``Loci.extract_memories``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from loci.errors import LociError
from loci.knowledge.extraction import (
    Finding,
    llm_findings,
    rule_findings,
    session_importance,
)
from loci.knowledge.paths import slugify
from loci.knowledge.service import MAX_DOCUMENT_CHARS, KnowledgeBase
from loci.llm.base import ChatModel
from loci.memory.dedup import DUPLICATE_OVERLAP, word_overlap
from loci.memory.facts import in_first_person
from loci.memory.rewrite import third_person
from loci.memory.service import SaveResult
from loci.models import Document, Event
from loci.text import salience as sal

log = logging.getLogger("loci.librarian")
CONVERSATIONS = "/conversations/"
#: kind → (section heading in the conversation record, profile document or None)
SECTIONS: dict[str, tuple[str, str | None]] = {
    "decision": ("Decisions", None),
    "action": ("Action items", None),
    "insight": ("Insights", None),
    "preference": ("Preferences", "/profile/preferences.md"),
    "goal": ("Goals", "/profile/goals.md"),
    "identity": ("About the user", "/profile/identity.md"),
    "person": ("People", None),
}
PROFILE_TITLES = {"/profile/preferences.md": "Preferences", "/profile/goals.md": "Goals",
                  "/profile/identity.md": "Identity"}
#: Findings less important than this do not change the profile.
MIN_PROFILE_IMPORTANCE = 0.3
Consolidate = Callable[[Sequence[Event]], list[SaveResult]]


@dataclass(frozen=True)
class SessionKnowledge:
    """What ``end_session`` filed, and where."""

    session: str
    path: str | None
    title: str
    importance: float
    method: str
    findings: tuple[Finding, ...]
    #: profile document → lines appended to it
    profile: dict[str, list[str]] = field(default_factory=dict)
    memories: tuple[SaveResult, ...] = ()


class Librarian:
    """Files a finished session into the knowledge base and memory."""

    def __init__(self, kb: KnowledgeBase, chat: ChatModel | None, consolidate: Consolidate
                 ) -> None:
        self.kb, self.chat, self.consolidate = kb, chat, consolidate

    def end_session(self, session: str, events: Sequence[Event]) -> SessionKnowledge:
        title, findings, method = self._extract(events)
        title = title or _keyword_title(events) or session
        importance = session_importance(findings)
        path = None
        if findings:
            path = self._conversation_path(session, events, title)
            self.kb.put(path, render_conversation(title, session, events, findings,
                                                  importance, method),
                        tags=("conversation", *sorted({f.kind for f in findings})),
                        metadata={"session": session, "title": title, "importance": importance,
                                  "extracted_by": method})
        profile = self._update_profile(findings)
        memories = tuple(self.consolidate(events))
        return SessionKnowledge(session, path, title, importance, method, tuple(findings),
                                profile, memories)

    def _extract(self, events: Sequence[Event]) -> tuple[str | None, list[Finding], str]:
        if self.chat is not None:
            try:
                title, found = llm_findings(self.chat, events)
                if found:
                    return title, found, self.chat.name
            except LociError as exc:
                log.warning("librarian fell back to rules: %s", exc)
        return None, rule_findings(events), "rules"

    def _conversation_path(self, session: str, events: Sequence[Event], title: str) -> str:
        existing = self.kb.ls(CONVERSATIONS)
        for document in existing:
            if records(document, session):
                return document.path
        taken = {d.path for d in existing}
        stem = f"{CONVERSATIONS}{events[0].timestamp:%Y-%m}-{slugify(title, max_chars=50)}"
        path, n = f"{stem}.md", 2
        while path in taken:
            path, n = f"{stem}-{n}.md", n + 1
        return path

    def _update_profile(self, findings: Sequence[Finding]) -> dict[str, list[str]]:
        wanted: dict[str, tuple[str, list[str]]] = {}
        for f in findings:
            if f.importance < MIN_PROFILE_IMPORTANCE:
                continue
            if f.kind == "person" and f.person:
                if (line := profile_line(f.text)) is None:
                    continue
                target = f"/profile/people/{slugify(f.person)}.md"
                lines = wanted.setdefault(target, (f.person, []))[1]
                if f.relation:
                    lines.append(f"Relationship: {f.relation}")
                lines.append(line)
            elif (doc := SECTIONS[f.kind][1]) is not None and (
                    line := profile_line(f.text)) is not None:
                wanted.setdefault(doc, (PROFILE_TITLES[doc], []))[1].append(line)
        changed = {}
        for path, (heading, lines) in wanted.items():
            added = self._append_lines(path, heading, lines)
            if added:
                changed[path] = added
        return changed

    def _append_lines(self, path: str, heading: str, lines: Sequence[str]) -> list[str]:
        """Append the ``lines`` not already said to the bullet list of ``path``."""
        document = self.kb.find(path)
        content = document.content.rstrip() if document else f"# {heading}"
        present = [line[2:] for line in content.splitlines() if line.startswith("- ")]
        added: list[str] = []
        for line in lines:
            if not any(word_overlap(line, old) >= DUPLICATE_OVERLAP
                       for old in (*present, *added)):
                added.append(line)
        if not added:
            return []
        last = content.splitlines()[-1] if content else ""
        joiner = "\n" if last.startswith("- ") else "\n\n"
        new = content + joiner + "\n".join(f"- {line}" for line in added) + "\n"
        if len(new) > MAX_DOCUMENT_CHARS:  # a full document: the rest is still filed
            log.warning("%s is full (%d characters): %d profile lines not added", path,
                        len(content), len(added))
            return []
        if document is None:
            self.kb.put(path, new, tags=("profile",), metadata={"source": "librarian"})
        else:
            self.kb.put(path, new)
        return added


def render_conversation(
    title: str, session: str, events: Sequence[Event], findings: Sequence[Finding],
    importance: float, method: str,
) -> str:
    """The markdown record of a conversation: facts first, then one section per kind."""
    messages = [e for e in events if e.type == "message"]
    roles = {e.id: e.role for e in events}
    lines = [
        f"# {title}", "",
        f"- Session: {session}",
        f"- When: {_when(events[0].timestamp)} – {_when(events[-1].timestamp)}",
        f"- Messages: {len(messages)}",
        f"- Importance: {importance:.2f}",
        f"- Extracted by: {method}",
    ]
    for kind, (heading, _) in SECTIONS.items():
        items = [f for f in findings if f.kind == kind]
        if not items:
            continue
        lines += ["", f"## {heading}"]
        for f in items:
            text = f.text
            role = roles.get(f.event_id) if f.event_id is not None else None
            if kind == "person" and f.person:
                text = f"{f.person} ({f.relation}): {text}" if f.relation else f"{f.person}: {text}"
            elif role and sal.needs_speaker(text):
                text = f"{role.capitalize()}: {text}"
            lines.append(f"- [ ] {text}" if kind == "action" else f"- {text}")
    return "\n".join(lines) + "\n"


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _keyword_title(events: Sequence[Event]) -> str:
    """A title from the user's most frequent content words (ties: first said)."""
    counts: dict[str, int] = {}
    for event in events:
        if event.type == "message" and event.role == "user":
            for word in sal.words(event.content):
                if word in sal.content_words(word) and not word.isdigit():
                    counts[word] = counts.get(word, 0) + 1
    top = sorted(counts, key=lambda w: -counts[w])[:3]
    return " ".join(top).capitalize()


def profile_line(text: str) -> str | None:
    """A finding's text as a line of the user's profile: a first-person statement in
    the third person, or None when no rewrite is sure (their memories keep their words,
    attributed; the profile, shown in every context, only clean lines); a text with no
    one in it ("Please keep answers short", a chat model's "The user …") as it is."""
    return third_person(text) if in_first_person(text) else text


def records(document: Document, session: str) -> bool:
    """Whether ``document`` is the librarian's record of ``session``: under
    ``/conversations/``, written with its session and extraction method (a user's own
    document whose front matter names a session is not)."""
    return (document.path.startswith(CONVERSATIONS) and "extracted_by" in document.metadata
            and document.metadata.get("session") == session)
