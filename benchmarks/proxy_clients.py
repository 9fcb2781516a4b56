"""Calls per second through the proxy to a loopback upstream: does keeping the upstream's
HTTP client for the server's life (instead of building one per request) pay?

Usage: python benchmarks/proxy_clients.py --before SRC [--calls 300] [--rounds 2]

`loci serve` (SQLite, hash embedder) runs from ``--before SRC`` (a source tree from
``git archive <commit> src | tar -x -C DIR``) and from this tree, ``--rounds`` times in
turn, each answering ``--calls`` Chat Completions calls (after 20 of warm-up) from one
client, round robin over 50 sessions, to the package's fake provider in this process.
The fake provider speaks HTTP/1.0 (a connection per request), so what is measured is
the client's construction (its TLS context, certificates loaded, even for http://), not
the reuse of connections, which a TLS upstream adds to.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from common import machine
from loci.testing import FakeProvider
from proxy_memory import call, start
from server_load import free_port


def rate(src: Path, calls: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, FakeProvider(
            reply=lambda body: "Noted.") as upstream:
        port = free_port()
        server = start(Path(tmp), src, port, upstream.url)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                for n in range(20):
                    call(http, n, 50)
                began = time.monotonic()
                for n in range(20, 20 + calls):
                    call(http, n, 50)
                return calls / (time.monotonic() - began)
        finally:
            server.terminate()
            server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{machine()}; {args.calls} calls a round, {args.rounds} rounds")
    here = Path(__file__).resolve().parent.parent / "src"
    for round_ in range(args.rounds):
        for name, src in (("before", args.before), ("after", here)):
            print(f"round {round_ + 1}, {name}: {rate(src, args.calls):.1f} calls/s",
                  flush=True)


if __name__ == "__main__":
    main()
