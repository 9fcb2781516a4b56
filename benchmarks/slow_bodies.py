"""Slow request bodies (or headers) against a real `loci serve` that requires keys: can
they lock out a client with a key?

Usage: python benchmarks/slow_bodies.py [--clients 1000] [--interval 20] [--seconds 75]
           [--headers] [--before SRC]

``--clients`` connections without a key each send a POST's headers, announce a
100 kB body and send one byte of it every ``--interval`` seconds (``--headers``: send
the first line of a request and then its headers one byte every ``--interval``
seconds); a connection the server closes is opened again a second later (an attacker
keeps trying). Meanwhile a
client with a key sends a POST (a memory) and a GET (the memories) every half second:
their status codes and latencies are the result, with the number of attack
connections open at the end. ``--before SRC`` runs the same attack first against a
server started from another source tree (``git archive <commit> src | tar -x -C DIR``,
then ``--before DIR/src``), so both figures come from one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from common import machine, serve
from server_load import free_port

HEADERS = (b"POST /api/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
#: What an attack connection sends first, and then a byte at a time: a body, or headers.
SLOW_BODY = (HEADERS + b"{", b" ")
SLOW_HEADERS = (b"GET /api/memories HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"a")


def start(home: Path, src: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LOCI_HOME": str(home), "PYTHONPATH": str(src),
           "LOCI_EMBEDDING_PROVIDER": "hash", "LOCI_MEMORY_MIRROR": "false"}
    store = f"sqlite:///{home / 'loci.db'}"
    key = subprocess.run([sys.executable, "-m", "loci", "keys", "create", "--user", "alice",
                          "--store", store], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    (home / "key").write_text(key)
    return serve(port, ["--store", store], env)


class Attack:
    """``clients`` slow-body connections, reopened when the server closes them."""

    def __init__(self, port: int, clients: int, interval: float,
                 sends: tuple[bytes, bytes] = SLOW_BODY) -> None:
        self.port, self.clients, self.interval = port, clients, interval
        self.sends = sends
        self.open = 0
        self.reopened = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        await asyncio.gather(*(self.client(i) for i in range(self.clients)))

    async def client(self, index: int) -> None:
        await asyncio.sleep(index * 0.002)  # connect over 2 s, as a real attack ramps
        while not self.stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(1)
                continue
            self.open += 1
            try:
                writer.write(self.sends[0])
                while not self.stop.is_set():
                    try:
                        if await asyncio.wait_for(reader.read(4096), self.interval) == b"":
                            break
                    except TimeoutError:
                        writer.write(self.sends[1])
                        await writer.drain()
                        continue
                    await reader.read()  # an answer: read to the close
                    break
            except OSError:
                pass
            finally:
                self.open -= 1
                writer.close()
            if not self.stop.is_set():
                self.reopened += 1
                await asyncio.sleep(1)


async def probe(port: int, key: str, seconds: float, attack: Attack) -> dict[str, object]:
    codes: dict[str, int] = {}
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}
    await asyncio.sleep(5)  # the attack is in place
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30,
                                 headers=headers) as http:
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            for method, path, body in (("POST", "/api/memories", {"content": f"fact {n}"}),
                                       ("GET", "/api/memories", None)):
                started = time.monotonic()
                try:
                    answer = await http.request(method, path, json=body)
                    code = str(answer.status_code)
                except httpx.TransportError as exc:
                    code = type(exc).__name__
                latencies.append(time.monotonic() - started)
                codes[code] = codes.get(code, 0) + 1
            n += 1
            await asyncio.sleep(0.5)
    held = attack.open
    attack.stop.set()
    latencies.sort()
    return {"codes": codes, "p50": latencies[len(latencies) // 2], "max": latencies[-1],
            "held": held, "reopened": attack.reopened}


async def measure(port: int, key: str, args: argparse.Namespace) -> dict[str, object]:
    attack = Attack(port, args.clients, args.interval,
                    SLOW_HEADERS if args.headers else SLOW_BODY)
    running = asyncio.create_task(attack.run())
    result = await probe(port, key, args.seconds, attack)
    await running
    return result


def run(src: Path, args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        home, port = Path(tmp), free_port()
        server = start(home, src, port)
        try:
            return asyncio.run(measure(port, (home / "key").read_text(), args))
        finally:
            server.terminate()
            server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=75.0)
    parser.add_argument("--headers", action="store_true",
                        help="the attack sends its headers slowly, not its body")
    parser.add_argument("--before", type=Path, help="a source tree to measure first")
    args = parser.parse_args()
    kind = "slow-header" if args.headers else "slow-body"
    print(f"{machine()}; {args.clients} {kind} clients without a key, a byte every "
          f"{args.interval:g} s, probed for {args.seconds:g} s")
    here = Path(__file__).resolve().parent.parent / "src"
    for name, src in (("before", args.before), ("after", here)):
        if src is None:
            continue
        r = run(src, args)
        print(f"{name:6}: keyed requests {r['codes']}, p50 {r['p50'] * 1000:.1f} ms, "
              f"max {r['max'] * 1000:.1f} ms; attack connections open at the end "
              f"{r['held']}, reopened {r['reopened']}")


if __name__ == "__main__":
    main()
