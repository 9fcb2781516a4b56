"""Importing a directory: front matter, folders, skipped files, re-imports, progress."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loci import Loci, ValidationError
from loci.knowledge import import_directory
from loci.knowledge.text import chunks, parse_front_matter
from tests.conftest import FakeClock


def write(root: Path, relative: str, data: str | bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(root, "db.md", "---\ntitle: Database choice\ntags: [Decision, db]\nauthor: maya\n"
          "date: 2026-01-02\n---\n# DB\n\nWe chose PostgreSQL.\n")
    write(root, "ops/runbook.markdown", "---\ntags: on call, pager\n---\nRestart the worker.")
    write(root, "ops/deep/readme.txt", "Plain text, no front matter.\r\nSecond line.")
    write(root, "image.png", b"\x89PNG")
    write(root, ".git/config.md", "hidden folder")
    write(root, ".draft.md", "hidden file")
    write(root, "latin1.md", "caf\xe9".encode("latin-1"))
    write(root, "broken.md", "---\ntags: [a\n---\nbody")
    write(root, "empty.md", "---\ntitle: Empty\n---\n   \n")
    return root


def test_import_respects_front_matter_and_folders(loci: Loci, notes: Path) -> None:
    calls: list[tuple[int, int]] = []
    report = import_directory(loci.knowledge, notes, "/reference/kb",
                              lambda done, total: calls.append((done, total)))
    assert sorted(report.created) == ["/reference/kb/db.md",
                                      "/reference/kb/ops/deep/readme.txt",
                                      "/reference/kb/ops/runbook.markdown"]
    skipped = dict(report.skipped)
    assert sorted(skipped) == ["broken.md", "empty.md", "latin1.md"]
    # (libyaml and pure-Python PyYAML word the problem differently)
    assert re.fullmatch(r"bad YAML front matter at line \d, column \d+: .+", skipped["broken.md"])
    assert skipped["empty.md"] == "no content after the front matter"
    assert skipped["latin1.md"] == "not UTF-8 text"
    assert calls[0] == (0, 6) and calls[-1] == (6, 6)
    db = loci.knowledge.get("/reference/kb/db.md")
    assert db.content == "# DB\n\nWe chose PostgreSQL.\n"  # front matter stripped
    assert db.tags == ("Decision", "db")
    assert db.metadata == {"title": "Database choice", "author": "maya",
                           "date": "2026-01-02", "source_file": "db.md"}
    runbook = loci.knowledge.get("/reference/kb/ops/runbook.markdown")
    assert runbook.tags == ("on-call", "pager")
    readme = loci.knowledge.get("/reference/kb/ops/deep/readme.txt")
    assert readme.content == "Plain text, no front matter.\nSecond line."
    assert [r.title for r in loci.search_knowledge("PostgreSQL", tags=["db"])] == [
        "Database choice"]


def test_a_link_to_a_file_outside_the_folder_is_skipped_not_imported(
        loci: Loci, tmp_path: Path) -> None:
    """``notes.md -> ~/.ssh/id_rsa`` must not put a private key in the knowledge base
    (under /profile/ it would be in every context); a link within the folder is fine."""
    root = tmp_path / "repo"
    write(root, "real.md", "Real notes.")
    write(tmp_path, "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    (root / "notes.md").symlink_to(tmp_path / "id_rsa")
    (root / "alias.md").symlink_to(root / "real.md")
    report = loci.knowledge.import_directory(root)
    assert report.skipped == [("notes.md", "a link to a file outside the folder")]
    assert sorted(d.path for d in loci.knowledge.ls("/reference/")) == [
        "/reference/alias.md", "/reference/real.md"]


def test_reimport_changes_only_what_changed(loci: Loci, notes: Path, clock: FakeClock
                                            ) -> None:
    import_directory(loci.knowledge, notes, "/reference/")
    clock.advance(days=1)
    write(notes, "ops/runbook.markdown", "---\ntags: [pager]\n---\nRestart the worker twice.")
    report = import_directory(loci.knowledge, notes, "/reference/")
    assert report.updated == ["/reference/ops/runbook.markdown"]
    assert sorted(report.unchanged) == ["/reference/db.md", "/reference/ops/deep/readme.txt"]
    runbook = loci.knowledge.get("/reference/ops/runbook.markdown")
    assert runbook.version == 2 and runbook.tags == ("pager",)
    assert loci.knowledge.history("/reference/ops/runbook.markdown")[0].content == (
        "Restart the worker.")


def test_bad_targets(loci: Loci, notes: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not a directory"):
        import_directory(loci.knowledge, tmp_path / "missing", "/reference/")
    with pytest.raises(ValidationError):
        import_directory(loci.knowledge, notes, "../escape/")
    write(tmp_path / "odd", " spaced.md", "a name starting with a space")
    report = import_directory(loci.knowledge, tmp_path / "odd", "/odd/")
    assert report.created == [] and "valid path" in report.skipped[0][1]


def test_front_matter_and_chunks() -> None:
    front, body = parse_front_matter("---\n---\nbody")
    assert (front.title, front.tags, body) == (None, (), "body")
    assert parse_front_matter("no front matter\n---\n")[1] == "no front matter\n---\n"
    with pytest.raises(ValidationError, match="mapping"):
        parse_front_matter("---\n- a\n---\nbody")
    with pytest.raises(ValidationError, match="tags"):
        parse_front_matter("---\ntags: 3\n---\nbody")
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(20))
    parts = chunks(text)
    assert all(len(p) <= 1500 for p in parts) and len(parts) > 3
    assert " ".join(" ".join(parts).split()) == " ".join(text.split())
    huge = "x" * 4000
    assert [len(p) for p in chunks(huge)] == [1500, 1500, 1000]


def test_two_files_that_name_one_path_are_reported_not_lost(loci: Loci, tmp_path: Path
                                                            ) -> None:
    """``café.md`` written composed and decomposed: two files, one document path (paths
    are NFC). The second was silently dropped; it is now reported."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "caf\u00e9.md").write_text("composed", encoding="utf-8")
    (folder / "cafe\u0301.md").write_text("decomposed", encoding="utf-8")
    report = import_directory(loci.knowledge, folder, "/notes/")
    assert report.created == ["/notes/caf\u00e9.md"] and len(report.skipped) == 1
    assert "rename one of the two files" in report.skipped[0][1]
