"""A session that runs for ever: compile latency as its compactions pile up.

Usage: python benchmarks/long_lived.py [--compactions 0,100,300,1000] [--compiles 50]

One session of 40 messages; its compaction records (each with a summary of ~600
words, as a long session's are) are added through the store's own ``add_compaction``
until the session has each count, and the same message is compiled ``--compiles``
times at each. Reported: compile p50 and p95 in ms by count. Run it from another tree
(``PYTHONPATH=<tree>/src``) for a before/after in the same minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, percentiles
from loci import Loci, load_settings
from loci.store.values import NewCompaction

SUMMARY = "The user asked about tides, boats and harbour fees; we compared options. " * 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compactions", default="0,100,300,1000")
    parser.add_argument("--compiles", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp())
    settings = load_settings(store=f"sqlite:///{home / 'l.db'}", home=home,
                             embedding_provider="hash", memory_mirror=False,
                             compaction_auto=False)
    rows = []
    with Loci(settings) as loci:
        for i in range(40):
            loci.add("s", "user" if i % 2 == 0 else "assistant", f"message {i} about tides")
        loci.wait_indexed()
        held = 0
        for count in sorted(int(n) for n in args.compactions.split(",")):
            for _ in range(count - held):
                loci.store.add_compaction(loci.scope, NewCompaction(
                    "s", "summarize", 1, 2, None, SUMMARY, 1000, 100, datetime.now(UTC)))
            held = count
            loci.compile("s", "what about the tides?")  # warm
            times = []
            for _ in range(args.compiles):
                start = time.perf_counter()
                loci.compile("s", "what about the tides?")
                times.append((time.perf_counter() - start) * 1000)
            rows.append({"compactions": count, **percentiles(times)})
    if args.json:
        print(json.dumps({"machine": machine(), "rows": rows}))
        return
    print(machine())
    for row in rows:
        print(f"{row['compactions']:>6} compactions: compile p50 {row['p50_ms']} ms, "
              f"p95 {row['p95_ms']} ms")


if __name__ == "__main__":
    main()
