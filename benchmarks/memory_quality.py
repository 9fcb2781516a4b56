"""What the memory holds after a real history: offenders, near-duplicates, how many.

A check shared by the dev-set benchmarks (``longmemeval.py`` calls ``quality``); run
alone, it replays the LoCoMo conversations and the real Claude Code sessions through the
library (each session ended, as an application would), then reports, per data set:

- **offenders**: stored memories that are a question, a request to the assistant, a
  greeting or thanks, harness markup, a pasted document or a command line, each listed
  (tested here by patterns of this file, not by the extraction rules under test); the
  same for the lines of the user's profile (``/profile/``), which every context shows;
- **near-duplicates**: memories whose embedding (the configured embedder, each text
  embedded alone, as the store embeds a memory when it saves it) has a cosine of 0.9 or
  more with an earlier one;
- **memories per 100 turns** of the history.

    python benchmarks/memory_quality.py [--locomo ../shared/data/locomo/locomo_dev.json]
        [--claude-code ../shared/data/claude_code_sessions] [--embedder local] [--json]

Run with the code of another tree on ``PYTHONPATH`` for a before/after in the same run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent_sessions import from_anthropic
from common import machine
from loci import Loci
from loci.evaluation.trail import arguments
from locomo import ingest as locomo_ingest
from locomo import load as locomo_load

NEAR_DUPLICATE = 0.9
#: An offender's text is shown up to this many characters.
SHOWN = 120
_ATTRIBUTION = re.compile(r"^[A-Z][\w .'-]{0,40}:\s+")
_QUESTION = re.compile(r"\?\s*$|^(?:what|why|how|when|where|who|which|can|could|would|do|does"
                       r"|did|is|are|will)\b[^.!]*$", re.IGNORECASE)
_REQUEST = re.compile(r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\b|(?:give|tell|show"
                      r"|help|find|send|make|write|list|suggest|recommend)\s+(?:me|them|us)\b)",
                      re.IGNORECASE)
_GREETING = re.compile(r"^(?:hi|hey|hello|thanks|thank you|good (?:morning|afternoon|evening)"
                       r"|bye|goodbye|ok(?:ay)?|cool|great|awesome|wow)\b[\s\w,!.']{0,40}$",
                       re.IGNORECASE)
_HARNESS = re.compile(r"</?[a-z]+(?:[-_][a-z0-9]+)+[\s>]|\[Request interrupted|<command-"
                      r"|Caveat: The messages below|Read the output file to retrieve")
#: A line of pasted output: it opens with a number, a path or a timestamp.
_OUTPUT = re.compile(r"^(?:\d+\s*[:|)]|/[\w.-]+/|\d{4}-\d{2}-\d{2}[ T]\d)")
_COMMAND = re.compile(r"^(?:\$ |\S+@\S+ .*[%$#] |(?:sudo |cd |ls |git |npm |pip |python3? "
                      r"|curl |docker |brew |kubectl |ssh |cat |rm |mkdir |chmod )\S)")
#: Longer than this, or of this many lines: a pasted document, not a fact.
PASTED_CHARS = 600
PASTED_LINES = 4


def offence(text: str) -> str | None:
    """What kind of offender a stored memory is, if any."""
    said = _ATTRIBUTION.sub("", text.strip(), count=1)
    if _HARNESS.search(said):
        return "harness"
    if _COMMAND.match(said):
        return "command"
    if len(said) > PASTED_CHARS or said.count("\n") >= PASTED_LINES or _OUTPUT.match(said):
        return "pasted"
    if _QUESTION.search(said):
        return "question"
    if _REQUEST.match(said):
        return "request"
    if _GREETING.match(said):
        return "greeting"
    return None


def near_duplicates(loci: Loci, texts: Sequence[str]) -> int:
    """Memories with an earlier one at cosine >= ``NEAR_DUPLICATE`` (extra copies). Each
    text is embedded alone: the bundled model's int8 build scales its activations per
    batch, which moves a cosine by up to 0.02 from what the store saw."""
    if loci.indexer is None or len(texts) < 2:
        return 0
    embed = loci.indexer.embedder.embed
    vectors = np.asarray([embed([text])[0] for text in texts], dtype=np.float32)
    cosines = vectors @ vectors.T
    return sum(bool((cosines[i, :i] >= NEAR_DUPLICATE).any()) for i in range(1, len(texts)))


def profile_lines(loci: Loci) -> list[str]:
    """The bullet lines of the user's profile documents, but a person's relationship."""
    return [line[2:] for document in loci.knowledge.ls("/profile/")
            for line in document.content.splitlines()
            if line.startswith("- ") and not line.startswith("- Relationship:")]


def quality(loci: Loci, turns: int) -> dict[str, Any]:
    """The memory of ``loci`` (one scope's active memories and profile) after ``turns``
    turns."""
    texts = [m.content for m in loci.memories()]
    profile = profile_lines(loci)
    return {"memories": len(texts), "turns": turns, "offenders": offenders(texts),
            "near_duplicates": near_duplicates(loci, texts),
            "profile_lines": len(profile), "profile_offenders": offenders(profile)}


def offenders(texts: Sequence[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for text in texts:
        kind = offence(text)
        if kind is not None:
            found.setdefault(kind, []).append(text[:SHOWN])
    return found


def merged(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several scopes' reports as one: sums, offenders together, per 100 turns."""
    total = {key: sum(r[key] for r in reports)
             for key in ("memories", "turns", "near_duplicates", "profile_lines")}
    total["per_100_turns"] = round(100 * total["memories"] / max(total["turns"], 1), 1)
    for key in ("offenders", "profile_offenders"):
        found: dict[str, list[str]] = {}
        for report in reports:
            for kind, texts in report[key].items():
                found.setdefault(kind, []).extend(texts)
        total[key] = {k: len(v) for k, v in found.items()}
        total[f"{key}_examples"] = {k: v[:3] for k, v in found.items()}
    return total


def finish(loci: Loci, session: str) -> None:
    """End a session the way an application would, once its turns' facts are in."""
    wait = getattr(loci, "wait_extracted", None)  # absent from older trees
    if wait is not None:
        wait()
    loci.end_session(session)


def locomo(base: Loci, path: Path) -> dict[str, Any]:
    reports = []
    for sample in locomo_load(path, None)[0]:
        loci, _ = locomo_ingest(base, sample)
        for number, _turns in sample.sessions:
            finish(loci, f"session_{number}")
        turns = sum(len(t) for _, t in sample.sessions)
        reports.append(quality(loci, turns))
    return merged(reports)


def claude_code(base: Loci, folder: Path) -> dict[str, Any]:
    reports = []
    for path in sorted(folder.glob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            record = json.load(handle)
        name = record["id"]
        loci = base.for_scope(user=name)
        messages = from_anthropic(record["messages"])
        for message in messages:
            replay(loci, name, message)
        finish(loci, name)
        turns = sum(m["role"] in ("user", "assistant") for m in messages)
        reports.append(quality(loci, turns))
    return merged(reports)


def replay(loci: Loci, session: str, message: dict[str, Any]) -> None:
    content = str(message.get("content") or "")
    role = message["role"]
    if role == "user" and content.strip():
        loci.add(session, "user", content)
    elif role == "assistant" and message.get("tool_calls"):
        loci.add_events(session, [
            {"type": "tool_call", "role": "assistant", "content": content if n == 0 else "",
             "tool_name": call["function"]["name"], "tool_call_id": call["id"],
             "args": arguments(call)} for n, call in enumerate(message["tool_calls"])])
    elif role == "assistant" and content.strip():
        loci.add_reply(session, content)
    elif role == "tool":
        loci.add_event(session, type="tool_result", role="tool", content=content or "(empty)",
                       tool_call_id=message.get("tool_call_id"))


def print_report(name: str, report: dict[str, Any]) -> None:
    found = sum(report["offenders"].values())
    print(f"\n== {name}: {report['memories']} memories from {report['turns']} turns "
          f"({report['per_100_turns']} per 100 turns), {report['near_duplicates']} "
          f"near-duplicates (cosine >= {NEAR_DUPLICATE}), {found} offenders "
          f"{report['offenders']}; profile: {report['profile_lines']} lines, offenders "
          f"{report['profile_offenders']}")
    for key in ("offenders_examples", "profile_offenders_examples"):
        for kind, examples in report[key].items():
            for text in examples:
                print(f"   {kind:>9}: {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path,
                        default=Path("../shared/data/locomo/locomo_dev.json"))
    parser.add_argument("--claude-code", type=Path,
                        default=Path("../shared/data/claude_code_sessions"))
    parser.add_argument("--embedder", default="local", help="local (default), hash or none")
    parser.add_argument("--json", action="store_true", help="one JSON line per data set")
    args = parser.parse_args(argv)
    sources = {"locomo": args.locomo.resolve(), "claude_code": args.claude_code.resolve()}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loci-mq-") as tmp:
        os.chdir(tmp)  # no workspace files of the caller's directory
        base = Loci.open(home=tmp, store=f"sqlite:///{tmp}/mq.db", memory_mirror=False,
                         workspace=tmp, embedding_provider=args.embedder)
        with base:
            reports = {"locomo": locomo(base, sources["locomo"]),
                       "claude_code": claude_code(base, sources["claude_code"])}
    for name, report in reports.items():
        if args.json:
            print(json.dumps({"data": name, **report}))
        else:
            print_report(name, report)
    print(f"{round(time.perf_counter() - started)} s, {machine()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
