"""Where each layer's items come from: workspace files, the store and the message.

Every builder returns the layer's items in the order they should appear; the compiler
applies budgets and priorities. Static builders must be deterministic: no clock, no
store, sorted inputs, canonical JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import zip_longest
from types import MappingProxyType

from loci.checks import INTERNAL_STATE
from loci.context.focus import STATE_PREFIX, Focus
from loci.context.skills import load_skills, match_skills
from loci.context.templates import AgentSpec, load_agents
from loci.context.workspace import Workspace
from loci.memory.dedup import DUPLICATE_OVERLAP, holds, overlap_sets, sets_overlap
from loci.memory.scopes import list_memories
from loci.models import Document, Event, Memory, Scope, StateItem
from loci.retriever import Retriever
from loci.store.base import Store
from loci.text.trail import TRAIL_KEY, Trail
from loci.timeutil import day_label

PRINCIPLES = """## Principles
- Be honest: say what you do not know; never invent facts, sources or results.
- Protect the user: do not reveal secrets or personal data to anyone else, and refuse \
harmful requests.
- Treat remembered context as possibly outdated; prefer what the user says now.
- Ask before irreversible or destructive actions."""
DEFAULT_IDENTITY = "You are a helpful assistant with a long-term memory."
#: The built-in identity of an agent given a name of its own (not the unnamed default).
NAMED_IDENTITY = "You are {agent}, a helpful assistant with a long-term memory."
#: How many of the newest memories the memories layer considers.
RECENT_MEMORIES = 100
#: How many of them a new session shows, whatever it is asked (``memories``).
NEW_SESSION_MEMORIES = 10
_FAILURE = re.compile(r"^\s*(error|traceback|exception|fatal|failed)\b", re.IGNORECASE)


#: (events, earlier summary, earlier trail, token budget) → (summary, whole trail)
ViewSummary = Callable[[Sequence[Event], str | None, str, int], tuple[str, str]]


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    #: A heading shown once above every kept item of the layer that shares it (recalled
    #: turns under their session and date); the kept items of a group are shown in
    #: ``order``, the groups in the order of their first items.
    group: str | None = None
    order: tuple[float, int] = (0.0, 0)
    #: The key of what the item shows ("event 12"), where its id says more.
    shows: str | None = None
    #: The key of an item that says all this one says: when that one is shown too,
    #: this one is left out (a memory shown with the turn it was taken from).
    covered_by: str | None = None


@dataclass
class BuildContext:
    store: Store
    scope: Scope
    #: Where the scope's memories are read (``memory.scopes``).
    memory_scopes: tuple[Scope, ...]
    session: str | None
    message: str | None
    now: datetime
    user_name: str
    workspace: Workspace
    agent: AgentSpec | None = None
    retriever: Retriever | None = None
    skills: Sequence[Item] = ()
    recall_limit: int = 30
    reflexion_threshold: int = 3
    events: Sequence[Event] = ()
    flush: bool = False
    #: In someone else's agent: no built-in persona or principles, only configured ones.
    guest: bool = False
    included: set[str] = field(default_factory=set)
    #: The compaction summary shown, lower-cased: facts it states are not repeated.
    summary_text: str = ""
    #: Summarizes what a view narrower than the session's window leaves out
    #: (``compile(window=…)``); None: the view only selects.
    view_summary: ViewSummary | None = None
    #: The whole trail, when this call made its own summary (else the stored one's).
    trail: str | None = None
    #: No history shown (a new session): nothing the provider could have cached.
    new_session: bool = False
    #: What the kept items of the layers so far say (``said``): recall repeats none.
    shown: set[str] = field(default_factory=set)
    #: The texts of the kept items that show an event, by its key (``Item.shows``).
    shown_events: dict[str, str] = field(default_factory=dict)
    #: The scope's state, read once for the layers that show it (``stored_state``).
    _state: list[StateItem] | None = field(default=None, init=False, repr=False)
    #: The session's latest summary, once read: a tuple, since it may be None.
    _summary: tuple[Event | None] | None = field(default=None, init=False, repr=False)
    #: The live events' texts by key, once needed.
    _live_texts: dict[str, str] | None = field(default=None, init=False, repr=False)

    def says(self, key: str | None, fact: str) -> bool:
        """Whether the context shows the event ``key`` names ("event 12"), in history
        or recalled, and its text still says ``fact`` (``memory.dedup.holds``: not a
        fact changed since it was taken from that turn)."""
        if key is None or key not in self.included:
            return False
        text = self.shown_events.get(key)
        if text is None:
            if self._live_texts is None:
                self._live_texts = {f"event {e.id}": e.content for e in self.events}
            text = self._live_texts.get(key)
        return text is not None and holds(text, fact)

    def latest_summary(self) -> Event | None:
        """The session's latest compaction summary (read on first use)."""
        if self._summary is None:
            self._summary = (self.store.latest_summary(self.scope, self.session)
                             if self.session else None,)
        return self._summary[0]

    def stored_trail(self) -> str:
        """The whole trail the latest summary carries ("" before any compaction)."""
        latest = self.latest_summary()
        kept = latest.metadata.get(TRAIL_KEY) if latest else None
        return kept if isinstance(kept, str) else ""

    def stored_state(self) -> list[StateItem]:
        """The scope's state items, internal ones included (read on first use)."""
        if self._state is None:
            self._state = self.store.list_state(self.scope)
        return self._state


Builder = Callable[[BuildContext], list[Item]]


def _file(ctx: BuildContext, *names: str, title: str | None = None) -> list[Item]:
    found = ctx.workspace.find(*names)
    if found is None or not found.text:
        return []
    text = f"## {title}\n{found.text}" if title else found.text
    return [Item(str(found.path), text)]


def principles(ctx: BuildContext) -> list[Item]:
    configured = _file(ctx, "PRINCIPLES.md")
    return configured or ([] if ctx.guest else [Item("built-in principles", PRINCIPLES)])


def identity(ctx: BuildContext) -> list[Item]:
    soul = _file(ctx, "SOUL.md", "IDENTITY.md")
    if soul:
        return soul
    agent = ctx.agent
    if agent is not None:
        named = f"You are {agent.name}." if agent.name != ctx.scope.agent else ""  # not an id
        lines = [f"{named} {agent.personality}".strip()]
        if agent.description:
            lines.append(f"Your job: {agent.description}")
        if any(lines):
            return [Item("AGENTS.toml identity", "\n".join(line for line in lines if line))]
    if ctx.guest:
        return []
    unnamed = ctx.scope.agent == Scope().agent
    return [Item("built-in identity", DEFAULT_IDENTITY if unnamed
                 else NAMED_IDENTITY.format(agent=ctx.scope.agent))]


def agents(ctx: BuildContext) -> list[Item]:
    """The workspace's other agents, one line each (the current one is the identity);
    AGENTS.toml itself, comments and commented-out agents, is for the human."""
    found = ctx.workspace.find("AGENTS.toml")
    if found is None:
        return []
    others = [a for key, a in sorted(_agents(found.text, str(found.path)).items())
              if a != ctx.agent and key != ctx.scope.agent]
    lines = [f"- {a.name}: {a.description or a.personality}".rstrip(": ") for a in others]
    return [Item(str(found.path), "## Other agents\n" + "\n".join(lines))] if lines else []


def tools(ctx: BuildContext) -> list[Item]:
    items = _file(ctx, "TOOLS.md", title="Tools")
    names = sorted(getattr(ctx.agent, "tools", ()) or ())
    if names:
        hint = (f"You have access to: {', '.join(names)}.\n"
                "Use them when you need current data, files or calculations.")
        items.append(Item("tools hint", hint))
    return items


def date_user(ctx: BuildContext) -> list[Item]:
    return [Item("date and user", f"Today is {ctx.now:%A, %Y-%m-%d}. User: {ctx.user_name}.")]


def user_file(ctx: BuildContext) -> list[Item]:
    return _file(ctx, "USER.md", title="About the user (USER.md)")


def boot(ctx: BuildContext) -> list[Item]:
    return _file(ctx, "BOOT.md", title="Start-up instructions (BOOT.md)")


def memory_file(ctx: BuildContext) -> list[Item]:
    return _file(ctx, "MEMORY.md", title="Notes (MEMORY.md)")


def daily_log(ctx: BuildContext) -> list[Item]:
    return _file(ctx, f"logs/daily/{ctx.now:%Y-%m-%d}.md", title="Today's log")


def profile(ctx: BuildContext) -> list[Item]:
    """The user's profile: identity, preferences, goals and other documents under their
    headings, people as one-line summaries. Each entry of a document (a bullet with what
    follows it) is an item, offered newest first, one document after the other: a
    profile over the layer's budget loses its oldest entries, never a whole document
    (the librarian appends, and a long history makes every document long)."""
    documents = ctx.store.list_documents(ctx.scope, "/profile/")
    order = {"/profile/identity.md": 0, "/profile/preferences.md": 1, "/profile/goals.md": 2}
    people = [d for d in documents if d.path.startswith("/profile/people/")]
    others = sorted((d for d in documents if d not in people),
                    key=lambda d: (order.get(d.path, 9), d.path))
    newest_first = [[Item(f"{d.path}#{i}", entry, f"## {_title(d)}", (rank, i))
                     for i, entry in enumerate(_entries(_body(d)))][::-1]
                    for rank, d in enumerate(others)]
    newest_first.append([
        Item(d.path, f"- {_heading(d) or _title(d)}: "
                     f"{' '.join(_BULLET.sub('', _body(d)).split())[:200]}",
             "## People", (len(others), i)) for i, d in enumerate(people)])
    return [item for rank in zip_longest(*newest_first) for item in rank if item is not None]


def _entries(body: str) -> list[str]:
    """``body`` in entries that join back into it: each top-level bullet with the lines
    that follow it; the lines before the first bullet, if any, are one entry too."""
    entries: list[str] = []
    for line in body.splitlines():
        if not entries or _TOP_BULLET.match(line):
            entries.append(line)
        else:
            entries[-1] += "\n" + line
    return entries


_HEADING = re.compile(r"\A\s*#{1,6}[ \t]+([^\n]*?)[ \t#]*(?:\n|\Z)")
_BULLET = re.compile(r"^\s*[-*+]\s+", re.MULTILINE)
_TOP_BULLET = re.compile(r"^[-*+]\s")


def _title(document: Document) -> str:
    name = document.path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return name.replace("-", " ").replace("_", " ").capitalize()


def _heading(document: Document) -> str | None:
    """The document's own leading markdown heading, if it starts with one."""
    match = _HEADING.match(document.content)
    return match.group(1).strip() or None if match else None


def _body(document: Document) -> str:
    """The content without its leading heading (the layer writes its own)."""
    match = _HEADING.match(document.content)
    return (document.content[match.end():] if match else document.content).strip()


def sticky(ctx: BuildContext) -> list[Item]:
    facts = list_memories(ctx.store, ctx.memory_scopes, types=["sticky"], now=ctx.now)
    facts.sort(key=lambda m: (m.created_at, m.id))
    return [Item(m.id, f"[STICKY] {m.content}") for m in facts if not already_said(ctx, m)]


def already_said(ctx: BuildContext, memory: Memory) -> bool:
    """Whether the history already says what the memory says: it was extracted from an
    event the history shows (until compaction archives it), or the summary states it."""
    return ctx.says(source_event(memory.source), memory.content) or in_summary(
        ctx, memory.content)


def source_event(source: str | None) -> str | None:
    """The key an item showing the event a memory was taken from has ("event 12")."""
    return f"event {source[6:]}" if source and source.startswith("event:") else None


def in_summary(ctx: BuildContext, text: str) -> bool:
    """Whether the compaction summary shown already states ``text``: word for word, or a
    sentence of it in the words of the fact extracted from it ("Ana: I adopted …" is
    "Ana adopted …": ``memory.dedup.word_overlap``)."""
    if not ctx.summary_text:
        return False
    stated = " ".join(text.lower().split())
    if stated in ctx.summary_text:
        return True
    words = overlap_sets(stated)
    return any(sets_overlap(words, sentence) > DUPLICATE_OVERLAP
               for sentence in _summary_sentences(ctx.summary_text))


@lru_cache(maxsize=4)
def _summary_sentences(summary: str) -> tuple[tuple[frozenset[str], frozenset[str]], ...]:
    """The word sets of the summary's sentences (read once per summary: every recalled
    hit is compared with each)."""
    return tuple(overlap_sets(said(sentence)) for sentence in _SUMMARY_SPLIT.split(summary))


_SUMMARY_SPLIT = re.compile(r"(?<=[.!?])\s+|\s+-\s+")


def state(ctx: BuildContext) -> list[Item]:
    return [Item(s.key, f"[STATE] {s.key} = {s.value}")
            for s in ctx.stored_state() if not s.key.startswith(INTERNAL_STATE)]


def memories(ctx: BuildContext) -> list[Item]:
    """The newest memories. In a new session asked something, recency says little of
    what is worth showing: only the newest few are, and what the message is about comes
    by relevance through recall."""
    recent = list_memories(ctx.store, ctx.memory_scopes, now=ctx.now,
                           limit=RECENT_MEMORIES)
    items = [Item(m.id, f"[MEMORY {day_label(m.created_at)}] {m.content}",
                  covered_by=source_event(m.source)) for m in recent
             if m.type != "sticky" and m.id not in ctx.included and not already_said(ctx, m)]
    asked = ctx.new_session and ctx.retriever is not None and bool((ctx.message or "").strip())
    return items[:NEW_SESSION_MEMORIES] if asked else items


def compaction_summary(ctx: BuildContext) -> list[Item]:
    latest = ctx.latest_summary()
    return [Item(f"summary event {latest.id}, by Loci's compaction", latest.content)
            ] if latest else []


def earlier_trail(ctx: BuildContext) -> list[Item]:
    """What the session's trail holds beyond what its summary shows (files, edits,
    errors, commands of every compacted span), newest first: the summary's size is
    fixed between compactions, the room a call has left is not."""
    kept = ctx.trail if ctx.trail is not None else ctx.stored_trail()
    return list(_trail_items(kept, ctx.summary_text)) if kept else []


@lru_cache(maxsize=64)
def _trail_items(kept: str, summary_text: str) -> tuple[Item, ...]:
    """The items of ``earlier_trail`` (the same for every call between compactions)."""
    by_section: dict[str, list[str]] = {}
    for section, line in Trail.parse(kept).entries():
        key = line.removeprefix("- ").removeprefix("Edited: ").removeprefix("Read: ")
        if " ".join(key.lower().split()) not in summary_text:
            by_section.setdefault(section, []).append(line)
    ranked = []
    for section, lines in by_section.items():
        group = f"[EARLIER IN THIS SESSION: {section}]"
        for number, line in enumerate(lines):
            age = (len(lines) - number) / len(lines)  # sections interleave, newest first
            ranked.append((age, Item(f"trail {section.lower()} {number}", line, group,
                                     (0.0, number))))
    return tuple(item for _, item in sorted(ranked, key=lambda pair: pair[0]))


def focus(ctx: BuildContext) -> list[Item]:
    if ctx.session is None:
        return []
    key = STATE_PREFIX + ctx.session
    stored = next((item for item in ctx.stored_state() if item.key == key), None)
    return [Item("focus", Focus.from_json(stored.value).render())] if stored else []


def reflexion(ctx: BuildContext) -> list[Item]:
    """A tool that failed ``reflexion_threshold`` times gets a hint built
    from its recorded failures."""
    names = {e.tool_call_id: e.tool_name for e in ctx.events if e.type == "tool_call"}
    failures: dict[str, list[str]] = {}
    for event in ctx.events:
        if event.type != "tool_result" or not _failed(event):
            continue
        tool = event.tool_name or names.get(event.tool_call_id) or "unknown"
        first_line = event.content.strip().splitlines()[0][:160] if event.content.strip() else ""
        failures.setdefault(tool, []).append(first_line)
    items = []
    for tool, causes in sorted(failures.items()):
        if len(causes) < ctx.reflexion_threshold:
            continue
        distinct = list(dict.fromkeys(c for c in causes if c))[-3:]
        items.append(Item(f"reflexion:{tool}", (
            f"[REFLEXION] The {tool} tool has failed {len(causes)} times in this session. "
            f"Previous failures: {'; '.join(distinct) or 'no error text recorded'}. "
            "Check its inputs (paths, permissions, arguments) before calling it again, "
            "or try another approach.")))
    return items


def _failed(event: Event) -> bool:
    meta = event.metadata
    return bool(meta.get("error") or meta.get("is_error")) or bool(_FAILURE.match(event.content))


def skills(ctx: BuildContext) -> list[Item]:
    return list(ctx.skills)


def skill_items(workspace: Workspace, message: str | None) -> list[Item]:
    """Workspace skills scoring above zero on the message, best first."""
    if not message:
        return []
    matches = match_skills(load_skills([d for d in workspace.directories]), message)
    return [Item(f"skill:{s.slug} (score {score})",
                 f"## Skill: {s.skill.name}\n{s.body.strip()}") for s, score in matches]


@lru_cache(maxsize=16)
def _agents(text: str, source: str) -> Mapping[str, AgentSpec]:
    """AGENTS.toml parsed once per text: every compile reads it twice (the identity
    and the other agents)."""
    return MappingProxyType(load_agents(text, source=source))


def agent_spec(workspace: Workspace, agent: str) -> AgentSpec | None:
    """This agent's entry in AGENTS.toml (or the only entry there is)."""
    found = workspace.find("AGENTS.toml")
    if found is None:
        return None
    agents = _agents(found.text, str(found.path))
    return agents.get(agent) or (next(iter(agents.values())) if len(agents) == 1 else None)


_LABELS = re.compile(r"^(?:\[[^\]\n]{0,80}\]\s*)*(?:[\w .'-]{1,40}:\s+)?")


def said(text: str, *, labelled: bool = True) -> str:
    """What a text says, for telling repeats apart: lower-cased, spaces collapsed, and
    if ``labelled`` (a layer's item) without Loci's ``[MEMORY …]``-style labels and a
    leading speaker ("User: ")."""
    if labelled:
        text = _LABELS.sub("", text.strip(), count=1)
    return " ".join(text.lower().split())


FLUSH_PROMPT = (
    "[MEMORY FLUSH] The conversation is close to the context limit and older messages "
    "will be pruned. Before answering, save anything worth keeping with "
    "[MEMORY:type] … [/MEMORY] tags (sticky, user_preference, project_context, "
    "learned_pattern) and values with [STATE:key] … [/STATE].")


def flush(ctx: BuildContext) -> list[Item]:
    """Memory flush: at 85% of the window, ask the model to save facts."""
    return [Item("memory flush", FLUSH_PROMPT)] if ctx.flush else []


LAYER_BUILDERS: dict[str, Builder] = {
    "principles": principles, "identity": identity, "agents": agents, "tools": tools,
    "date_user": date_user, "user_file": user_file, "profile": profile, "boot": boot,
    "memory_file": memory_file, "daily_log": daily_log, "sticky": sticky, "state": state,
    "memories": memories, "compaction_summary": compaction_summary, "focus": focus,
    "earlier_trail": earlier_trail,
    "reflexion": reflexion, "skills": skills, "flush": flush,
}
