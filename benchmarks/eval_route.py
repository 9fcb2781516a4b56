"""The dashboard's eval route on a real session: how long a request takes and what it
costs a running server in memory.

A real Claude Code session of the dev set is imported with ``loci import --format
anthropic`` into a fresh store, a ``loci serve`` process serves it, and
``GET /api/sessions/<id>/eval`` is called ``--repeat`` times in a row; after each call
the server's resident memory (``VmRSS``) and its peak (``VmHWM``) are read from
``/proc``. The route replays the session into a scratch store per window, so each
request builds and closes a runtime (store, indexer, bundled embedder) per window.

    python benchmarks/eval_route.py --data ../shared/data/claude_code_sessions/cc-3af9b1a7.json.gz
        [--windows 32000] [--points 0.25,0.5,0.75,1] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from common import machine, serve
from proxy_memory import rss_mb
from server_load import free_port

SRC = Path(__file__).resolve().parents[1] / "src"


def run(data: Path, windows: str, points: str, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="loci-eval-route-") as tmp:
        home = Path(tmp)
        log = home / "session.json"
        with gzip.open(data, "rt", encoding="utf-8") as handle:
            log.write_text(handle.read(), encoding="utf-8")
        store = f"sqlite:///{home / 'loci.db'}"
        env = {**os.environ, "LOCI_HOME": str(home), "PYTHONPATH": str(SRC)}
        subprocess.run([sys.executable, "-m", "loci", "import", "--format", "anthropic",
                        str(log), "--session", "s", "--store", store], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        port = free_port()
        server = serve(port, ["--store", store], env)
        try:
            idle = rss_mb(server.pid)
            calls = []
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as http:
                for _ in range(repeat):
                    started = time.perf_counter()
                    answer = http.get("/api/sessions/s/eval",
                                      params={"windows": windows, "points": points})
                    answer.raise_for_status()
                    calls.append({"seconds": round(time.perf_counter() - started, 2),
                                  "rss_mb": round(rss_mb(server.pid)),
                                  "peak_mb": round(rss_mb(server.pid, "VmHWM"))})
            reports = answer.json()["reports"]
        finally:
            server.terminate()
            server.wait(timeout=30)
    return {"data": data.name, "windows": windows, "points": points, "machine": machine(),
            "idle_rss_mb": round(idle), "calls": calls,
            "contexts": [r["contexts"] for r in reports]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--windows", default="32000")
    parser.add_argument("--points", default="0.25,0.5,0.75,1")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.data, args.windows, args.points, args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['data']}: windows {result['windows']}, points {result['points']}, "
          f"{result['contexts']} compiles; idle server {result['idle_rss_mb']} MB "
          f"({result['machine']})")
    for n, call in enumerate(result["calls"], 1):
        print(f"  call {n}: {call['seconds']} s, RSS after {call['rss_mb']} MB, "
              f"peak {call['peak_mb']} MB")


if __name__ == "__main__":
    main()
