"""Killed erasures and migrations: does a rerun finish them, and is anything left?

Usage: python benchmarks/interrupted.py [--kills 20] [--users 8] [--sessions 4]
           [--before SRC]

A SQLite store of ``--users`` users (sessions, a memory, vectors; each user's text has
a word of their own) is built; then ``--kills`` times, on a fresh copy of it:

- ``loci user erase maya --yes`` is killed with SIGKILL at a point spread over its run
  (the k-th of ``--kills`` points spread from the end of its start-up, the time of
  ``loci --help``, to its end, timed on a first run that is not killed), and run again;
- ``loci migrate`` into a new SQLite file is killed the same way, and run again.

A run that had finished by its kill point (a migration whose target already equals its
source) is tried again with the point 15% earlier, so that each of the ``--kills``
points interrupts a run. Counted: reruns that succeed (an erasure's rerun may also say,
rightly, that the user is gone when the first run had finished all its work before the
kill), erasures that leave the user's word in any file of the store's folder (database,
log, memory files); half-copied targets that opened as a normal store, and targets
that differ from the source in the end (every scope's rows and vectors, the keys, and
no unfinished mark). ``--before SRC`` runs the same with another source
tree first (``git archive <commit> src | tar -x -C DIR``), so both come from one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine

WORD = "zebracrossing"
#: A run that ended before its kill is tried again this much earlier, up to MAX_TRIES.
EARLIER = 0.85
MAX_TRIES = 8


def build(url: str, users: int, sessions: int) -> None:
    from loci import Loci

    for n in range(users):
        user = "maya" if n == 0 else f"user{n}"
        with Loci.open(store=url, user=user) as loci:
            for s in range(sessions):
                loci.add_events(f"s{s}", [
                    {"role": "user", "content": f"{WORD}{user} said line {i} of {s}"}
                    for i in range(200)])
            loci.remember(f"{user} keeps the code {WORD}{user}")
            loci.wait_indexed(120)


def loci(src: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(src), "LOCI_HOME": str(home),
           "LOCI_EMBEDDING_PROVIDER": "hash"}
    return subprocess.Popen([sys.executable, "-m", "loci", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def killed_at(process: subprocess.Popen[str], seconds: float) -> bool:
    """Kill ``process`` after ``seconds``; whether it was still running."""
    try:
        process.wait(seconds)
        return False
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.communicate()
        return True


def residue(home: Path, word: str) -> bool:
    needle = word.encode()
    return any(needle in p.read_bytes() for p in home.rglob("*") if p.is_file())


def opens(src: Path, home: Path, url: str) -> bool:
    """Whether a half-copied target opens as a normal store."""
    done = loci(src, home, "sessions", "--store", url, "--user", "maya")
    done.communicate(timeout=120)
    return done.returncode == 0


def holds_scopes(url: str) -> bool:
    from loci import open_store

    store = open_store(url, migrating=True)
    try:
        return bool(store.list_scopes())
    finally:
        store.close()


def same_store(a: str, b: str) -> bool:
    from loci import open_store

    first, second = open_store(a), open_store(b, migrating=True)
    try:
        return all(
            (x.events, x.memories, x.state, x.documents,
             {k: v[0] for k, v in x.vectors.items()}) ==
            (y.events, y.memories, y.state, y.documents,
             {k: v[0] for k, v in y.vectors.items()})
            for x, y in ((first.export_scope(s), second.export_scope(s))
                         for s in first.list_scopes())
        ) and first.list_scopes() == second.list_scopes() and (
            first.export_api_keys() == second.export_api_keys()) and (
            second.copying_from() is None)
    finally:
        first.close()
        second.close()


def timed(src: Path, home: Path, *args: str) -> float:
    started = time.monotonic()
    done = loci(src, home, *args)
    done.communicate(timeout=300)
    return time.monotonic() - started


def erasures(src: Path, seed: Path, kills: int) -> dict[str, int]:
    counts = {"killed": 0, "retried later": 0, "rerun ok": 0, "residue": 0}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        shutil.copytree(seed, home)
        url = f"sqlite:///{home / 'loci.db'}"
        start, span = timed(src, home, "--help"), timed(src, home, "user", "erase", "maya",
                                                          "--yes", "--store", url)
        erase = ("user", "erase", "maya", "--yes", "--store", url)
        for k in range(kills):
            delay = start + (span - start) * (k + 0.5) / kills
            for _ in range(MAX_TRIES):
                shutil.rmtree(home)
                shutil.copytree(seed, home)
                if killed_at(loci(src, home, *erase), delay):
                    counts["killed"] += 1
                    break
                counts["retried later"] += 1
                delay *= EARLIER
            rerun = loci(src, home, *erase)
            _, err = rerun.communicate(timeout=300)
            counts["rerun ok"] += rerun.returncode == 0 or "no user 'maya'" in err
            counts["residue"] += residue(home, f"{WORD}maya")
    return counts


def migrations(src: Path, seed: Path, kills: int) -> dict[str, int]:
    counts = {"killed": 0, "retried later": 0, "opened half-copied": 0, "rerun ok": 0,
              "different": 0}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        source = f"sqlite:///{seed / 'loci.db'}"
        start = timed(src, home, "--help")
        span = timed(src, home, "migrate", "--from", source, "--to",
                     f"sqlite:///{home / 'probe.db'}")
        for k in range(kills):
            delay = start + (span - start) * (k + 0.5) / kills
            for attempt in range(MAX_TRIES):
                target = f"sqlite:///{home / f'target{k}-{attempt}.db'}"
                first = loci(src, home, "migrate", "--from", source, "--to", target)
                if killed_at(first, delay) and not same_store(source, target):
                    counts["killed"] += 1
                    break
                counts["retried later"] += 1  # it had finished: kill it earlier
                delay *= EARLIER
            counts["opened half-copied"] += holds_scopes(target) and opens(src, home, target)
            rerun = loci(src, home, "migrate", "--from", source, "--to", target)
            rerun.communicate(timeout=300)
            counts["rerun ok"] += rerun.returncode == 0
            counts["different"] += not same_store(source, target)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--before", type=Path, help="a source tree to measure first")
    args = parser.parse_args()
    os.environ["LOCI_EMBEDDING_PROVIDER"] = "hash"
    here = Path(__file__).resolve().parent.parent / "src"
    print(f"{machine()}; {args.kills} kills each, {args.users} users x {args.sessions} "
          "sessions x 200 events")
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "seed"
        seed.mkdir()
        os.environ["LOCI_HOME"] = str(seed)
        build(f"sqlite:///{seed / 'loci.db'}", args.users, args.sessions)
        for name, src in (("before", args.before), ("after", here)):
            if src is None:
                continue
            print(f"{name:6}: user erase {erasures(src, seed, args.kills)}")
            print(f"{name:6}: migrate    {migrations(src, seed, args.kills)}")


if __name__ == "__main__":
    main()
