"""``loci sync`` deletes a memory only when its file left the folder that held it: the
reproductions of data loss by sync (a second workspace, another store, a moved or emptied
folder, a folder from before markers), the confirmation of many deletions, the dry run,
and deleted memories brought back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loci import ConflictError, Loci
from loci.cli.app import main
from tests.conftest import FakeClock, open_loci


def _facts(loci: Loci, n: int) -> list[str]:
    return [loci.remember(f"Fact number {i}: the staging host is node-{i}.").id
            for i in range(n)]


def test_sync_from_another_folder_deletes_nothing(home: Path, tmp_path: Path) -> None:
    """`loci remember --workspace ./agent` twice, then a plain `loci sync` from the
    parent folder: on main this said "deleted 2" and both memories were gone."""
    agent = tmp_path / "agent"
    assert main(["remember", "Deploys happen on Fridays", "--workspace", str(agent)]) == 0
    assert main(["remember", "The API key rotates monthly", "--workspace", str(agent)]) == 0
    assert len(list((agent / "memory").glob("*.md"))) == 2
    assert main(["sync"]) == 0
    with Loci.open() as loci:
        assert sorted(m.content for m in loci.memories()) == [
            "Deploys happen on Fridays", "The API key rotates monthly"]
    assert not list((home / "memory").glob("*.md"))  # and no copies scattered here


def test_sync_after_a_demo_into_a_store_deletes_nothing(home: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """`loci demo --store X` then `loci sync --user maya --store X` said "deleted 7"."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["demo", "--store", url]) == 0
    said = capsys.readouterr().out
    assert "gone" not in said and f"stay in {url}" in said
    with Loci.open(store=url, user="maya") as loci:
        before = {m.id for m in loci.memories()}
    assert len(before) >= 5
    assert main(["sync", "--user", "maya", "--store", url]) == 0
    assert "deleted 0" in capsys.readouterr().out
    with Loci.open(store=url, user="maya") as loci:
        assert {m.id for m in loci.memories()} == before


def test_a_second_workspace_deletes_nothing(home: Path, tmp_path: Path,
                                            clock: FakeClock) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    with open_loci(home, clock, workspace=str(one)) as loci:
        first = _facts(loci, 3)
    with open_loci(home, clock, workspace=str(two)) as loci:
        second = loci.remember("Only the second workspace wrote this fact.").id
        report = loci.sync()  # `two` holds a memory file: it gets the others' files too
        assert report.deleted == [] and sorted(report.written) == sorted(first)
        assert {m.id for m in loci.memories()} == {*first, second}
    with open_loci(home, clock, workspace=str(one)) as loci:
        report = loci.sync()
        assert report.deleted == [] and report.written == [second]


def test_a_folder_of_another_store_is_refused(home: Path, tmp_path: Path,
                                              clock: FakeClock) -> None:
    """Two stores with one home share its memory folder: the first to write owns it."""
    with open_loci(home, clock, store=f"sqlite:///{tmp_path / 'a.db'}") as loci:
        theirs = _facts(loci, 2)
    files = sorted((home / "memory").glob("*.md"))
    with open_loci(home, clock, store=f"sqlite:///{tmp_path / 'b.db'}") as other:
        kept = _facts(other, 1)
        assert sorted((home / "memory").glob("*.md")) == files  # not written there
        with pytest.raises(ConflictError, match="another store"):
            other.sync()
        assert [m.id for m in other.memories()] == kept
    assert main(["sync", "--store", f"sqlite:///{tmp_path / 'b.db'}"]) == 2
    with open_loci(home, clock, store=f"sqlite:///{tmp_path / 'a.db'}") as loci:
        assert loci.sync().created == []  # nor taken in by the folder's own store
        assert sorted(m.id for m in loci.memories()) == sorted(theirs)


def test_a_folder_of_another_scope_is_refused(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        alice, bob = loci.for_scope("alice"), loci.for_scope("bob")
        _facts(alice, 2)
        kept = _facts(bob, 2)
        theirs, mine = home / "memory" / "alice" / "default", home / "memory" / "bob" / "default"
        shutil.rmtree(mine)
        shutil.copytree(theirs, mine)  # bob's folder is now a copy of alice's
        with pytest.raises(ConflictError, match="user 'alice'"):
            bob.sync()
        assert sorted(m.id for m in bob.memories()) == sorted(kept)


def test_an_emptied_folder_deletes_nothing_and_says_why(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        ids = _facts(loci, 4)
        for path in (home / "memory").glob("*.md"):
            path.unlink()  # the marker stays: the folder was this store's mirror
        report = loci.sync()
        assert report.deleted == [] and sorted(i for i, _ in report.kept) == sorted(ids)
        assert all("holds no memory files" in why for _, why in report.kept)
        assert len(loci.memories()) == 4
        shutil.rmtree(home / "memory")  # moved or unmounted: no marker at all
        assert loci.sync().deleted == [] and len(loci.memories()) == 4


def test_many_deletions_need_confirmation_and_stay_recoverable(
        home: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    with open_loci(home, clock) as loci:
        ids = _facts(loci, 10)
        for memory_id in ids[:7]:
            (home / "memory" / f"{memory_id}.md").unlink()
        dry = loci.sync(dry_run=True, confirm=True)
        assert dry.dry_run and sorted(dry.deleted) == sorted(ids[:7])
        assert len(loci.memories()) == 10  # a dry run changes nothing
        held = loci.sync()
        assert held.needs_confirmation and held.deleted == []
        assert "--yes" in held.kept[0][1] and len(loci.memories()) == 10
        clock.advance(minutes=1)
        done = loci.sync(confirm=True)
        assert sorted(done.deleted) == sorted(ids[:7])
        assert sorted(m.id for m in loci.memories()) == sorted(ids[7:])
        history = loci.memory_history(ids[0])
        assert "Fact number 0" in history[-1].content and "deleted" in history[-1].reason
        restored = loci.restore(ids[0])
        assert restored.expires_at is not None and restored.expires_at > clock()
        assert ids[0] in {m.id for m in loci.memories()}
        assert (home / "memory" / f"{ids[0]}.md").is_file()
        assert loci.sync().deleted == []  # the others stay retired, not deleted again


def test_the_cli_holds_back_many_deletions_and_restores(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(4):
        assert main(["remember", f"Fact number {n}: the staging host is node-{n}."]) == 0
    paths = sorted((home / "memory").glob("*.md"))
    for path in paths[:3]:
        path.unlink()
    capsys.readouterr()
    assert main(["sync", "--dry-run", "--yes"]) == 0
    assert "would be deleted" in capsys.readouterr().out
    assert main(["sync"]) == 1  # held back: the exit code says it needs attention
    assert "--yes" in capsys.readouterr().out
    assert main(["sync", "--yes"]) == 0
    gone = paths[0].stem
    assert f"`loci restore {gone}` brings it back" in capsys.readouterr().out
    assert main(["restore", gone]) == 0 and f"restored {gone}" in capsys.readouterr().out
    assert paths[0].is_file()
    assert main(["restore", gone]) == 2  # not retired any more: a clear error


def test_one_deleted_file_deletes_its_memory(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        ids = _facts(loci, 3)
        (home / "memory" / f"{ids[1]}.md").unlink()
        assert loci.sync().deleted == [ids[1]]
        assert sorted(m.id for m in loci.memories()) == sorted([ids[0], ids[2]])


def test_a_folder_from_before_markers_is_adopted_without_deleting(home: Path,
                                                                  clock: FakeClock) -> None:
    with open_loci(home, clock) as loci:
        ids = _facts(loci, 3)
        (home / "memory" / ".loci-mirror.json").unlink()
        for memory in loci.memories():  # as versions before markers stored them
            loci.store.put_memory(loci.scope, _legacy(memory))
        (home / "memory" / f"{ids[0]}.md").unlink()
        first = loci.sync()
        assert first.deleted == [] and first.written == [ids[0]]  # written back, not lost
        assert json.loads((home / "memory" / ".loci-mirror.json").read_text())["id"]
        (home / "memory" / f"{ids[0]}.md").unlink()
        assert loci.sync().deleted == [ids[0]]  # adopted: now a deletion is one


def _legacy(memory: object) -> object:
    from dataclasses import replace

    from loci import Memory

    assert isinstance(memory, Memory)
    return replace(memory, metadata={"mirrored": True})
