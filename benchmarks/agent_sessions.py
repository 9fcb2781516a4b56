"""Long agent sessions: what a compiled context still holds of the agent's trail.

The measuring code is the package's (``loci.evaluation``, which ``loci eval`` runs on a
stored session); this script loads the shared data sets and prints their reports.

Each session of ``../shared/data/agent_sessions/`` (a coding agent's real tool loop, Chat
Completions messages) or ``../shared/data/claude_code_sessions/`` (Anthropic Messages
lists) is replayed through the public API as its agent loop ran, and at 50%, 75% and
100% of it the compiled context is asked which artifacts of the trail so far it holds
(files, commands, errors, edits, the task), against the recency tail at the same tokens
and at the history budget, and the whole transcript: ``loci/evaluation/replay.py`` and
``trail.py`` say exactly how.

    python benchmarks/agent_sessions.py --data ../shared/data/agent_sessions --json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from common import machine
from loci.evaluation import replay, report_lines


def from_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An Anthropic Messages list (content blocks) as the chat messages this benchmark
    replays: tool_use blocks as ``tool_calls``, each tool_result as a ``tool`` message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text",
                                                             "text": str(content or "")}]
        texts = [str(b.get("text") or "") for b in blocks if b.get("type") == "text"]
        text = "\n".join(t for t in texts if t.strip())
        if message["role"] == "assistant":
            calls = [{"id": b["id"], "function": {"name": b["name"],
                                                  "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b.get("type") == "tool_use"]
            out.append({"role": "assistant", "content": text, "tool_calls": calls}
                       if calls else {"role": "assistant", "content": text})
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                result = block.get("content")
                if isinstance(result, list):
                    result = "\n".join(str(b.get("text") or "") for b in result
                                       if isinstance(b, dict))
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                            "content": str(result or "")})
        if text.strip():
            out.append({"role": "user", "content": text})
    return out


def load(directory: Path, names: Iterable[str] | None) -> list[tuple[str, list[dict[str, Any]]]]:
    files = sorted(directory.glob("*.json.gz"))
    wanted = set(names or ())
    out = []
    for path in files:
        name = path.name.removesuffix(".json.gz")
        if wanted and name not in wanted:
            continue
        with gzip.open(path, "rt") as handle:
            data = json.load(handle)
        messages = [m for m in data["messages"] if m["role"] != "exit"]
        if any(isinstance(m.get("content"), list) for m in messages):
            messages = from_anthropic(messages)  # a Claude Code session
        if messages[-1].get("tool_calls"):  # the submission, answered only by the exit
            messages.pop()
        out.append((name, messages))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/agent_sessions"))
    parser.add_argument("--windows", default="16000,32000,128000")
    parser.add_argument("--sessions", default="", help="comma-separated names (default: all)")
    parser.add_argument("--json", action="store_true", help="print one JSON line per window")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_dir():
        print(f"no such directory: {data}", file=sys.stderr)
        return 2
    sessions = load(data, [s for s in args.sessions.split(",") if s])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loci-agents-") as tmp:
        os.chdir(tmp)  # no workspace files of the caller's directory in the contexts
        for window in (int(w) for w in args.windows.split(",")):
            report = replay(sessions, window, Path(tmp))
            if args.json:
                print(json.dumps(report))
            else:
                print("\n" + "\n".join(report_lines(report)))
    print(f"{len(sessions)} sessions, {round(time.perf_counter() - started)} s, {machine()}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
