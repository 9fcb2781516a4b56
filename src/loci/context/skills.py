"""Skills: ``skills/*.md`` files with YAML front matter (``slug``, ``name``,
``triggers: {keywords, patterns}``, optional ``description`` and ``priority``, which
breaks score ties) and a markdown body, injected when they score above zero on a message.

Loading reads ``<dir>/skills/*.md`` (not README.md) of each workspace directory in lookup
order (cwd, ``--workspace``, ``$LOCI_HOME``); an earlier slug wins over a later one.
Every bad file (unreadable, no front matter, bad YAML, no slug, no triggers, a bad or
dangerous regex, a slug repeated within one directory) is skipped and recorded in
``SkillSet.issues``, so one typo never breaks every turn; ``strict=True`` raises a
``ValidationError`` naming the file instead.

Score = distinct keywords found + patterns matching. Keywords match whole words or
phrases, case-insensitively ("SOL" and "sol" are one keyword; "SOL" misses "solution").
Patterns are ``re.search``-ed case-insensitively. ``re`` cannot be interrupted, so each
pattern is checked once against catastrophic backtracking: leading/trailing ``.*`` are
dropped (``.*price.*`` is searched as ``price``, same answer), then it must be at most
``MAX_PATTERN_CHARS`` long, hold no variably repeated group that repeats or alternates
(``(a+)+``, ``(a|aa)*``) and at most ``MAX_UNBOUNDED`` unbounded repetitions
(``a.*a.*a.*b`` takes minutes on 1,000 characters). Patterns scan the first
``MAX_PATTERN_SCAN_CHARS`` characters of a message, keywords the first ``MAX_SCAN_CHARS``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

import yaml

from loci.errors import ValidationError
from loci.models import Skill
from loci.tokens import TokenCounter

SKILLS_DIR = "skills"
MAX_PATTERN_CHARS = 200
MAX_TRIGGERS = 100
MAX_UNBOUNDED = 1
MAX_SCAN_CHARS = 20_000
MAX_PATTERN_SCAN_CHARS = 2_000
MAX_FILE_CHARS = 200_000
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_BRACES = re.compile(r"\{(\d*)(,?)(\d*)\}")
_WORD = re.compile(r"\w+")
_PIECES = re.compile(r"\\.|[^\\]+", re.S)
#: Escapes and flags whose meaning would change if the pattern were lower-cased.
_UNFOLDABLE = re.compile(r"\\[xuUN0-7]|\(\?[a-zA-Z]*-")
#: Escapes and character classes: one atom each for the backtracking check.
_ATOM = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]")
_TOKEN = re.compile(_ATOM.pattern + "|.", re.S)
_SPECIAL = frozenset("()|*+?{}^$")


class _Message:
    """A message prepared once for all skills: words, normalized text, pattern scans."""

    def __init__(self, text: str) -> None:
        lowered = text[:MAX_SCAN_CHARS].lower()
        self.words = frozenset(_WORD.findall(lowered))
        self.normalized = " ".join(lowered.split())
        self.scans = (text[:MAX_PATTERN_SCAN_CHARS], lowered[:MAX_PATTERN_SCAN_CHARS])


@dataclass(frozen=True)
class _Matcher:
    """Compiled triggers: words, phrases (their words, a regex), (pattern, folded)."""

    words: frozenset[str]
    phrases: tuple[tuple[frozenset[str], re.Pattern[str]], ...]
    patterns: tuple[tuple[re.Pattern[str], bool], ...]

    def score(self, message: _Message) -> int:
        hits = len(self.words & message.words)
        for words, rx in self.phrases:
            if words <= message.words and rx.search(message.normalized):
                hits += 1
        for rx, folded in self.patterns:
            if rx.search(message.scans[folded]):
                hits += 1
        return hits


@dataclass(frozen=True)
class LoadedSkill:
    """A ``Skill`` loaded from a file, with its source and optional metadata."""

    skill: Skill
    path: Path | None = None
    description: str = ""
    priority: int = 0
    matcher: _Matcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matcher", _matcher(self.skill))

    @property
    def slug(self) -> str:
        return self.skill.slug

    @property
    def body(self) -> str:
        return self.skill.body


@dataclass(frozen=True)
class SkillIssue:
    """A skipped skill file and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class SkillSet:
    """Loaded skills, skipped files, and files overridden by an earlier directory."""

    skills: tuple[LoadedSkill, ...] = ()
    issues: tuple[SkillIssue, ...] = ()
    shadowed: tuple[Path, ...] = ()


S = TypeVar("S", Skill, LoadedSkill)


class SkillSelection(NamedTuple, Generic[S]):
    """Included skills (best first), dropped ones as (slug, reason), tokens used."""

    included: list[S]
    dropped: list[tuple[str, str]]
    tokens: int


def load_skills(directories: Sequence[Path], *, strict: bool = False) -> list[LoadedSkill]:
    """Skills of the workspace ``directories`` (lookup order; earlier slugs win)."""
    return list(load_skill_set(directories, strict=strict).skills)


def load_skill_set(directories: Sequence[Path], *, strict: bool = False) -> SkillSet:
    """Like :func:`load_skills`, with skipped and shadowed files. Cached per process:
    files are re-read only when a ``skills/*.md`` name, size or mtime changed."""
    dirs = tuple(dict.fromkeys(Path(d).expanduser() / SKILLS_DIR for d in directories))
    fingerprint = _fingerprint(dirs)
    cached = _CACHE.get((dirs, strict))
    if cached is not None and fingerprint and cached[0] == fingerprint:
        return cached[1]
    result = _load(dirs, strict)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[(dirs, strict)] = (fingerprint, result)
    return result


_Fingerprint = tuple[tuple[str, int, int], ...]
_CACHE: dict[tuple[tuple[Path, ...], bool], tuple[_Fingerprint, SkillSet]] = {}
_CACHE_SIZE = 32
clear_cache = _CACHE.clear


def _skill_files(directory: Path) -> list[Path]:
    found = directory.glob("*.md") if directory.is_dir() else ()
    return sorted(p for p in found if p.name.lower() != "readme.md")


def _fingerprint(dirs: Sequence[Path]) -> _Fingerprint:
    try:
        stats = [(path, path.stat()) for d in dirs for path in _skill_files(d)]
    except OSError:  # a file vanished while listing: do not trust the cache
        return ()
    return tuple((str(path), st.st_mtime_ns, st.st_size) for path, st in stats)


def _load(dirs: Sequence[Path], strict: bool) -> SkillSet:
    found: dict[str, LoadedSkill] = {}
    issues: list[SkillIssue] = []
    shadowed: list[Path] = []
    for directory in dirs:
        here: dict[str, Path] = {}
        for path in _skill_files(directory):
            try:
                loaded = parse_skill_file(path)
                if loaded.slug in here:
                    raise ValidationError(f"{path}: duplicate slug {loaded.slug!r}, "
                                          f"already defined in {here[loaded.slug]}")
            except ValidationError as exc:
                if strict:
                    raise
                issues.append(SkillIssue(path, str(exc).removeprefix(f"{path}: ")))
                continue
            here[loaded.slug] = path
            if loaded.slug in found:
                shadowed.append(path)
            else:
                found[loaded.slug] = loaded
    return SkillSet(tuple(found.values()), tuple(issues), tuple(shadowed))


def parse_skill_file(path: Path) -> LoadedSkill:
    """One skill file; ``ValidationError`` (naming the file) if it is not a valid skill."""
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_FILE_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{path}: cannot read skill file: {exc}") from exc
    if len(text) > MAX_FILE_CHARS:
        raise ValidationError(f"{path}: longer than {MAX_FILE_CHARS:,} characters")
    return parse_skill(text, source=str(path), path=path)


def parse_skill(text: str, *, source: str = "<skill>", path: Path | None = None) -> LoadedSkill:
    """A skill from the text of a skill file; errors start with ``source``."""
    match = _FRONT.match(text)
    if match is None:
        raise ValidationError(
            f"{source}: no YAML front matter; start the file with a '---' line, then "
            "slug, name and triggers, then a closing '---' line")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ValidationError(f"{source}: bad YAML front matter: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValidationError(f"{source}: the front matter must be a mapping of keys")
    slug = meta.get("slug")
    if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
        raise ValidationError(f"{source}: missing or invalid 'slug' (up to 100 letters, "
                              f"digits, '.', '_', '-'), got {slug!r}")
    name, description = meta.get("name", slug), meta.get("description", "")
    priority = meta.get("priority", 0)
    if not isinstance(name, str) or not isinstance(description, str):
        raise ValidationError(f"{source}: 'name' and 'description' must be text")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError(f"{source}: 'priority' must be an integer, got {priority!r}")
    triggers = meta.get("triggers") or {}
    if not isinstance(triggers, dict):
        raise ValidationError(f"{source}: 'triggers' must be a mapping with keywords/patterns")
    keywords = _strings(triggers.get("keywords"), "keywords", source)
    patterns = _strings(triggers.get("patterns"), "patterns", source)
    if not keywords and not patterns:
        raise ValidationError(f"{source}: no triggers; add triggers.keywords or "
                              "triggers.patterns, or the skill can never be injected")
    body = text[match.end():].strip()
    if not body:
        raise ValidationError(f"{source}: the skill has no body after the front matter")
    skill = Skill(slug, name.strip() or slug, body, keywords, patterns)
    try:
        return LoadedSkill(skill, path, description.strip(), priority)
    except ValidationError as exc:
        raise ValidationError(f"{source}: {exc}") from exc


def _strings(value: object, what: str, source: str) -> tuple[str, ...]:
    """Trigger strings, whitespace-normalized (keywords) and deduplicated ignoring case
    (keywords) or exactly (patterns)."""
    items = [] if value is None else value if isinstance(value, list) else [value]
    if len(items) > MAX_TRIGGERS:
        raise ValidationError(f"{source}: more than {MAX_TRIGGERS} {what}")
    found: dict[str, str] = {}
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise ValidationError(
                f"{source}: {what} must be text, got {item!r}; quote it in the YAML")
        text = " ".join(str(item).split()) if what == "keywords" else str(item)
        if text:
            found.setdefault(text.casefold() if what == "keywords" else text, text)
    return tuple(found.values())


@lru_cache(maxsize=4096)
def _matcher(skill: Skill) -> _Matcher:
    """Compiled triggers of ``skill``; ``ValidationError`` names the skill and trigger."""
    texts = [t for t in dict.fromkeys(" ".join(k.lower().split()) for k in skill.keywords) if t]
    words = frozenset(t for t in texts if _WORD.fullmatch(t))
    phrases = tuple((frozenset(_WORD.findall(t)), re.compile(rf"(?<!\w){re.escape(t)}(?!\w)"))
                    for t in texts if t not in words)
    try:
        patterns = tuple(compile_pattern(p) for p in skill.patterns)
    except ValidationError as exc:
        raise ValidationError(f"skill {skill.slug!r}: {exc}") from exc
    return _Matcher(words, phrases, patterns)


def compile_pattern(pattern: str) -> tuple[re.Pattern[str], bool]:
    """A checked trigger pattern (``ValidationError`` if too long, invalid or risky) and
    whether it runs over lower-cased text; ``re.IGNORECASE`` disables the fast scan."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValidationError(
            f"pattern {pattern[:40]!r}... is longer than {MAX_PATTERN_CHARS} characters")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValidationError(f"invalid regular expression {pattern!r}: {exc}") from exc
    core = _trim_ends(pattern)
    risk = _backtracking_risk(core)
    if risk:
        raise ValidationError(f"pattern {pattern!r} could take very long to match: it {risk}")
    folded = "".join(p if p[0] == "\\" else p.lower() for p in _PIECES.findall(core))
    with contextlib.suppress(re.error):
        if not _UNFOLDABLE.search(core):
            return re.compile(folded), True
    return re.compile(core, re.IGNORECASE), False


def _trim_ends(pattern: str) -> str:
    r"""Drop a leading/trailing ``X*``, make ``X+`` ``X``: same matches or none, less
    backtracking (``.*price.*`` → ``price``, ``\d+ ?usd`` → ``\d ?usd``)."""
    tokens = _TOKEN.findall(pattern)
    while len(tokens) > 1:
        end = len(tokens) - (tokens[-1] == "?" and tokens[-2] in "*+")  # lazy X*? / X+?
        if tokens[end - 1] in "*+" and tokens[end - 2] not in _SPECIAL:
            tokens = tokens[: end - (tokens[end - 1] == "*") - 1]
            continue
        start = 2 + (tokens[2:3] == ["?"])
        if tokens[1] in "*+" and tokens[0] not in _SPECIAL and tokens[start:start + 1] != ["+"]:
            tokens = tokens[:1] * (tokens[1] == "+") + tokens[start:]
            continue
        break
    return "".join(tokens)


def _backtracking_risk(pattern: str) -> str | None:
    """Why ``pattern`` may backtrack for long: a variably repeated group that repeats or
    alternates (exponential), or over ``MAX_UNBOUNDED`` unbounded repetitions."""
    text, stack, unbounded, i = _ATOM.sub("x", pattern), [False], 0, 0
    while i < len(text):
        char, closed = text[i], False
        if char == "(":
            stack.append(False)
            i += 2 if text.startswith("(?", i) else 1
            continue
        if char == "|" or (char == ")" and len(stack) > 1 and stack.pop()):
            stack[-1], closed = True, char == ")"
        kind, length = _repeat(text, i + 1)
        i += 1 + length
        unbounded += kind == 3
        if closed and kind >= 2:
            return "repeats a group that itself repeats or has alternatives, like '(a+)+'"
        stack[-1] = stack[-1] or kind > 0
    if unbounded > MAX_UNBOUNDED:
        return (f"has {unbounded} unbounded repetitions (*, +, {{m,}}) in the middle, "
                f"more than the {MAX_UNBOUNDED} allowed; use ?, {{m,n}} or two patterns")
    return None


def _repeat(text: str, i: int) -> tuple[int, int]:
    """Repetition at ``i`` and its length: 0 none/``{n}``, 1 ``?``, 2 ``{m,n}``, 3 unbounded."""
    braces = _BRACES.match(text, i)
    if text.startswith(("*", "+", "?"), i):
        kind, end = (1 if text[i] == "?" else 3), i + 1
    elif braces and (braces[1] or braces[3]):
        low, high = int(braces[1] or 0), int(braces[3] or 1 << 30) if braces[2] else None
        kind = 0 if high is None or high == low else 2 if high - low < 16 else 3
        end = braces.end()
    else:
        return 0, 0
    return kind, end + 1 - i if text.startswith(("?", "+"), end) else end - i


def match_skills(skills: Iterable[S], message: str) -> list[tuple[S, int]]:
    """Skills scoring above zero on ``message``: best score first, then higher priority,
    then slug. A plain ``Skill`` with a bad pattern raises ``ValidationError``."""
    prepared = _Message(message)
    scored = []
    for skill in skills:
        if isinstance(skill, LoadedSkill):
            matcher, priority = skill.matcher, skill.priority
        else:
            matcher, priority = _matcher(skill), 0
        score = matcher.score(prepared)
        if score > 0:
            scored.append((skill, score, priority))
    scored.sort(key=lambda t: (-t[1], -t[2], t[0].slug))
    return [(skill, score) for skill, score, _ in scored]


def select_skills(
    matches: Iterable[tuple[S, int]], budget_tokens: int, counter: TokenCounter
) -> SkillSelection[S]:
    """Best first within ``budget_tokens``; a skill that does not fit what is left is
    dropped, and smaller ones after it may still fit. A skill's text is its body; it
    costs the body's tokens plus one for the separating newline."""
    included: list[S] = []
    dropped: list[tuple[str, str]] = []
    used = 0
    for skill, _score in matches:
        cost = counter.count(skill.body) + 1
        if cost > budget_tokens:
            dropped.append((skill.slug, f"larger than the whole skills budget "
                                        f"({cost:,} > {budget_tokens:,} tokens)"))
        elif used + cost > budget_tokens:
            dropped.append((skill.slug, f"over the skills budget ({cost:,} tokens, "
                                        f"{budget_tokens - used:,} left)"))
        else:
            included.append(skill)
            used += cost
    return SkillSelection(included, dropped, used)
