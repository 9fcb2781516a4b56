"""The memory of a long-running `loci serve` under proxied calls: does it stay flat?

Usage: python benchmarks/proxy_memory.py [--calls 10000] [--warmup 1000]
           [--sessions 50] [--idle 30] [--before SRC]

`loci serve` runs in its own process (SQLite, hash embedder) with the package's fake
provider (``loci.testing.fake_provider``) as its OpenAI-compatible upstream, in this
process. A client sends Chat Completions calls through the proxy, round robin over
``--sessions`` sessions, each call a new user message (the client's whole list is not
resent: Loci keeps the history). The server's resident set size (``VmRSS`` of its
process, from ``/proc``) is read after ``--warmup`` calls, every 1,000 calls after
that (``--every``), and after ``--idle`` seconds without calls. ``--before SRC`` measures a server
started from another source tree first (``git archive <commit> src | tar -x -C DIR``),
so both figures come from one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from common import machine, serve
from loci.testing import FakeProvider
from server_load import free_port


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A size of ``/proc/<pid>/status`` in MB: ``VmRSS`` (resident), ``RssAnon`` (the
    heap: Python's objects, SQLite's page caches), ``RssFile`` (pages of mapped files:
    the database, read through SQLite's memory map)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def start(home: Path, src: Path, port: int, upstream: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LOCI_HOME": str(home), "PYTHONPATH": str(src),
           "LOCI_EMBEDDING_PROVIDER": "hash", "LOCI_PROXY_PROVIDER": "openai",
           "LOCI_PROXY_BASE_URL": f"{upstream}/v1", "LOCI_PROXY_API_KEY": "sk-fake"}
    return serve(port, ["--store", f"sqlite:///{home / 'loci.db'}"], env)


def call(http: httpx.Client, n: int, sessions: int) -> None:
    answer = http.post("/v1/chat/completions", headers={"X-Loci-Session": f"s{n % sessions}"},
                       json={"model": "gpt-4o", "messages": [
                           {"role": "system", "content": "You are a helpful assistant."},
                           {"role": "user", "content": f"Turn {n}: note item {n} of project "
                                                       f"{n % 7} and what we plan next."}]})
    answer.raise_for_status()


Reading = tuple[str, float, float, float]  # label, VmRSS, RssAnon, RssFile (MB)


def reading(label: str, pid: int) -> Reading:
    return (label, rss_mb(pid), rss_mb(pid, "RssAnon"), rss_mb(pid, "RssFile"))


def run(src: Path, args: argparse.Namespace) -> tuple[list[Reading], float]:
    readings: list[Reading] = []
    with tempfile.TemporaryDirectory() as tmp, FakeProvider(
            reply=lambda body: "Noted, I will keep that in mind.") as upstream:
        port = free_port()
        server = start(Path(tmp), src, port, upstream.url)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                started = time.monotonic()
                for n in range(args.warmup + args.calls):
                    call(http, n, args.sessions)
                    done = n + 1 - args.warmup
                    if done >= 0 and done % args.every == 0:
                        upstream.requests.clear()  # the fake provider's own record
                        readings.append(reading(f"{done:,} calls", server.pid))
                rate = (args.warmup + args.calls) / (time.monotonic() - started)
                time.sleep(args.idle)
                readings.append(reading(f"idle {args.idle:g} s", server.pid))
        finally:
            server.terminate()
            server.wait(30)
    return readings, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--every", type=int, default=1000, help="calls between readings")
    parser.add_argument("--before", type=Path, help="a source tree to measure first")
    args = parser.parse_args()
    print(f"{machine()}; {args.warmup:,} warm-up calls then {args.calls:,}, "
          f"{args.sessions} sessions; the server's VmRSS (RssAnon + RssFile) in MB")
    here = Path(__file__).resolve().parent.parent / "src"
    for name, src in (("before", args.before), ("after", here)):
        if src is None:
            continue
        readings, rate = run(src, args)
        print(f"{name}: {rate:.0f} calls/s")
        for label, rss, anon, mapped in readings:
            print(f"  {label:>14}: {rss:6.0f} ({anon:.0f} + {mapped:.0f})")
        first, last = readings[0][1], readings[-2][1]
        print(f"  from the warm-up on: {(last - first) / first * 100:+.1f}%")


if __name__ == "__main__":
    main()
