"""Path and tag rules: one place, clear errors, hostile input rejected."""

from __future__ import annotations

import pytest

from loci import Loci, ValidationError
from loci.checks import clean_tags, parse_tags
from loci.knowledge.paths import (
    MAX_PATH_CHARS,
    check_folder,
    check_path,
    join,
    slugify,
)


@pytest.mark.parametrize("path", [
    "/profile/identity.md", "/profile/people/sarah-chen.md", "/conversations/2026-01-db.md",
    "/projects/loci/decisions/database choice.md", "/reference/café.md", "/a",
    "/x/.hidden.md", "/x/..notes",
])
def test_valid_paths(path: str) -> None:
    assert check_path(path) == path


@pytest.mark.parametrize(("path", "message"), [
    ("../etc/passwd", "absolute"),
    ("/reference/../profile/identity.md", "'.' and '..'"),
    ("/reference/./a.md", "'.' and '..'"),
    ("/..", "'.' and '..'"),
    ("/a//b", "empty segment"),
    ("//a", "empty segment"),
    ("a/b", "absolute"),
    ("", "absolute"),
    ("/a/b/", "names a folder"),
    ("/", "empty segment"),
    ("/a\x00b", "control character"),
    ("/a\nb.md", "control character"),
    ("/a\tb.md", "control character"),
    ("/a\x7f.md", "control character"),
    ("/a\x85.md", "control character"),
    ("/a\\b.md", "'/'"),
    ("/ a.md", "space"),
    ("/a /b.md", "space"),
    ("/" + "x" * MAX_PATH_CHARS, "longer than"),
    ("/" + "y" * 300 + ".md", "longer than 255"),
    ("/" + "/".join("d" * 40), "deeper than"),
])
def test_hostile_paths_are_rejected(path: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check_path(path)


def test_non_text_path() -> None:
    with pytest.raises(ValidationError, match="must be text"):
        check_path(None)


def test_paths_are_nfc_normalized() -> None:
    decomposed = "/reference/cafe\u0301.md"
    assert check_path(decomposed) == "/reference/caf\u00e9.md"


def test_folders() -> None:
    assert check_folder(None) == "/" and check_folder("") == "/" and check_folder("/") == "/"
    assert check_folder("/reference") == "/reference/"
    assert check_folder("/projects/loci/") == "/projects/loci/"
    for bad in ("reference/", "/a//", "/a/../b/", "/a\x00/"):
        with pytest.raises(ValidationError):
            check_folder(bad)
    assert join("/reference", "notes/db.md") == "/reference/notes/db.md"
    with pytest.raises(ValidationError):
        join("/reference/", "../escape.md")


def test_tags_and_slugs() -> None:
    assert clean_tags([" db ", "machine learning", "db", "", 2026]) == (
        "db", "machine-learning", "2026")
    assert parse_tags("a, b ,,a") == ("a", "b")
    with pytest.raises(ValidationError, match="invalid tag"):
        clean_tags(["x" * 65])
    with pytest.raises(ValidationError, match="invalid tag"):
        clean_tags(["bad\x00tag"])
    with pytest.raises(ValidationError, match="must be text"):
        clean_tags([None])
    assert slugify("Sarah Chen") == "sarah-chen"
    assert slugify("Ünïcode & more!") == "ünïcode-more"
    assert slugify("???") == "untitled"


def test_every_operation_validates(loci: Loci) -> None:
    kb = loci.knowledge
    for call in (lambda: kb.put("../x.md", "text"), lambda: kb.get("/a//b"),
                 lambda: kb.rm("relative.md"), lambda: kb.history("/a/../b"),
                 lambda: kb.ls("no-slash"), lambda: kb.search("q", path_prefix="/a/../"),
                 lambda: loci.read_document("/x\x00")):
        with pytest.raises(ValidationError):
            call()
    assert kb.ls() == []  # nothing was stored
