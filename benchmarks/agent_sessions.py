"""Long agent sessions: what a compiled context still holds of the agent's trail.

Each session of ``../shared/data/agent_sessions/`` (a coding agent's real tool loop) is
replayed through the public API as an agent loop would: the task as the user message,
every call and result as events, a compile before every model call (offline defaults,
the bundled embedder). At 50%, 75% and 100% of the session (at the next model call) the
context compiled for "Continue the task." is asked which artifacts of the trail so far
it holds:

- **files**: paths named in the agent's commands;
- **commands**: each command's first line (60 characters);
- **errors**: ``SomethingError: ...`` / ``...Exception`` lines in outputs (80 characters);
- **edits**: commands that write a file (``sed -i``, ``cat > f``, ``> f``, ``tee``, a
  script that calls ``write``), held when the command's first line is held.

An artifact is held when its text appears in the compiled messages (whitespace
collapsed). Baselines in the same run: the last N tokens of the transcript with N =
Loci's compiled tokens and with N = Loci's history budget, and the whole transcript
(whose tokens, for the reduction, are counted as chat messages with their tool calls,
as Loci counts its own).
Missed artifacts are looked up with ``search_conversation`` (top 10, this session).

    python benchmarks/agent_sessions.py --data ../shared/data/agent_sessions --json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import machine
from loci import Loci
from loci.tokens import token_counter

CLASSES = ("files", "commands", "errors", "edits")
CUTS = (0.5, 0.75, 1.0)
CONTINUE = "Continue the task."
_PATH = re.compile(r"(?<![\w<>=$-])(?:\.{0,2}/)?(?:[\w.-]+/)*[\w-]+\.(?:py|pyi|cfg|toml|ini|txt|md"
                   r"|rst|json|ya?ml|sql|c|h|js|ts|sh|patch|diff|csv|dcm)\b")
_ERROR = re.compile(r"^\s*((?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*)$", re.MULTILINE)
_WRITES = re.compile(r"sed\s+-i|cat\s+(?:<<\s*'?\w+'?\s*)?>|\s>>?\s*\S+\.\w+|\btee\b|\.write\(")


def squash(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Artifact:
    kind: str
    key: str
    position: int  # index of the message that produced it


@dataclass
class Trail:
    items: dict[tuple[str, str], Artifact] = field(default_factory=dict)

    def add(self, kind: str, key: str, position: int) -> None:
        key = squash(key)
        if len(key) >= 3:
            self.items.setdefault((kind, key), Artifact(kind, key, position))

    def upto(self, position: int) -> list[Artifact]:
        return [a for a in self.items.values() if a.position < position]


def trail_of(messages: list[dict[str, Any]]) -> Trail:
    trail = Trail()
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or ():
            args = _arguments(call)
            command = str(args.get("command", ""))
            first = command.strip().splitlines()[0][:60] if command.strip() else ""
            trail.add("commands", first, index)
            for path in _PATH.findall(command):
                trail.add("files", path, index)
            if _WRITES.search(command):
                trail.add("edits", first, index)
            _structured(trail, call["function"]["name"], args, index)
        if message["role"] == "tool":
            for line in _ERROR.findall(str(message.get("content") or "")):
                trail.add("errors", line.strip()[:80], index)
    return trail


def _structured(trail: Trail, tool: str, args: dict[str, Any], index: int) -> None:
    """The files and edits of a tool called with structured input (Claude Code's Read,
    Edit, MultiEdit, Write, Grep, Glob): an edit is held when the first line of the text
    it wrote is (its first 60 characters)."""
    path = args.get("file_path") or args.get("path")
    if isinstance(path, str) and path.strip():
        trail.add("files", path.strip(), index)
    if tool not in _EDIT_TOOLS:
        return
    edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
    for edit in edits:
        text = edit.get("new_string") or edit.get("content") if isinstance(edit, dict) else None
        lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
        if lines:
            trail.add("edits", lines[0][:60], index)


_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})


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


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call["function"].get("arguments") or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def call_text(call: dict[str, Any]) -> str:
    """A call as a reader sees it: its command, or its arguments' text unescaped (an
    edit's strings as written, not as JSON)."""
    args = _arguments(call)
    if "command" in args:
        return str(args["command"])
    values = [*args.values(), *(v for e in args.get("edits") or () if isinstance(e, dict)
                                for v in e.values())]
    return "\n".join(v for v in values if isinstance(v, str)) or call["function"]["arguments"]


def transcript_lines(messages: list[dict[str, Any]]) -> list[str]:
    lines = []
    for message in messages:
        if message["role"] == "system":
            continue
        text = str(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            text += f"\n$ {call_text(call)}"
        lines.append(f"{message['role']}: {text}")
    return lines


def tail(lines: list[str], tokens: int, count: Any) -> str:
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = count(line)
        if used + cost > tokens:
            words = line.split(" ")
            while words and used + count(" ".join(words)) > tokens:
                words = words[len(words) // 8 + 1:]
            kept.append(" ".join(words))
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))


def context_text(messages: list[dict[str, Any]]) -> str:
    parts = []
    for message in messages:
        parts.append(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            parts.append(call["function"]["name"])
            parts.append(call_text(call))
    return squash("\n".join(parts))


def broken_pairs(history: list[dict[str, Any]]) -> int:
    calls = {c["id"] for m in history for c in m.get("tool_calls") or ()}
    results = {m.get("tool_call_id") for m in history if m["role"] == "tool"}
    return len(calls ^ results)


class Replay:
    """One session replayed into a fresh scope of ``base``."""

    def __init__(self, base: Loci, name: str, messages: list[dict[str, Any]]) -> None:
        self.loci = base.for_scope(user=name)
        self.session = name
        self.messages = messages
        self.compile_ms: list[float] = []
        self.broken = 0
        self.empty = 0
        self.contexts = 0

    def step(self, index: int) -> None:
        message = self.messages[index]
        role = message["role"]
        content = str(message.get("content") or "")
        if role == "user":
            self.loci.add(self.session, "user", content)
        elif role == "assistant" and message.get("tool_calls"):
            self.compile_once(None)
            events = []
            for number, call in enumerate(message["tool_calls"]):
                events.append({"type": "tool_call", "role": "assistant",
                               "content": content if number == 0 else "",
                               "tool_name": call["function"]["name"],
                               "tool_call_id": call["id"], "args": _arguments(call)})
            self.loci.add_events(self.session, events)
        elif role == "assistant":
            self.compile_once(None)
            self.loci.add_reply(self.session, content)
        elif role == "tool":
            self.loci.add_event(self.session, type="tool_result", role="tool", content=content,
                                tool_call_id=message.get("tool_call_id"))

    def compile_once(self, message: str | None) -> Any:
        started = time.perf_counter()
        compiled = self.loci.compile(self.session, message)
        self.compile_ms.append((time.perf_counter() - started) * 1000)
        history = list(compiled.history)
        self.contexts += 1
        self.broken += broken_pairs(history)
        self.empty += not history
        return compiled


@dataclass
class Tally:
    held: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def add(self, key: str, held: bool) -> None:
        self.held[key][0] += held
        self.held[key][1] += 1

    def share(self, key: str) -> float | None:
        held, total = self.held.get(key, (0, 0))
        return round(held / total, 3) if total else None


def measure(replay: Replay, trail: Trail, position: int, lines_upto: list[str],
            task: str, tally: dict[str, Tally], found: Tally, figures: dict[str, list[float]],
            counter: Any, cut: float) -> None:
    compiled = replay.compile_once(CONTINUE)
    messages = compiled.to_openai()
    text = context_text(messages[:-1])  # the question itself left out
    tokens = compiled.total_tokens
    history_budget = replay.loci.history_budget()
    whole = "\n".join(lines_upto)
    baselines = {
        "loci": text,
        "tail_at_loci_tokens": squash(tail(lines_upto, tokens, counter.count)),
        "tail_at_history_budget": squash(tail(lines_upto, history_budget, counter.count)),
        "whole": squash(whole),
    }
    window = compiled.window
    artifacts = trail.upto(position)
    calls = {str(e.id): squash(str((e.args or {}).get("command", "")))
             for e in replay.loci.events(replay.session) if e.type == "tool_call"} if (
        cut == 1.0) else {}
    for artifact in artifacts:
        third = min(int(3 * artifact.position / max(position, 1)), 2)
        for name, haystack in baselines.items():
            held = artifact.key in haystack
            tally[name].add(f"{window}|{cut}|{artifact.kind}", held)
            tally[name].add(f"{window}|{cut}|all", held)
            tally[name].add(f"{window}|{cut}|third{third + 1}", held)
        if cut == 1.0 and artifact.key not in text:
            hits = replay.loci.search_conversation(artifact.key, replay.session, limit=10)
            hit = any(artifact.key in squash(h.text) or artifact.key in calls.get(h.id, "")
                      for h in hits)
            found.add(f"{window}|{artifact.kind}", hit)
            found.add(f"{window}|all", hit)
    task_head = squash(task)[:100]
    figures[f"{window}|{cut}|task"].append(float(task_head in text))
    figures[f"{window}|{cut}|tokens"].append(tokens)
    figures[f"{window}|{cut}|whole_tokens"].append(sum(
        counter.count_message(m["role"], str(m.get("content") or ""))
        + counter.count(json.dumps(m.get("tool_calls") or "", separators=(",", ":")))
        + counter.count(str(m.get("tool_call_id") or "")) for m in replay.messages[:position]))


def model_call(messages: list[dict[str, Any]], index: int) -> int:
    """The first point at or after ``index`` where the agent calls the model."""
    while index < len(messages) and messages[index]["role"] != "assistant":
        index += 1
    return index


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


def run(sessions: list[tuple[str, list[dict[str, Any]]]], window: int, home: Path
        ) -> dict[str, Any]:
    model = f"agent-{window // 1000}k"
    base = Loci.open(home=str(home), store=f"sqlite:///{home}/loci-{window}.db", model=model,
                     models={model: window}, memory_mirror=False, workspace=str(home))
    counter = token_counter(model)
    tally = {name: Tally() for name in
             ("loci", "tail_at_loci_tokens", "tail_at_history_budget", "whole")}
    found = Tally()
    figures: dict[str, list[float]] = defaultdict(list)
    compile_ms: list[float] = []
    broken = empty = contexts = 0
    for name, messages in sessions:
        start = datetime(2026, 1, 1, tzinfo=UTC)
        clock = {"now": start}
        base.clock = lambda clock=clock: clock["now"]
        replay = Replay(base, name, messages)
        replay.loci.clock = base.clock
        trail = trail_of(messages)
        task = next(str(m["content"]) for m in messages if m["role"] == "user")
        cuts = {model_call(messages, int(len(messages) * c)): c for c in CUTS}
        for index in range(len(messages) + 1):
            clock["now"] += timedelta(seconds=5)
            if index in cuts:
                measure(replay, trail, index, transcript_lines(messages[:index]), task, tally,
                        found, figures, counter, cuts[index])
            if index < len(messages):
                replay.step(index)
        compile_ms += replay.compile_ms
        broken += replay.broken
        empty += replay.empty
        contexts += replay.contexts
    base.close()
    report: dict[str, Any] = {"window": window}
    for cut in CUTS:
        for key in (*CLASSES, "all", "third1", "third2", "third3"):
            for name, t in tally.items():
                report[f"{cut}|{key}|{name}"] = t.share(f"{window}|{cut}|{key}")
        report[f"{cut}|task"] = round(statistics.mean(figures[f"{window}|{cut}|task"]), 3)
        tokens = figures[f"{window}|{cut}|tokens"]
        whole = figures[f"{window}|{cut}|whole_tokens"]
        report[f"{cut}|tokens_mean"] = round(statistics.mean(tokens))
        report[f"{cut}|reduction"] = round(1 - sum(tokens) / sum(whole), 3)
    for key in (*CLASSES, "all"):
        report[f"missed_found|{key}"] = found.share(f"{window}|{key}")
    report.update(compile_p50_ms=round(statistics.median(compile_ms), 2),
                  contexts=contexts, empty_histories=empty, broken_pairs=broken)
    return report


def print_report(report: dict[str, Any]) -> None:
    window = report["window"]
    print(f"\n== window {window:,}: {report['contexts']} compiles, empty histories "
          f"{report['empty_histories']}, broken pairs {report['broken_pairs']}, compile p50 "
          f"{report['compile_p50_ms']} ms")
    names = ("loci", "tail_at_loci_tokens", "tail_at_history_budget", "whole")
    print(f"{'cut':>5} {'class':>9} " + " ".join(f"{n:>22}" for n in names))
    for cut in CUTS:
        for key in (*CLASSES, "all", "third1", "third2", "third3"):
            row = [report[f"{cut}|{key}|{n}"] for n in names]
            print(f"{cut:>5} {key:>9} " + " ".join(f"{'-' if v is None else v:>22}" for v in row))
        print(f"{cut:>5} task {report[f'{cut}|task']}, tokens {report[f'{cut}|tokens_mean']:,}, "
              f"reduction {report[f'{cut}|reduction']}")
    print("missed artifacts found in search_conversation's top 10: " + ", ".join(
        f"{k} {report[f'missed_found|{k}']}" for k in (*CLASSES, "all")))


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
            report = run(sessions, window, Path(tmp))
            if args.json:
                print(json.dumps(report))
            else:
                print_report(report)
    print(f"{len(sessions)} sessions, {round(time.perf_counter() - started)} s, {machine()}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
