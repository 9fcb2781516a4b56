"""An erasure or a migration killed at any point finishes when it is run again, and
leaves nothing behind: real ``loci`` processes killed with SIGKILL at the moment the
rows are gone (the scrub still owed), after a few scopes of a copy, and at fixed times.
``benchmarks/interrupted.py`` does it 20 times each and records the figures."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest

import loci as loci_module
from loci import Loci, StoreError, open_store
from tests.pg import PgTemplate
from tests.store.test_transfer import snapshot

SECRET = "zebracrossing"  # one word, lower case: FTS5 keeps its tokens as they are
USERS = ("maya", "omar", "ines", "tariq")


def build(url: str, users: tuple[str, ...] = USERS, sessions: int = 3) -> None:
    """Users with sessions, memories and vectors, each with a word of their own."""
    for user in users:
        with Loci.open(store=url, user=user) as loci:
            for s in range(sessions):
                loci.add_events(f"s{s}", [
                    {"role": "user", "content": f"{SECRET}{user} said line {i} of {s}"}
                    for i in range(40)])
            loci.remember(f"{user} keeps the code {SECRET}{user}")
            assert loci.wait_indexed(60)


def start(*args: str) -> subprocess.Popen[str]:
    src = str(Path(loci_module.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": src, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "loci", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(*args: str) -> subprocess.CompletedProcess[str]:
    done = start(*args)
    out, err = done.communicate(timeout=120)
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def kill_when(process: subprocess.Popen[str], ready: Callable[[], bool]) -> None:
    """SIGKILL ``process`` as soon as ``ready()`` (polled every millisecond)."""
    deadline = time.monotonic() + 60
    while process.poll() is None and not ready() and time.monotonic() < deadline:
        time.sleep(0.001)
    process.kill()
    process.communicate()  # and close its pipes


def residue(home: Path, word: str) -> list[str]:
    """Files under ``home`` whose bytes hold ``word``."""
    needle = word.encode()
    return [str(p) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes()]


@contextmanager
def holding(db: Path) -> Iterator[None]:
    """A read transaction on ``db`` for the time of the block."""
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM meta").fetchone()
        yield
    finally:
        reader.execute("COMMIT")
        reader.close()


def rows_of(db: Path, user: str) -> Callable[[], bool]:
    """Whether ``user``'s events are gone, read as another process reads the file."""
    def gone() -> bool:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.01) as con:
                return not con.execute("SELECT count(*) FROM events WHERE tenant = ?",
                                       (user,)).fetchone()[0]
        except sqlite3.OperationalError:
            return False
    return gone


@pytest.mark.parametrize("point", ["rows gone", 0.2, 0.4])
def test_a_killed_user_erasure_finishes_on_rerun(home: Path, point: object) -> None:
    db = home / "loci.db"
    url = f"sqlite:///{db}"
    build(url, USERS[:2])
    erase = start("user", "erase", "maya", "--yes", "--store", url)
    if point == "rows gone":
        # A reader (a server, say) holds the log: the scrub waits to empty it, and the
        # kill lands while it is owed.
        with holding(db):
            kill_when(erase, lambda: _meta(db, "scrub_pending"))
        assert erase.returncode == -signal.SIGKILL and rows_of(db, "maya")()
    else:
        assert isinstance(point, float)
        kill_when(erase, lambda: time.sleep(point) or True)  # type: ignore[func-returns-value]
    owed = _meta(db, "scrub_pending") or not rows_of(db, "maya")()
    rerun = finish("user", "erase", "maya", "--yes", "--store", url)
    if owed:
        assert rerun.returncode == 0, rerun.stderr
        assert "purged" in rerun.stdout
    else:  # it had finished before the kill: nothing is left to do
        assert rerun.returncode == 2 and "no user 'maya'" in rerun.stderr
    assert residue(home, f"{SECRET}maya") == []
    assert residue(home, f"{SECRET}omar")  # the check sees text where it is
    with Loci.open(store=url) as loci:
        assert loci.runtime.agents("maya") == [] and loci.runtime.agents("omar")


def test_a_killed_migration_resumes_on_rerun(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    build(source)
    original = open_store(source)
    expected = snapshot(original)
    original.close()
    for scopes_copied in (0, 2):
        target = killed_migration(source, tmp_path, scopes_copied)
        with pytest.raises(StoreError, match="unfinished copy"):
            Loci.open(store=target)
        rerun = finish("migrate", "--from", source, "--to", target)
        assert rerun.returncode == 0, rerun.stderr
        copied = open_store(target)
        try:
            assert snapshot(copied) == expected
        finally:
            copied.close()
        with Loci.open(store=target, user="maya") as loci:  # a normal store now
            assert loci.search_conversation(f"{SECRET}maya")


def test_a_resumed_migration_takes_what_the_source_changed_since(tmp_path: Path) -> None:
    """Written to or erased in the source between the kill and the rerun: the copy is
    the source as it is at the rerun, not as it was when those scopes were copied."""
    source = f"sqlite:///{tmp_path / 'source.db'}"
    build(source)
    target = killed_migration(source, tmp_path, 2)
    for user in USERS[1:]:
        with Loci.open(store=source, user=user) as loci:
            loci.add("s0", "user", f"written after the kill by {user}")
    with Loci.open(store=source, user=USERS[0]) as loci:
        loci.runtime.erase_user(USERS[0])
    rerun = finish("migrate", "--from", source, "--to", target)
    assert rerun.returncode == 0, rerun.stderr
    original, copied = open_store(source), open_store(target)
    try:
        assert snapshot(copied) == snapshot(original)
        assert USERS[0] not in {scope.tenant for scope in copied.list_scopes()}
    finally:
        original.close()
        copied.close()


def killed_migration(source: str, tmp_path: Path, scopes_copied: int) -> str:
    """The URL of a target whose ``loci migrate`` was killed once it had marked the
    target (``scopes_copied`` 0) or copied that many scopes. On a loaded machine the
    copy may finish between the poll that sees the mark and the kill: then again."""
    for attempt in range(5):
        target_db = tmp_path / f"target-{scopes_copied}-{attempt}.db"
        copy = start("migrate", "--from", source, "--to", f"sqlite:///{target_db}")
        assert copy.stdout is not None
        if scopes_copied:
            lines = [copy.stdout.readline() for _ in range(scopes_copied)]
            assert all("events" in line for line in lines), lines
            copy.kill()
            copy.communicate()
        else:
            kill_when(copy, partial(_meta, target_db, "migrating_from"))
        if copy.returncode != 0:
            return f"sqlite:///{target_db}"
    raise AssertionError("the migration finished before every kill")


def _meta(db: Path, key: str) -> bool:
    """Whether the store at ``db`` holds the ``meta`` key ``key``."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.01) as con:
            return bool(con.execute("SELECT count(*) FROM meta WHERE key = ?",
                                    (key,)).fetchone()[0])
    except sqlite3.OperationalError:
        return False


def test_a_copy_into_postgresql_killed_midway_resumes(
        tmp_path: Path, pg_template: PgTemplate) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    build(source)
    original = open_store(source)
    expected = snapshot(original)
    original.close()
    target = pg_template.fresh()
    try:
        copy = start("migrate", "--from", source, "--to", target)
        assert copy.stdout is not None
        assert "events" in copy.stdout.readline()
        copy.kill()
        copy.communicate()
        with pytest.raises(StoreError, match="unfinished copy"):
            Loci.open(store=target)
        rerun = finish("migrate", "--from", source, "--to", target)
        assert rerun.returncode == 0, rerun.stderr
        assert "vectors written again" in rerun.stdout
        copied = open_store(target)
        try:
            assert snapshot(copied) == expected
        finally:
            copied.close()
    finally:
        pg_template.drop(target)
