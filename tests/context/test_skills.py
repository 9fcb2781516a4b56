"""Skills: loading order and overrides, bad files, scoring (seeds/000), whole-word
keywords, pattern checks against catastrophic backtracking, budget selection."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loci.context.skills import (
    MAX_PATTERN_CHARS,
    MAX_PATTERN_SCAN_CHARS,
    LoadedSkill,
    clear_cache,
    compile_pattern,
    load_skill_set,
    load_skills,
    match_skills,
    parse_skill,
    select_skills,
)
from loci.errors import ValidationError
from loci.models import Skill
from loci.tokens import token_counter

SEED = """---
slug: sol-price
name: Solana Price Monitor
triggers:
  keywords: [solana, SOL, sol, crypto, price]
  patterns: [".*price.*", ".*token.*"]
---
# How To Check SOL Price
Use http_fetch to fetch: https://example.com/sol
"""


def skill_text(slug: str, body: str = "Body.", keywords: str = "[alpha]",
               patterns: str = "[]", extra: str = "") -> str:
    return (f"---\nslug: {slug}\nname: {slug.title()}\n{extra}triggers:\n"
            f"  keywords: {keywords}\n  patterns: {patterns}\n---\n{body}\n")


def put(directory: Path, name: str, text: str) -> Path:
    path = directory / "skills" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make(slug: str, keywords: tuple[str, ...] = (), patterns: tuple[str, ...] = (),
         body: str = "Body.", priority: int = 0) -> LoadedSkill:
    return LoadedSkill(Skill(slug, slug, body, keywords, patterns), priority=priority)


def score(skill: LoadedSkill, message: str) -> int:
    found = match_skills([skill], message)
    return found[0][1] if found else 0


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def sol() -> LoadedSkill:
    return parse_skill(SEED)


# ---------------------------------------------------------------- parsing and scoring


def test_seed_skill_parses(sol: LoadedSkill) -> None:
    assert sol.slug == "sol-price"
    assert sol.skill.name == "Solana Price Monitor"
    # "SOL" and "sol" are one keyword: case-insensitive matching would count it twice.
    assert sol.skill.keywords == ("solana", "SOL", "crypto", "price")
    assert sol.skill.patterns == (".*price.*", ".*token.*")
    assert sol.body.startswith("# How To Check SOL Price\nUse http_fetch")


@pytest.mark.parametrize(("message", "expected"), [
    ("What's solana at?", 1),                 # keyword solana
    ("What's the SOL price?", 3),             # keywords sol + price, pattern price
    ("any news on the new token?", 1),        # pattern token only
    ("Token PRICE in crypto", 4),             # price, crypto, pattern price, pattern token
    ("price price price", 2),                 # each trigger counts once
    ("Compare to yesterday", 0),
    ("the solution is in the console", 0),    # "sol" is not a whole word here
])
def test_seed_scores(sol: LoadedSkill, message: str, expected: int) -> None:
    assert score(sol, message) == expected


@pytest.mark.parametrize(("message", "hit"), [
    ("SOL", True), ("sol.", True), ("(Sol)", True), ("sol-usd", True), ("buy SOL\tnow", True),
    ("solution", False), ("console", False), ("sol_x", False), ("sols", False), ("isol", False),
])
def test_keywords_match_whole_words_in_any_case(message: str, hit: bool) -> None:
    assert (score(make("k", ("SOL",)), message) == 1) is hit


@pytest.mark.parametrize(("message", "hit"), [
    ("Machine learning is fun", True),
    ("I like MACHINE\n   learning.", True),
    ("machine-learning", False),
    ("machine learnings", False),
    ("learning machine", False),
])
def test_multi_word_keywords_match_as_phrases(message: str, hit: bool) -> None:
    assert (score(make("k", ("machine learning",)), message) == 1) is hit


def test_keywords_with_symbols() -> None:
    skill = make("k", ("c++", "node.js"))
    assert score(skill, "I write C++ and Node.js") == 2
    assert score(skill, "abc++ and xnode.js") == 0


def test_patterns_are_case_insensitive_searches() -> None:
    skill = make("p", patterns=("Deploy(ed)? to PROD", r"\d+ SOL", r"\bAPI\b"))
    assert score(skill, "we deployed to prod") == 1
    assert score(skill, "send 5 sol") == 1
    assert score(skill, "send five sol") == 0
    assert score(skill, "the api is down") == 1
    assert score(skill, "rapid growth") == 0


def test_patterns_with_case_sensitive_escapes_still_ignore_case() -> None:
    # \x41 is "A": this pattern cannot be lower-cased, so it runs with IGNORECASE.
    skill = make("p", patterns=(r"\x41BC", r"(?P<w>sol)-(?P=w)"))
    assert score(skill, "abc") == 1
    assert score(skill, "ABC and SOL-sol") == 2


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aAbx iPRICEtokn0159.:/hsw\n", max_size=40))
def test_simplified_patterns_find_what_the_originals_find(message: str) -> None:
    patterns = [".*price.*", r"\d+ ?usd", r"https?://\S+", "a+?b+?", "(how|what) .*price",
                "x|b*", r"[a-z]+ing", r"\S\S+x", r"\w++x", "a*+", r"^\s*hi", r"bye\s*$",
                r"\.*", ".*?tok.*?en.*"]
    for pattern in patterns:
        expected = re.search(pattern, message, re.IGNORECASE) is not None
        assert (score(make("p", patterns=(pattern,)), message) == 1) is expected, pattern


def test_patterns_scan_only_the_start_of_long_messages() -> None:
    skill = make("p", keywords=("beacon",), patterns=(r"needle\d",))
    filler = "x " * MAX_PATTERN_SCAN_CHARS
    assert score(skill, "needle1 " + filler) == 1
    assert score(skill, filler + "needle1") == 0
    assert score(skill, filler + "beacon") == 1      # keywords scan further


@pytest.mark.parametrize("pattern", [
    "(a+)+$", "(a|aa)*c", r"(\w{1,3})*x", "((ab)+c)+", "a.*a.*a.*b", r"\w+\s*\w+x",
    "x" * (MAX_PATTERN_CHARS + 1), "(unclosed", "*star",
])
def test_risky_or_invalid_patterns_are_rejected(pattern: str) -> None:
    with pytest.raises(ValidationError, match=r"pattern|regular expression"):
        compile_pattern(pattern)


def test_allowed_patterns_stay_fast_on_adversarial_messages() -> None:
    skill = make("p", patterns=(r"\S\S+x", r"(how|what) .*price", r"[a-z]+ing\d",
                                r"https?://(www\.)?\S+\.zz\b", ".*a.*"))
    started = time.perf_counter()
    for message in ("a" * 100_000, "how " * 25_000, "http://" * 10_000):
        match_skills([skill], message)
    assert time.perf_counter() - started < 1.0


# ---------------------------------------------------------------- matching order


def test_matches_are_ordered_by_score_priority_then_slug() -> None:
    skills = [make("b-low", ("sol",)), make("a-low", ("sol",)),
              make("z-high", ("sol",), priority=5), make("two", ("sol", "price")),
              make("none", ("weather",))]
    expected = ["two", "z-high", "a-low", "b-low"]
    for seed in range(5):
        random.Random(seed).shuffle(skills)
        assert [s.slug for s, _ in match_skills(skills, "sol price")] == expected


def test_plain_skills_can_be_matched() -> None:
    plain = Skill("sol-price", "Sol", "body", ("solana",), (".*price.*",))
    assert match_skills([plain], "solana price") == [(plain, 2)]
    assert match_skills([plain], "") == []
    broken = Skill("broken", "Broken", "body", (), ("(oops",))
    with pytest.raises(ValidationError, match=r"'broken'.*oops"):
        match_skills([broken], "anything")


def test_matching_100_skills_is_fast() -> None:
    rng = random.Random(7)
    words = [f"term{i}" for i in range(500)] + ["deploy", "price", "docker", "python"]
    skills = [make(f"s{i:03}", tuple(rng.sample(words, 5)),
                   (f".*{rng.choice(words)}.*",)) for i in range(100)]
    message = "What's the SOL price today, and should I deploy the docker container?"
    match_skills(skills, message)
    runs = 200
    started = time.perf_counter()
    for _ in range(runs):
        match_skills(skills, message)
    assert (time.perf_counter() - started) / runs < 0.001


# ---------------------------------------------------------------- budget selection


def test_select_skills_fills_the_budget_best_first() -> None:
    counter = token_counter(tokenizer="heuristic")          # 4 characters per token
    big, a, b, mid, small = (make(n, body="x" * size) for n, size in (
        ("big", 400), ("a", 40), ("b", 40), ("mid", 48), ("small", 16)))
    matches = [(big, 9), (a, 5), (b, 4), (mid, 3), (small, 1)]
    chosen = select_skills(matches, 30, counter)
    assert [s.slug for s in chosen.included] == ["a", "b", "small"]   # 11 + 11 + 5
    assert chosen.tokens == 27
    reasons = dict(chosen.dropped)
    assert "larger than the whole skills budget" in reasons["big"]
    assert "over the skills budget" in reasons["mid"]
    assert select_skills(matches, 30, counter) == chosen               # deterministic


def test_select_skills_with_no_budget_drops_everything(sol: LoadedSkill) -> None:
    counter = token_counter(tokenizer="heuristic")
    chosen = select_skills(match_skills([sol], "sol price"), 0, counter)
    assert chosen.included == [] and chosen.tokens == 0
    assert [slug for slug, _ in chosen.dropped] == ["sol-price"]


# ---------------------------------------------------------------- loading


def test_lookup_order_earlier_directories_win(tmp_path: Path) -> None:
    cwd, workspace, home = (tmp_path / n for n in ("cwd", "ws", "home"))
    put(cwd, "sol.md", skill_text("sol-price", body="from cwd"))
    put(home, "sol.md", skill_text("sol-price", body="from home"))
    shadowed = put(workspace, "other-name.md", skill_text("sol-price", body="from ws"))
    put(home, "weather.md", skill_text("weather", body="from home"))
    loaded = load_skill_set([cwd, workspace, home])
    assert {s.slug: s.body for s in loaded.skills} == {
        "sol-price": "from cwd", "weather": "from home"}
    assert shadowed in loaded.shadowed and loaded.issues == ()
    assert load_skills([home])[0].body == "from home"


def test_readme_and_other_files_are_ignored(tmp_path: Path) -> None:
    put(tmp_path, "README.md", "# About these skills\n")
    put(tmp_path, "notes.txt", "not a skill")
    put(tmp_path, "ok.md", skill_text("ok"))
    loaded = load_skill_set([tmp_path, tmp_path / "missing"])
    assert [s.slug for s in loaded.skills] == ["ok"] and loaded.issues == ()


BAD_FILES = {
    "no-front-matter.md": ("# Just markdown\nno header\n", "no YAML front matter"),
    "bad-yaml.md": ("---\nslug: [unclosed\n---\nbody\n", "bad YAML"),
    "no-slug.md": ("---\nname: Nameless\ntriggers: {keywords: [x]}\n---\nbody\n", "slug"),
    "bad-keyword.md": (skill_text("k", keywords="[yes, no]"), "quote it"),
    "no-triggers.md": ("---\nslug: quiet\n---\nbody\n", "no triggers"),
    "no-body.md": (skill_text("empty", body=""), "no body"),
    "bad-regex.md": (skill_text("re", patterns='["(unclosed"]'), "(unclosed"),
    "risky-regex.md": (skill_text("risky", patterns='["(a+)+b"]'), "(a+)+b"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_files_are_skipped_with_an_issue_naming_the_file(tmp_path: Path, name: str) -> None:
    text, reason = BAD_FILES[name]
    path = put(tmp_path, name, text)
    put(tmp_path, "good.md", skill_text("good"))
    loaded = load_skill_set([tmp_path])
    assert [s.slug for s in loaded.skills] == ["good"]
    [issue] = loaded.issues
    assert issue.path == path and reason in issue.reason


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_files_raise_in_strict_mode(tmp_path: Path, name: str) -> None:
    text, reason = BAD_FILES[name]
    put(tmp_path, name, text)
    with pytest.raises(ValidationError) as error:
        load_skills([tmp_path], strict=True)
    assert str(error.value).startswith(str(tmp_path / "skills" / name))
    assert reason in str(error.value)


def test_duplicate_slug_in_one_directory_is_an_issue(tmp_path: Path) -> None:
    first = put(tmp_path, "a.md", skill_text("same", body="first"))
    second = put(tmp_path, "b.md", skill_text("same", body="second"))
    loaded = load_skill_set([tmp_path])
    assert [s.body for s in loaded.skills] == ["first"]
    assert loaded.issues[0].path == second and str(first) in loaded.issues[0].reason


def test_optional_fields_and_windows_line_endings(tmp_path: Path) -> None:
    text = skill_text("opt", extra="description: Does things\npriority: 3\n")
    put(tmp_path, "opt.md", text.replace("\n", "\r\n"))
    [skill] = load_skills([tmp_path], strict=True)
    assert (skill.description, skill.priority, skill.body) == ("Does things", 3, "Body.")


def test_loading_is_cached_until_a_file_changes(tmp_path: Path) -> None:
    path = put(tmp_path, "a.md", skill_text("a", body="one"))
    first = load_skill_set([tmp_path])
    assert load_skill_set([tmp_path]) is first
    path.write_text(skill_text("a", body="one, edited"), encoding="utf-8")
    assert load_skills([tmp_path])[0].body == "one, edited"
    put(tmp_path, "b.md", skill_text("b"))
    assert [s.slug for s in load_skills([tmp_path])] == ["a", "b"]
    path.unlink()
    assert [s.slug for s in load_skills([tmp_path])] == ["b"]
