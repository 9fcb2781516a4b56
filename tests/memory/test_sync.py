from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from loci import Loci
from loci.memory.markdown import parse
from tests.conftest import FakeClock


def mirror_dir(home: Path) -> Path:
    return home / "memory"


def test_writes_are_mirrored_to_markdown(loci: Loci, home: Path) -> None:
    memory = loci.remember("User prefers dark mode", type="user_preference", tags=["ui"])
    path = mirror_dir(home) / f"{memory.id}.md"
    text = path.read_text()
    assert text.startswith(f"---\nid: {memory.id}\ntype: user_preference\ntags: [ui]\n")
    assert "expiresAt:" in text and text.endswith("\n\nUser prefers dark mode\n")
    loci.memory_write("user_preference", ["ui"], "User prefers light mode", id=memory.id)
    assert parse(path.read_text()).body == "User prefers light mode"
    loci.forget(memory.id)
    assert not path.exists()


def test_sync_round_trip(loci: Loci, home: Path, clock: FakeClock) -> None:
    kept = loci.remember("The office is in Lisbon", type="project_context")
    edited = loci.remember("User drinks tea", type="user_preference")
    deleted = loci.remember("Temporary fact", type="project_context")
    files = mirror_dir(home)
    clock.advance(minutes=5)
    path = files / f"{edited.id}.md"
    path.write_text(path.read_text().replace("User drinks tea", "User drinks coffee, black"))
    (files / f"{deleted.id}.md").unlink()
    (files / "idea.md").write_text("---\ntype: sticky\ntags: [family]\n---\nUser has two cats\n")
    report = loci.sync()
    assert (report.updated, report.deleted, report.conflicts) == ([edited.id], [deleted.id], [])
    assert report.unchanged == 1 and len(report.created) == 1
    assert loci.memory(edited.id).content == "User drinks coffee, black"
    assert loci.memory_history(edited.id)[0].content == "User drinks tea"
    created = loci.memory(report.created[0])
    assert (created.type, created.tags, created.content) == ("sticky", ("family",),
                                                             "User has two cats")
    assert not (files / "idea.md").exists() and (files / f"{created.id}.md").exists()
    assert loci.memory(kept.id).content == "The office is in Lisbon"
    second = loci.sync()
    assert second.unchanged == 3 and not (second.created or second.updated or second.deleted)


def test_both_sides_changed_is_a_conflict(loci: Loci, home: Path, clock: FakeClock) -> None:
    memory = loci.remember("Standup is at 9am", type="project_context")
    path = mirror_dir(home) / f"{memory.id}.md"
    path.write_text(path.read_text().replace("9am", "10am"))  # a human edit, not synced
    clock.advance(minutes=1)
    loci.memory_write("project_context", [], "Standup is at 9:30am", id=memory.id)
    assert "10am" in path.read_text()  # the unsynced human edit was not overwritten
    report = loci.sync()
    assert [c[0] for c in report.conflicts] == [memory.id]
    assert loci.memory(memory.id).content == "Standup is at 9:30am"
    # Taking the file's version: drop its updatedAt line and sync again.
    path.write_text("\n".join(line for line in path.read_text().splitlines()
                              if not line.startswith("updatedAt")) + "\n")
    assert loci.sync().updated == [memory.id]
    assert loci.memory(memory.id).content == "Standup is at 10am"


def test_sync_cli(home: Path, capsys: object) -> None:
    from loci.cli.app import main

    assert main(["remember", "Fact one", "--type", "sticky"]) == 0
    assert main(["sync"]) == 0
    files = list(mirror_dir(home).glob("*.md"))
    files[0].write_text("---\nid: [unclosed\n---\nbody\n")
    assert main(["sync"]) == 1  # an unreadable file is reported as a conflict


def test_an_edited_expiry_is_taken(loci: Loci, home: Path, clock: FakeClock) -> None:
    """``expiresAt`` edited in a file was left as the store had it (found by an attack:
    a user's edit silently ignored); an empty one means never."""
    later = loci.remember("The sprint ends on Friday", type="project_context")
    never = loci.remember("The office is in Lisbon", type="project_context")
    files = mirror_dir(home)
    clock.advance(minutes=5)
    for memory, line in ((later, "expiresAt: '2031-01-01T00:00:00Z'"),
                         (never, "expiresAt:")):
        path = files / f"{memory.id}.md"
        text = path.read_text()
        old = next(x for x in text.splitlines() if x.startswith("expiresAt:"))
        path.write_text(text.replace(old, line))
    report = loci.sync()
    assert sorted(report.updated) == sorted([later.id, never.id]) and not report.conflicts
    assert loci.memory(later.id).expires_at == datetime(2031, 1, 1, tzinfo=UTC)
    assert loci.memory(never.id).expires_at is None
    assert loci.memory(never.id).content == "The office is in Lisbon"
    assert loci.sync().unchanged == 2


def test_a_file_that_no_longer_reads_is_kept_and_the_reply_recorded(
        loci: Loci, home: Path, clock: FakeClock) -> None:
    """A memory file saved in another encoding, or with broken front matter, is the
    user's edit: a later change of the memory keeps it (sync reports it) and the reply
    that changed the memory is recorded."""
    loci.add("s", "user", "hello")
    loci.add_reply("s", "Sure. [MEMORY:sticky] The user's name is Zoe Smith [/MEMORY]")
    path = mirror_dir(home) / f"{loci.memories()[0].id}.md"
    for n, broken in enumerate((path.read_text().replace("Zoe", "Zoé").encode("latin-1"),
                                path.read_bytes().replace(b"type: sticky", b"type: [st"))):
        path.write_bytes(broken)
        clock.advance(minutes=1)
        loci.add("s", "user", "hi")
        loci.add_reply("s", f"Noted {n}. [MEMORY:sticky] The user's name is Zoe "
                            f"Smith-Jones{n} [/MEMORY]")
        assert path.read_bytes() == broken
        assert loci.events("s")[-1].content.startswith(f"Noted {n}.")
    assert [c[0] for c in loci.sync().conflicts] == [path.name]


def test_a_file_saved_with_a_byte_order_mark_keeps_its_front_matter(
        loci: Loci, home: Path, clock: FakeClock) -> None:
    memory = loci.remember("Beta fact about bananas", type="project_context", tags=["fruit"])
    path = mirror_dir(home) / f"{memory.id}.md"
    clock.advance(minutes=1)
    path.write_text("\ufeff" + path.read_text().replace("bananas", "ripe bananas"),
                    encoding="utf-8")
    assert loci.sync().updated == [memory.id]
    assert (loci.memory(memory.id).content, loci.memory(memory.id).tags) == (
        "Beta fact about ripe bananas", ("fruit",))


def test_a_misspelt_type_or_an_emptied_file_is_reported_and_nothing_changes(
        loci: Loci, home: Path, clock: FakeClock) -> None:
    """``type: stiky`` would make a fact that never expires one that does; a file
    emptied of its text is no edit to apply: each is a conflict naming its file, and
    the files after it are still synced."""
    sticky = loci.remember("The user's name is Zoe", type="sticky")
    emptied = loci.remember("Standup is at 9am", type="project_context")
    edited = loci.remember("User drinks tea", type="user_preference")
    files = mirror_dir(home)
    clock.advance(minutes=1)
    typo = files / f"{sticky.id}.md"
    typo.write_text(typo.read_text().replace("type: sticky", "type: stiky"))
    empty = files / f"{emptied.id}.md"
    empty.write_text(empty.read_text().replace("Standup is at 9am", ""))
    tea = files / f"{edited.id}.md"
    tea.write_text(tea.read_text().replace("tea", "coffee"))
    report = loci.sync()
    assert sorted(name for name, _ in report.conflicts) == sorted([typo.name, empty.name])
    assert "did you mean 'sticky'" in dict(report.conflicts)[typo.name]
    assert report.updated == [edited.id]
    assert (loci.memory(sticky.id).type, loci.memory(sticky.id).expires_at) == ("sticky", None)
    assert loci.memory(emptied.id).content == "Standup is at 9am"
