"""Workspace templates for ``loci init``, SOUL.md from answers for
``loci soul``, and parsing of AGENTS.toml.

The files of the cacheable static prefix (``STATIC_FILES``: SOUL.md, AGENTS.toml,
TOOLS.md) hold nothing request-specific and no timestamps, so their bytes, and the
provider's prompt cache, stay the same from one call to the next. Comments in the
markdown templates are short HTML comments: they are sent to the model too, so they
say only what a reader needs.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loci.errors import ValidationError

STATIC_FILES = ("SOUL.md", "AGENTS.toml", "TOOLS.md")


def soul_from_answers(
    name: str, role: str, style: str, values: Sequence[str], boundaries: Sequence[str]
) -> str:
    """SOUL.md from the answers of ``loci soul``: who the agent is, how it talks, what it
    values and what it will not do. Deterministic: the same answers give the same bytes."""
    name = " ".join(name.split())
    if not name:
        raise ValidationError("the agent needs a name, e.g. 'Ada'")
    role = " ".join(role.split()).rstrip(".")
    lines = ["# Soul", "", f"You are {name}, {role}." if role else f"You are {name}."]
    style = " ".join(style.split())
    if style:
        lines.append(style if style[-1] in ".!?" else f"{style}.")
    for title, items in (("You value:", values), ("Boundaries:", boundaries)):
        cleaned = [" ".join(i.split()).lstrip("-*• ").strip() for i in items]
        if any(cleaned):
            lines += ["", title, *(f"- {item}" for item in cleaned if item)]
    return "\n".join(lines) + "\n"


_SOUL = """<!-- SOUL.md: who the agent is (identity, style, values, boundaries). Always loaded
first, in the cached static prefix: keep it free of dates and per-request details. Edit
it, or answer a few questions with `loci soul`. -->
""" + soul_from_answers(
    "Assistant",
    "a helpful assistant with a long-term memory",
    "You communicate clearly and concisely, and answer first, then explain. You prefer "
    "concrete examples over abstract explanations. When you are unsure, you say so "
    "rather than guessing.",
    ["Correctness over speed", "Simple solutions over clever ones",
     "The user's time and attention"],
    ["Ask before anything irreversible or destructive.",
     "Never reveal secrets or personal data to anyone else."],
)

_AGENTS = """\
# AGENTS.toml: the agents of this workspace. Always loaded, in the cached static prefix:
# keep it stable. One [agents.<id>] table per agent; `--agent <id>` selects one.
#   name        what the agent calls itself
#   personality how it behaves (one or two sentences)
#   description what it is for; also used to route messages to it
#   tools       tool names it may use, e.g. ["web_search", "http_fetch"]
#   routes      keywords that route a message to this agent

[agents.default]
name = "Assistant"
personality = "Friendly, concise and precise."
description = "General help: questions, writing, planning and code."
tools = []
routes = []

# [agents.researcher]
# name = "Researcher"
# personality = "Thorough and skeptical; checks claims and cites sources."
# description = "Finds, compares and summarizes information."
# tools = ["web_search", "http_fetch"]
# routes = ["research", "sources", "look up"]
"""

_USER = """\
<!-- USER.md: about the person the agent works with. Loaded into every prompt, in the
dynamic context. Fill in what helps; delete lines you do not need. -->
# User

- Name:
- Role:
- Timezone:
- Preferences (length of answers, formats, languages):
"""

_TOOLS = """\
<!-- TOOLS.md: how the agent should use its tools. Always loaded, in the cached static
prefix: keep it stable. The tool list itself comes from AGENTS.toml. -->
# Tools

- Use a tool rather than guess when you need current data, files or calculations.
- Say which tool an answer relies on when it matters.
- If a tool fails twice, stop and explain what went wrong instead of retrying blindly.
"""

_BOOT = """\
<!-- BOOT.md: start-up instructions for every session. Loaded into every prompt, in the
dynamic context. -->
# Boot

- Greet the user by name when you know it.
- Check MEMORY.md and today's log for open tasks before starting something new.
"""

_MEMORY = """\
<!-- MEMORY.md: notes that persist across sessions, written by you or the agent. Loaded
into every prompt, in the dynamic context: keep it short and current. Facts the agent
saves with [MEMORY:type] tags live in Loci's store, not here. -->
# Memory
"""

_DAILY = """\
# Daily logs

One markdown file per day, named `YYYY-MM-DD.md` (for example `2026-01-15.md`), written
by you or the agent: what happened, decisions, open tasks.

Only today's file is loaded into the prompt (dynamic context, under its token budget);
earlier days stay here for you to read. This README is never loaded.
"""

_EXAMPLE_SKILL = """\
---
# A skill is injected into the prompt only when a message scores above zero:
# score = keywords found (whole words, any case) + patterns matching (regex, any case).
# Only the body below the closing '---' is sent to the model.
slug: example            # unique id; a skill with the same slug in ./skills wins
name: Writing skills
description: How to write a Loci skill file.
priority: 0              # optional: breaks ties between skills with equal scores
triggers:
  keywords: [skill file, new skill, front matter]
  patterns: ["(write|create|add) an? skill"]
---
# Writing a Loci skill
A skill is a markdown file in `skills/` that starts with YAML front matter between two
`---` lines: `slug`, `name` and `triggers` (`keywords` and `patterns`). The body is
added to the prompt when the user's message matches a trigger.
- Keywords match whole words or phrases, in any case.
- Patterns are regular expressions; keep them short and simple.
- Keep the body short: a checklist or the steps of one task.
"""

_SETTINGS = """\
# loci.toml: settings of Loci for this workspace. Every setting is commented out and
# shows its default; uncomment a line to change it. LOCI_* environment variables
# (e.g. LOCI_MODEL) override this file, and command-line flags override both.

# store = ""                   # empty: sqlite:///$LOCI_HOME/loci.db; or postgresql://...
# user = "default"             # whose memories these are (the tenant)
# user_name = ""               # how the context names the user (empty: the user id)
# agent = "default"            # which agent (an [agents.<id>] in AGENTS.toml)
# model = "gpt-4.1"            # sets the context window and the tokenizer
# tokenizer = "auto"           # "auto", "heuristic" or an encoding such as "cl100k_base"
# memory_mirror = true         # mirror each memory to memory/<id>.md
# recall_limit = 30            # turns recall weighs for each message (floor and budget decide)
# reflexion_threshold = 3      # failures of a tool before a corrective hint

# [context]
# target = 0.75                # share of the model's window that context may fill
# layers = []                  # layer order (empty: the default); a layer left out is off
# budgets = { history = 10000, skills = 2000 }   # tokens, or a share of the window below 1

# [embedding]
# provider = "local"           # "local" (bundled, offline), "openai", "hash" or "none"
# model = ""                   # the provider's model name
# base_url = ""                # any OpenAI-compatible endpoint
# api_key = ""

# [search]
# fusion = "weighted"          # "weighted" (vector + keyword) or "rrf"
# vector_weight = 0.7
# keyword_weight = 0.3
# recency_weight = 0.0
# recency_half_life_days = 30.0

# [llm]                        # for summaries and memory extraction
# provider = "extractive"      # offline; or "openai" (any compatible API), "anthropic"
# model = ""
# base_url = ""
# api_key = ""

# [compaction]
# auto = true
# threshold = 0.75             # compact a session at this share of the model's window
# sleep = 0.35                 # ... or at this share once idle for idle_seconds
# idle_seconds = 600.0
# preserve_messages = 20       # the most recent steps are never compacted
# summary_tokens = 8000          # at most; a quarter of the history budget within that

# [retention]
# days = 0                     # erase sessions untouched this long (0: keep forever)
# action = "erase"             # or "archive": out of live history, still searchable

# [models]                     # extra or corrected context windows, in tokens
# "my-local-model" = 32768

# [memory_types]               # custom memory types: TTL in days (0 = never expires)
# meeting_notes = 14
"""

#: Workspace files, relative path → content, in the order they are written.
WORKSPACE_FILES: dict[str, str] = {
    "SOUL.md": _SOUL,
    "AGENTS.toml": _AGENTS,
    "USER.md": _USER,
    "TOOLS.md": _TOOLS,
    "BOOT.md": _BOOT,
    "MEMORY.md": _MEMORY,
    "logs/daily/README.md": _DAILY,
    "skills/example.md": _EXAMPLE_SKILL,
    "loci.toml": _SETTINGS,
}


@dataclass(frozen=True)
class WorkspaceWrite:
    """What :func:`write_workspace` did: files written, and existing files left alone."""

    written: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


def write_workspace(directory: Path, *, overwrite: bool = False) -> WorkspaceWrite:
    """Create ``directory`` and the workspace files in it. An existing file is never
    touched unless ``overwrite`` is true (it is listed in ``skipped`` instead)."""
    directory = Path(directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise ValidationError(f"{directory} exists and is not a directory")
    result = WorkspaceWrite()
    for name, text in WORKSPACE_FILES.items():
        path = directory / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w" if overwrite else "x", encoding="utf-8", newline="\n") as f:
                f.write(text)
        except FileExistsError:
            result.skipped.append(path)
            continue
        except OSError as exc:
            raise ValidationError(f"cannot write {path}: {exc.strerror or exc}") from exc
        result.written.append(path)
    return result


@dataclass(frozen=True)
class AgentSpec:
    """One agent of AGENTS.toml."""

    name: str
    personality: str = ""
    description: str = ""
    tools: tuple[str, ...] = ()
    #: Keywords that route a message to this agent.
    routes: tuple[str, ...] = ()


_AGENT_KEYS = ("name", "personality", "description", "tools", "routes")


def load_agents(text: str, *, source: str = "AGENTS.toml") -> dict[str, AgentSpec]:
    """Agents by id from the text of an AGENTS.toml (``[agents.<id>]`` tables).
    ``ValidationError`` naming ``source`` on bad TOML or an unknown key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"{source}: invalid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"agents"})
    if unknown:
        raise ValidationError(f"{source}: unknown top-level key(s) {', '.join(unknown)}; "
                              "define agents in [agents.<id>] tables")
    tables = data.get("agents", {})
    if not isinstance(tables, dict):
        raise ValidationError(f"{source}: 'agents' must be [agents.<id>] tables")
    return {agent_id: _agent(agent_id, table, source) for agent_id, table in tables.items()}


def _agent(agent_id: str, table: object, source: str) -> AgentSpec:
    where = f"{source}: [agents.{agent_id}]"
    if not isinstance(table, dict):
        raise ValidationError(f"{where} must be a table of {', '.join(_AGENT_KEYS)}")
    unknown = sorted(set(table) - set(_AGENT_KEYS))
    if unknown:
        raise ValidationError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                              f"expected {', '.join(_AGENT_KEYS)}")
    texts = {key: table.get(key, agent_id if key == "name" else "")
             for key in ("name", "personality", "description")}
    for key, value in texts.items():
        if not isinstance(value, str):
            raise ValidationError(f"{where}: {key} must be a string, got {value!r}")
    lists = {}
    for key in ("tools", "routes"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationError(f"{where}: {key} must be a list of strings, got {value!r}")
        lists[key] = tuple(dict.fromkeys(v.strip() for v in value if v.strip()))
    return AgentSpec(texts["name"].strip() or agent_id, texts["personality"].strip(),
                     texts["description"].strip(), lists["tools"], lists["routes"])
