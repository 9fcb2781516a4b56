"""Clean exits while the vector graph is being built (issue #26, item 6).

Usage: python benchmarks/shutdown.py [--runs 100] [--events 6000] [--json]

A store with ``--events`` embedded events in one session (above the threshold from
which searches build an HNSW graph in a background thread) is made once. Each run is a
new process on a fresh copy of it (no saved graph): it opens the engine, appends 500
more events (their vectors written as it goes), searches (which starts the graph build),
and exits at once, half of the runs after ``close()``, half without. An abort (a
negative exit code, or "terminate called" from a native thread outliving the
interpreter) is counted.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, sentence
from loci import Loci, load_settings


def settings(home: Path) -> object:
    return load_settings(store=f"sqlite:///{home / 'loci.db'}", home=str(home),
                         workspace=str(home), embedding_provider="hash",
                         memory_mirror=False, compaction_auto=False)


def prepare(home: Path, events: int) -> None:
    rng = random.Random(4)
    with Loci(settings(home)) as loci:  # type: ignore[arg-type]
        for start in range(0, events, 2_000):
            loci.add_events("big", [{"role": "user", "content": sentence(rng, 14)}
                                    for _ in range(min(2_000, events - start))])


def child(home: Path, close: bool) -> None:
    rng = random.Random()
    loci = Loci(settings(home))  # type: ignore[arg-type]
    loci.add_events("big", [{"role": "user", "content": sentence(rng, 14)}
                            for _ in range(500)])
    loci.search_conversation("which file did the build read?", limit=5)
    if close:
        loci.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--events", type=int, default=6_000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--no-close", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, close=not args.no_close)
        return
    started = time.perf_counter()
    aborts = {"close": 0, "no_close": 0}
    with tempfile.TemporaryDirectory() as name:
        base = Path(name) / "base"
        base.mkdir()
        prepare(base, args.events)
        for run in range(args.runs):
            mode = "close" if run % 2 == 0 else "no_close"
            home = Path(name) / f"run{run}"
            shutil.copytree(base, home, ignore=shutil.ignore_patterns("*.usearch", "*.json"))
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(home),
                 *(["--no-close"] if mode == "no_close" else [])],
                capture_output=True, text=True, timeout=300, check=False)
            if done.returncode != 0 or "terminate called" in done.stderr:
                aborts[mode] += 1
                print(f"run {run} ({mode}): exit {done.returncode}: {done.stderr[-300:]}",
                      file=sys.stderr)
            shutil.rmtree(home)
    figures = {"runs": args.runs, "aborts_with_close": aborts["close"],
               "aborts_without_close": aborts["no_close"],
               "seconds": round(time.perf_counter() - started)}
    print(json.dumps(figures) if args.json else f"{machine()}\n{figures}")


if __name__ == "__main__":
    main()
