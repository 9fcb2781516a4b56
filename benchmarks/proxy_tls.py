"""Calls per second through the proxy to an upstream over TLS, and the latency the proxy
adds: does every proxied call pay a new TLS handshake, or do the upstream's connections
serve call after call?

A loopback OpenAI-compatible upstream speaks HTTPS (HTTP/1.1, keep-alive) with a
certificate made for the run (``cryptography``; the proxy trusts it through
``SSL_CERT_FILE``) and answers each chat completion at once. Loci's server runs under
uvicorn as ``loci serve`` does, its proxy pointed at that upstream, and one client sends
``--calls`` chat completions in a row to one session (each recorded, each compiling the
session's context). In the same run, two baselines straight to the upstream: one kept
client (connection reuse: the floor), and a new client per call (a handshake per call,
what a proxy without connection reuse pays on top of its own work). The proxy's added
latency is its p50 minus the kept baseline's.

    python benchmarks/proxy_tls.py [--calls 300] [--json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from common import machine
from loci.server import create_app
from loci.server.workers import UVICORN_OPTIONS
from loci.settings import load_settings

ANSWER = json.dumps({
    "id": "chatcmpl-tls", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Noted."}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}).encode()


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for ``localhost`` and its key, written to ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client may reuse its connection
    disable_nagle_algorithm = True  # headers and body are two writes
    handshakes = 0

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        type(self).handshakes += 1
        super().setup()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)


@contextmanager
def tls_upstream(cert: Path, key: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def loci_server(home: Path, upstream: str) -> Iterator[str]:
    settings = load_settings(store=f"sqlite:///{home / 'proxy.db'}", proxy_provider="openai",
                             proxy_base_url=upstream, proxy_api_key="sk-bench")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(settings), lifespan="on", ws="none",
                            **UVICORN_OPTIONS)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def timed(calls: int, call: Callable[[int], None]) -> list[float]:
    """Milliseconds of each of ``calls`` calls (two warm-up calls first)."""
    for n in range(2):
        call(-1 - n)
    took = []
    for n in range(calls):
        started = time.perf_counter()
        call(n)
        took.append((time.perf_counter() - started) * 1000)
    return took


def summary(took: list[float]) -> dict[str, float]:
    ordered = sorted(took)
    return {"calls_per_s": round(len(took) / (sum(took) / 1000), 1),
            "p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2)}


def run(calls: int) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        cert, key = certificate(home)
        os.environ["SSL_CERT_FILE"] = str(cert)  # the proxy's client trusts the upstream
        with tls_upstream(cert, key) as upstream:
            url = f"{upstream}/chat/completions"
            with httpx.Client(verify=str(cert)) as kept:
                direct = timed(calls, lambda n: kept.post(url, json=body).raise_for_status())

            def fresh(n: int) -> None:
                with httpx.Client(verify=str(cert)) as client:
                    client.post(url, json=body).raise_for_status()

            naive = timed(calls, fresh)
            before = _Upstream.handshakes
            with loci_server(home, upstream) as base, httpx.Client(timeout=30) as client:
                def proxied(n: int) -> None:
                    asked = {"model": "m", "messages": [
                        {"role": "user", "content": f"Call {n}: remember the number {n}."}]}
                    client.post(f"{base}/v1/chat/completions", json=asked,
                                headers={"X-Loci-Session": "tls"}).raise_for_status()

                through = timed(calls, proxied)
            handshakes = _Upstream.handshakes - before
    result = {"calls": calls, "direct_kept": summary(direct),
              "direct_new_client_per_call": summary(naive), "proxy": summary(through),
              "proxy_upstream_connections": handshakes}
    result["proxy_added_p50_ms"] = round(result["proxy"]["p50_ms"]
                                         - result["direct_kept"]["p50_ms"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.calls)
    if args.json:
        print(json.dumps(result))
        return
    print(machine())
    for name in ("direct_kept", "direct_new_client_per_call", "proxy"):
        figures = result[name]
        print(f"{name:28} {figures['calls_per_s']:8.1f} calls/s  p50 {figures['p50_ms']:7.2f} ms"
              f"  p95 {figures['p95_ms']:7.2f} ms")
    print(f"proxy added latency (p50 vs direct kept): {result['proxy_added_p50_ms']} ms; "
          f"upstream TLS connections opened by the proxy for {args.calls + 2} calls: "
          f"{result['proxy_upstream_connections']}")


if __name__ == "__main__":
    sys.exit(main())
