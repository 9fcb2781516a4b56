"""``loci serve --upstream echo``: the proxy, memory and dashboard without a key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from anthropic import Anthropic
from openai import OpenAI

import loci as loci_module
from tests.conftest import free_port


@pytest.fixture
def echo_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    src = str(Path(loci_module.__file__).parent.parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOCI_", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=src, LOCI_HOME=str(tmp_path))
    process = subprocess.Popen(
        [sys.executable, "-m", "loci", "--store", f"sqlite:///{tmp_path / 'loci.db'}",
         "serve", "--upstream", "echo", "--port", str(port)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[1]
            try:
                if httpx.get(f"{base}/api/overview", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def test_the_echo_upstream_answers_both_faces_and_records_them(echo_server: str) -> None:
    # Each SDK client closed with its block: an open one's sockets, collected later,
    # raise a ResourceWarning in whatever test runs then.
    with OpenAI(base_url=f"{echo_server}/v1", api_key="open") as openai:
        reply = openai.chat.completions.create(
            model="any", extra_headers={"X-Loci-Session": "try"},
            messages=[{"role": "user", "content": "I'm Maya and I live in Lisbon"}])
    text = reply.choices[0].message.content or ""
    assert text.startswith("Echo: I'm Maya and I live in Lisbon")
    with Anthropic(base_url=echo_server, api_key="open") as claude:
        answer = claude.messages.create(
            model="any", max_tokens=64, extra_headers={"X-Loci-Session": "try"},
            messages=[{"role": "user", "content": "Where do I live?"}])
    assert answer.content[0].text.startswith("Echo: Where do I live?")  # type: ignore[union-attr]
    events = httpx.get(f"{echo_server}/api/sessions/try/events").json()
    assert [e["content"].split("\n")[0] for e in events] == [
        "I'm Maya and I live in Lisbon", "Echo: I'm Maya and I live in Lisbon",
        "Where do I live?", "Echo: Where do I live?"]
