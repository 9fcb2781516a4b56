"""An agent's trail, as the offline summary keeps it: files read and edited, commands
with their outcome, errors seen and edits made.

A tool loop's value is in what it touched and learned, not in its prose: after a
compaction the agent must still know which files it opened, which command failed and
why, and what it changed. The trail is read from tool calls (structured arguments such
as ``path``, and shell commands: redirections, ``sed -i``, heredocs, ``tee``) and from
tool results (an exit code, the error line or the result line). Sections are merged
with the same sections of a previous summary, so a later compaction keeps what an
earlier one recorded. Everything is verbatim: commands and errors can be searched.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loci.models import Event
from loci.text.transcript import turns_from_events

#: The summary event's metadata key holding the session's whole trail so far.
TRAIL_KEY = "trail"
FILES, EDITS, ERRORS, COMMANDS, PLAN = "Files", "Edits", "Errors", "Commands", "Plan"
#: Trail sections in the order a summary lists them (a cut summary loses the last).
SECTIONS = (PLAN, FILES, EDITS, ERRORS, COMMANDS)
MAX_COMMAND = 120
#: An edit's line: the tool, the file and what changed (each line of it cut at EDIT_LINE).
MAX_EDIT = 400
EDIT_LINE = 80
MAX_ERROR = 200
#: A command's outcome quotes at most this much of an error the Errors section lists.
OUTCOME_ERROR = 80
MAX_FILES = 40
#: A plan's items (a todo tool's list), each cut at this length.
MAX_PLAN_ITEM = 100
ERRORS_PER_OUTPUT = 3
_READ, _EDITED = "- Read: ", "- Edited: "
_PATH_KEYS = ("path", "file", "file_path", "filepath", "filename", "target", "dest")
_EDIT_TOOL = re.compile(r"write|edit|create|replace|patch|insert|append|delete|rename|move",
                        re.IGNORECASE)
_EXTENSIONS = frozenset(
    "py pyi pyx ipynb js jsx ts tsx mjs go rs java kt c h cc cpp hpp cs rb php swift scala "
    "md rst txt json jsonl yaml yml toml cfg ini conf env sh bash zsh sql html css scss xml "
    "csv tsv lock log patch diff proto graphql tf gradle".split())
_FILE_NAMES = frozenset({"makefile", "dockerfile", "readme", "license", "gemfile"})
_EXIT = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit(?:ed)?(?: with)?"
                   r"(?: code| status)?[:= ]\s*(-?\d+)", re.IGNORECASE)
_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)\b.*|^\s*(?:error|fatal)"
                    r"\b.*|.*\b(?:No such file or directory|command not found|Permission denied"
                    r"|(?-i:FAILED)|Segmentation fault)\b.*", re.IGNORECASE)
_RESULT = re.compile(r"\b\d+ (?:passed|failed|errors?|tests?)\b|^(?:OK|PASSED|SUCCESS)\b",
                     re.IGNORECASE)
_WRITES = re.compile(r"\bsed\s+-\w*i|\bperl\s+-\w*i|\btee\b|(?<![<>&\d])>{1,2}(?![>&])"
                     r"|\bpatch\b|\bgit\s+apply\b|\.write(?:_text)?\(")
_REDIRECT = re.compile(r"(?<![<>&\d])>{1,2}\s*['\"]?([^\s'\";&|<>()]+)")
_KIND = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)\b")
_FAILED = re.compile(r"→ (?:exit (?!0\b)|.*(?:Error|Exception|error|FAILED))")
_QUOTED = re.compile(r"^`(.+?)`(?: → .*)?$")
_TEE = re.compile(r"\btee\s+(?:-a\s+)?['\"]?([^\s'\";&|<>()]+)")
_OLD_KEYS = ("old_string", "old_str", "old_text", "search")
_NEW_KEYS = ("new_string", "new_str", "new_text", "replace", "content", "file_text",
             "insert_text")
_PATCH_START = re.compile(r"\s*(?:\*\*\* Begin Patch|--- \S|diff --git )")
_PATCH_FILE = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ )(.+)$", re.MULTILINE)
#: How much a section's length counts when the trail must shrink (edits give way last).
_GIVES_WAY = {EDITS: 0.5, PLAN: 0.5}
_SPACE = re.compile(r"\s")
_READ_TOOL = re.compile(r"read|view|open|cat\b|show", re.IGNORECASE)
_PLAN_KEYS = ("todos", "plan", "steps")
_ITEM_KEYS = ("content", "step", "title", "text", "description")


def is_path(token: str) -> bool:
    """A token of a command that names a file (not an option, a URL or a device)."""
    token = token.strip("'\"`,;:()[]{}")
    if not token or token.startswith(("-", "/dev/", "/proc/", "http:", "https:", "//")) or (
            len(token) > 200 or "=" in token or "*" in token or "$" in token):
        return False
    name = token.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name[1:] else ""
    return extension in _EXTENSIONS or name.lower() in _FILE_NAMES


def command_paths(command: str) -> list[str]:
    """File paths a shell command names, in order, each once."""
    try:
        tokens = shlex.split(command, comments=False, posix=True)
    except ValueError:
        tokens = command.split()
    words: list[str] = []
    for token in tokens:
        words += re.split(r"[\s;&|<>()=]+|:+(?!//)", token)  # "a.py::test", "a.py:12"
    return list(dict.fromkeys(w.strip("'\"`,;:()[]{}") for w in words if is_path(w)))


def edited_paths(command: str) -> list[str]:
    """Files a shell command writes: redirection and ``tee`` targets, in-place edits."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    targets = [p for p in _REDIRECT.findall(first) + _TEE.findall(first) if is_path(p)]
    if re.search(r"\b(?:sed|perl)\s+-\w*i", first):
        targets += command_paths(first)[-1:]
    return list(dict.fromkeys(t.strip("'\"") for t in targets))


def outcome(output: str, errors: list[str]) -> str:
    """"exit 1: TypeError; 3 failed, 9 passed" for a tool result: its exit code, the
    kind of its last error (``errors``: its ``error_lines``, listed under Errors) and
    its result line."""
    code = _EXIT.search(output)
    status = next((g for g in code.groups() if g is not None), None) if code else None
    error = errors[-1] if errors else None
    results = [line.strip() for line in output.splitlines()
               if _RESULT.search(line) and len(line.strip()) <= MAX_ERROR]
    parts = [f"exit {status}"] if status is not None else []
    kind = _KIND.match(error) if error else None
    details = [kind.group(0) if kind else error, results[-1] if results else None]
    # The whole error line is under Errors: the outcome names it, briefly.
    shown = "; ".join(dict.fromkeys(_clip(d, OUTCOME_ERROR) for d in details if d))
    return ": ".join(p for p in (", ".join(parts), shown) if p)


def error_lines(output: str) -> list[str]:
    """The distinct error lines of an output, the last ``ERRORS_PER_OUTPUT`` (a chained
    traceback names each exception; the last is the one raised)."""
    lines = [line.strip()[:MAX_ERROR] for line in output.splitlines()
             if _ERROR.match(line.strip()) and len(line.strip()) <= 4 * MAX_ERROR]
    return list(dict.fromkeys(lines))[-ERRORS_PER_OUTPUT:]


def first_line(text: str, limit: int = MAX_COMMAND) -> str:
    stripped = text.strip()
    line = stripped.splitlines()[0] if stripped else ""
    more = len(line) > limit or "\n" in stripped
    return line[:limit] + (" …" if more else "")


@dataclass
class Trail:
    """Files, edits, errors and commands of a span, merged with an earlier summary's."""

    read: dict[str, None] = field(default_factory=dict)
    edited: dict[str, None] = field(default_factory=dict)
    #: command line → its rendered line (a repeated command moves to the end)
    edits: dict[str, str] = field(default_factory=dict)
    errors: dict[str, None] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)
    #: The latest plan a todo tool wrote ("[status] item"): earlier plans are stale.
    plan: list[str] = field(default_factory=list)
    #: Calls waiting for their result: (line, writes a file, output is the call's own
    #: rather than a file's content).
    _pending: list[tuple[str, bool, bool]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.read or self.edited or self.edits or self.errors or self.commands
                    or self.plan)

    def call(self, tool: str | None, args: Mapping[str, Any] | None) -> None:
        """A tool call: its files, and a command line waiting for its result."""
        args = args or {}
        plan = plan_of(tool, args)
        if plan is not None:
            self.plan = plan
            self._pending.append(("", False, False))
            return
        command = args.get("command") or args.get("cmd") or args.get("script")
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        named = [str(args[k]).strip() for k in _PATH_KEYS if isinstance(args.get(k), str)]
        paths = [p for p in named if is_path(p)]
        structured = any(k in args for k in (*_OLD_KEYS, *_NEW_KEYS, "edits"))
        if isinstance(command, str) and command.strip() and not structured:
            edited = edited_paths(command) if _WRITES.search(command) else []
            self._files([*command_paths(command), *paths], edited)
            self._pending.append((first_line(command), bool(edited), True))
            return
        patched = patch_paths(args)
        editing = bool(tool and _EDIT_TOOL.search(tool)) or bool(patched)
        if editing:  # an edit tool names its file whatever the file's name
            paths = [p for p in named if p and not _SPACE.search(p)]
        self._files([*paths, *patched], [*paths, *patched] if editing else [])
        change = change_of(args) if editing else None
        if change is not None:
            where = ", ".join(dict.fromkeys([*paths, *patched])) or "?"
            self._pending.append((f"{tool or 'edit'} {where}: {change}"[:MAX_EDIT], True, False))
            return
        shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items()
                          if k not in ("content", "file_text"))[:MAX_COMMAND]
        reads = bool(tool and _READ_TOOL.search(tool)) and bool(named)
        # Reading a file is listed under Files; only a failure to read it is news.
        self._pending.append(("" if reads else f"{tool or 'tool'}({shown})", editing,
                              not reads))

    def result(self, output: str, tool: str | None = None) -> None:
        """A tool result: the outcome of the oldest call still waiting for one."""
        line, editing, own = self._pending.pop(0) if self._pending else (tool or "", False,
                                                                          True)
        # A file's content read back is not this session's errors: only a failure to
        # read it (its first line) is.
        errors = error_lines(output if own else output.lstrip().split("\n", 1)[0])
        for error in errors:
            self.errors[error] = None
        if not line:
            return
        result = outcome(output, errors)
        target = self.edits if editing else self.commands
        target.pop(line, None)  # the newest outcome of a repeated command wins
        target[line] = f"`{line}`" + (f" → {result}" if result else "")

    def _files(self, paths: Iterable[str], edited: Iterable[str]) -> None:
        for path in edited:
            self.edited[path] = None
        for path in paths:
            if path not in self.edited:
                self.read[path] = None

    def absorb(self, section: str, line: str) -> bool:
        """Take a line of an earlier summary's trail section; True if it was one."""
        text = line.strip().removeprefix("- ").strip()
        if section == PLAN and text:
            self.plan.append(text)
            return True
        if section == FILES and line.strip().startswith((_READ.strip(), _EDITED.strip())):
            kind, _, names = text.partition(": ")
            target = self.edited if kind == "Edited" else self.read
            for name in names.split(", "):
                if name.strip():
                    target[name.strip()] = None
            return True
        if not text or section not in (EDITS, ERRORS, COMMANDS):
            return False
        if section == ERRORS:
            self.errors[text] = None
        else:
            key = _QUOTED.match(text)
            commands = self.edits if section == EDITS else self.commands
            commands[key.group(1) if key else text] = text
        return True

    def lines(self, max_files: int | None = MAX_FILES) -> dict[str, list[str]]:
        """Each section's lines, oldest first (files: the last ``max_files`` of each
        kind, None for all)."""
        cut = slice(-max_files if max_files else None, None)
        edited = list(self.edited)[cut]
        read = [p for p in self.read if p not in self.edited][cut]
        files = ([_EDITED + ", ".join(edited)] if edited else []) + (
            [_READ + ", ".join(read)] if read else [])
        return {PLAN: [f"- {item}" for item in self.plan], FILES: files,
                EDITS: [f"- {e}" for e in self.edits.values()],
                ERRORS: [f"- {e}" for e in self.errors],
                COMMANDS: [f"- {c}" for c in self.commands.values()]}

    def render(self, budget: int | None, count: Callable[[str], int] = len) -> str:
        """The trail's sections within ``budget`` tokens (None: all of it, every file):
        the longest section gives way first, its oldest successful line before any
        failure."""
        lists = self.lines(MAX_FILES if budget is not None else None)
        costs = {name: [count(line) + 1 for line in lines] for name, lines in lists.items()}
        spent = sum(count(f"## {n}") + 2 + sum(c) for n, c in costs.items() if c)
        while budget is not None and spent > budget and any(lists.values()):
            longest = max(lists, key=lambda n: sum(costs[n]) * _GIVES_WAY.get(n, 1.0))
            lines = lists[longest]
            # The oldest line that did not fail goes first: failures teach more.
            index = next((i for i, line in enumerate(lines) if not _FAILED.search(line)), 0)
            spent -= costs[longest].pop(index)
            del lines[index]
        return "\n\n".join(f"## {name}\n" + "\n".join(lines)
                            for name, lines in lists.items() if lines)

    def entries(self) -> list[tuple[str, str]]:
        """(section, line) for every line of the trail, oldest first within a
        section, each file its own line ("- Read: a.py")."""
        files = [(FILES, _EDITED + p) for p in self.edited] + [
            (FILES, _READ + p) for p in self.read if p not in self.edited]
        return files + [(name, line) for name, lines in self.lines(None).items()
                        if name != FILES for line in lines]

    @classmethod
    def parse(cls, text: str) -> Trail:
        """The trail a rendered one (or a summary holding one) lists."""
        trail, section = cls(), None
        for line in text.splitlines():
            heading = re.match(r"^#+\s*(.+?)\s*$", line)
            if heading:
                section = next((s for s in SECTIONS if s.lower() == heading[1].lower()), None)
            elif section is not None and line.strip():
                trail.absorb(section, line)
        return trail


def span_trail(events: Sequence[Event], earlier: str = "") -> Trail:
    """The trail of ``events`` (a compacted span) after the one ``earlier`` lists."""
    trail = Trail.parse(earlier)
    for turn in turns_from_events(events):
        if turn.kind == "tool_call":
            trail.call(turn.tool_name, turn.args)
        elif turn.kind == "tool_result":
            trail.result(turn.text, turn.tool_name)
    return trail


def plan_of(tool: str | None, args: Mapping[str, Any]) -> list[str] | None:
    """The plan a todo or plan tool writes (Claude Code's ``TodoWrite`` ``todos``, an
    ``update_plan`` tool's ``plan``), one "[status] item" line each; None for other calls."""
    if not tool or not re.search(r"todo|plan", tool, re.IGNORECASE):
        return None
    items = next((args[k] for k in _PLAN_KEYS if isinstance(args.get(k), list)), None)
    if items is None:
        return None
    plan = []
    for item in items:
        if isinstance(item, Mapping):
            text = next((str(item[k]) for k in _ITEM_KEYS if isinstance(item.get(k), str)), "")
            status = item.get("status")
            text = f"[{status}] {text}" if isinstance(status, str) and status else text
        else:
            text = str(item)
        if text.strip():
            plan.append(" ".join(text.split())[:MAX_PLAN_ITEM])
    return plan


def change_of(args: Mapping[str, Any]) -> str | None:
    """What an edit call changes, from its structured input: the text removed and added
    (head and tail when long) of each replacement (``Edit``, ``MultiEdit``'s ``edits``,
    ``str_replace``'s ``old_str``/``new_str``), the head and tail of a written file, or
    a patch's removed and added lines."""
    patch = _patch_text(args)
    if patch is not None:
        lines = patch.splitlines()
        removed = [ln[1:] for ln in lines if ln.startswith("-") and not ln.startswith("---")]
        added = [ln[1:] for ln in lines if ln.startswith("+") and not ln.startswith("+++")]
        return _change("\n".join(removed), "\n".join(added))
    edits = args.get("edits")
    parts = [_change(_text(e, _OLD_KEYS), _text(e, _NEW_KEYS))
             for e in (edits if isinstance(edits, list) else [args]) if isinstance(e, Mapping)]
    return "; ".join(p for p in parts if p) or None


def patch_paths(args: Mapping[str, Any]) -> list[str]:
    """The files a patch in the call's input names (``*** Update File: x``, ``+++ b/x``)."""
    patch = _patch_text(args)
    if patch is None:
        return []
    found = [m.group(1).strip() for m in _PATCH_FILE.finditer(patch)]
    return list(dict.fromkeys(p.removeprefix("b/").removeprefix("a/") for p in found
                              if p and p != "/dev/null"))


def _patch_text(args: Mapping[str, Any]) -> str | None:
    for value in args.values():
        if isinstance(value, str) and _PATCH_START.match(value):
            return value
    return None


def _text(args: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((args[k] for k in keys if isinstance(args.get(k), str)), None)


def _change(old: str | None, new: str | None) -> str:
    removed, added = _ends(old), _ends(new)
    return " ".join(p for p in (f"−\"{removed}\"" if removed else "",
                                f"+\"{added}\"" if added else "") if p)


def _ends(text: str | None) -> str:
    """The first and last lines of ``text`` (quoted in a trail line, so no backticks)."""
    lines = [ln.strip().replace("`", "'") for ln in (text or "").splitlines() if ln.strip()]
    if len(lines) > 2:
        lines = [lines[0], "…", lines[-1]]
    return " ⏎ ".join(ln[:EDIT_LINE] for ln in lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return first_line(text, 60)
