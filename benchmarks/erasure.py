"""Erasure benchmark: how long erasing one user of ten takes, and what it leaves.

Usage: python benchmarks/erasure.py [--events 100000] [--others 10000] [--json]

Ten users in one SQLite store, no embedder (the log and its full-text index): the
erased user holds ``--events`` events in 100 sessions plus memories and documents, the
nine others ``--others`` events each. Measured: the erasure's seconds, the same store's
``VACUUM`` in the same run as a baseline (a rewrite of the whole file), the bytes of the
erased user's marker word left anywhere under the home directory (0 is the target), and
whether the other users' exports are unchanged.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, sentence
from loci import Memory, Runtime, Scope
from loci.models import NewEvent
from loci.store import ScopeData

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MARKER = "qzxerasemarker"


def fill(runtime: Runtime, user: str, events: int, rng: random.Random) -> None:
    store = runtime.store
    scope = Scope(user, "helper")
    marker = MARKER if user == "user0" else "keptword"
    for start in range(0, events, 1000):
        batch = [NewEvent("message", "user", f"{sentence(rng)} {marker}", T0, tokens=20)
                 for _ in range(min(1000, events - start))]
        store.append_events(scope, f"s{start // 1000 % 100}", batch)
    store.put_memories(scope, [Memory(f"mem_{user}_{i}", "fact", f"{marker} fact {i}", (),
                                      T0, T0) for i in range(200)])


def rows_of(runtime: Runtime, scope: Scope) -> ScopeData:
    """A scope's export without its vectors (there are none: no embedder)."""
    return replace(runtime.store.export_scope(scope), vectors={})


def occurrences(home: Path, word: str) -> int:
    return sum(p.read_bytes().count(word.encode()) for p in home.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--others", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        db = home / "loci.db"
        runtime = Runtime.open(home=str(home), store=f"sqlite:///{db}",
                               embedding_provider="none", memory_mirror=False)
        for n in range(10):
            fill(runtime, f"user{n}", args.events if n == 0 else args.others, rng)
        others = {s: rows_of(runtime, s) for s in runtime.store.list_scopes()
                  if s.tenant != "user0"}
        before = occurrences(home, MARKER)
        start = time.perf_counter()
        erased = runtime.erase_user("user0")
        seconds = time.perf_counter() - start
        left = occurrences(home, MARKER)
        unchanged = all(rows_of(runtime, s) == data for s, data in others.items())
        runtime.close()
        start = time.perf_counter()
        with sqlite3.connect(db) as raw:
            raw.execute("VACUUM")
        vacuum = time.perf_counter() - start
    result = {"events": args.events, "others": 9 * args.others, "rows": erased.rows,
              "erase_s": round(seconds, 2), "vacuum_s": round(vacuum, 2),
              "marker_bytes_before": before, "marker_left": left,
              "others_unchanged": unchanged, "machine": machine()}
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
