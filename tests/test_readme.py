"""The README is a test: its shell and Python blocks run top to bottom in one fresh
``LOCI_HOME``, as a reader would run them, and its TOML blocks load as settings.

The outside world is the package's fakes: ``OPENAI_BASE_URL`` and
``ANTHROPIC_BASE_URL`` point the official clients at the fake provider, and the blocks
that talk to a running Loci server reach one started here (its address put in place of
``127.0.0.1:8765``). A block that cannot run here says why in a ``<!-- not run: ... -->``
comment just above it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loci import load_settings
from loci.server import create_app
from loci.testing import FakeProvider
from tests.server.conftest import LiveServer

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^>]+?) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)^```",
                    re.S | re.M)
WEATHER = [{"id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int
    why_not: str | None


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [Block(m["lang"], m["code"], text.count("\n", 0, m.start("code")) + 1, m["why"])
            for m in _BLOCK.finditer(text)]


def model(body: dict[str, Any]) -> Any:
    """The fake model: it calls the weather tool when asked about the weather and
    offered tools, and says where the user lives otherwise."""
    messages = body.get("messages") or body.get("input") or [{}]
    last = messages[-1]
    if body.get("tools") and last.get("role") == "user" and "weather" in str(
            last.get("content")).lower():
        return WEATHER
    return "You live in Lisbon."


def test_every_block_of_the_readme_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    found = blocks()
    assert {b.lang for b in found} == {"sh", "python", "toml"}
    skipped = [b for b in found if b.why_not]
    assert len(skipped) <= 2, [b.line for b in skipped]
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with FakeProvider(reply=model) as fake:
        env = {"LOCI_HOME": str(home), "OPENAI_BASE_URL": f"{fake.url}/v1",
               "OPENAI_API_KEY": "fake", "ANTHROPIC_BASE_URL": fake.url,
               "ANTHROPIC_API_KEY": "fake"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = load_settings(store=f"sqlite:///{tmp_path / 'server.db'}",
                                 proxy_provider="openai", proxy_base_url=f"{fake.url}/v1")
        with LiveServer(create_app(settings)) as server:
            namespace: dict[str, Any] = {"__name__": "readme"}
            for block in found:
                code = block.code.replace("http://127.0.0.1:8765", server.url)
                if block.why_not:
                    continue
                if block.lang == "sh":
                    run_shell(code, block.line, work)
                elif block.lang == "python":
                    exec(compile(code, f"README.md:{block.line}", "exec"), namespace)
                else:
                    load_toml(code, tmp_path / f"toml{block.line}", monkeypatch)
    assert len(fake.requests) >= 6  # the blocks' calls reached the (fake) providers


def run_shell(code: str, line: int, cwd: Path) -> None:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, text=True,
                          capture_output=True, env={**os.environ, "PATH": path}, timeout=600)
    assert done.returncode == 0, f"README.md:{line}\n{done.stdout}\n{done.stderr}"


def load_toml(code: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TOML block as ``loci.toml``: it must load, every key known and checked."""
    home.mkdir()
    (home / "loci.toml").write_text(code, encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setenv("LOCI_HOME", str(home))
        load_settings()


def test_the_first_screen_is_a_quickstart_that_does_what_it_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The first section after the introduction: the library in about ten lines (its
    printed memories as its comment says), the keyless proxy, Claude Code, MCP and an
    OpenAI client; the reference comes after it."""
    text = README.read_text(encoding="utf-8")
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert text.index("\n## ") + 1 == text.index("## Quickstart")  # the first section
    for needed in ("loci serve --upstream echo", "ANTHROPIC_BASE_URL=http://127.0.0.1:8765",
                   "claude mcp add loci -- loci mcp", "from openai import OpenAI",
                   "loci import --format claude-code"):
        assert needed in quickstart, needed
    library = next(b for b in blocks() if b.lang == "python")
    assert library.line < 40 and len(library.code.strip().splitlines()) <= 10
    monkeypatch.setenv("LOCI_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    exec(compile(library.code, "README.md:quickstart", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    promised = library.code.strip().splitlines()[-1].split("# ", 1)[1]
    assert printed == promised
