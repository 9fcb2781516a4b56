"""What a compiled context holds of an agent's trail, replayed step by step.

A session (chat-completions messages) is replayed through the public API as its agent
loop ran: each request as the user message, every call and result as events, a compile
before every model call (offline defaults, the bundled embedder, a scratch store). At
chosen points of the session (fractions of its messages, at the next model call) the
context compiled for "Continue the task." is asked which artifacts of the trail so far
it holds (``evaluation.trail``). Baselines in the same run: the last N tokens of the
transcript with N = Loci's compiled tokens and with N = Loci's history budget, and the
whole transcript (whose tokens, for the reduction, are counted as chat messages with
their tool calls, as Loci counts its own). At the last point, each missed artifact is
looked up with ``search_conversation`` (top 10, that session).

``replay`` is what ``benchmarks/agent_sessions.py`` runs on the shared data and
``evaluate`` what ``loci eval`` runs on a stored session.
"""

from __future__ import annotations

import multiprocessing
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from loci import Loci, TokenCounter, ValidationError, events_to_messages, token_counter
from loci.evaluation.inputs import checked
from loci.evaluation.trail import (
    CLASSES,
    Trail,
    arguments,
    broken_pairs,
    context_text,
    message_tokens,
    squash,
    tail,
    trail_of,
    transcript_lines,
)

CUTS = (0.5, 0.75, 1.0)
CONTINUE = "Continue the task."
BASELINES = ("loci", "tail_at_loci_tokens", "tail_at_history_budget", "whole")
#: The rows of a report: each class, all pooled, and the trail by the third of the
#: session so far it came from.
ROWS = (*CLASSES, "all", "third1", "third2", "third3")
_HEADERS = {"loci": "Loci", "tail_at_loci_tokens": "tail, Loci's tokens",
            "tail_at_history_budget": "tail, history budget", "whole": "whole transcript"}
_ROW_LABELS = {"third1": "1st third", "third2": "2nd third", "third3": "last third"}
Messages = list[dict[str, Any]]


class Replay:
    """One session replayed into a fresh scope of ``base``."""

    def __init__(self, base: Loci, name: str, messages: Messages) -> None:
        self.loci = base.for_scope(user=name.replace("/", "_"))
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
        if role == "user" and content.strip():
            self.loci.add(self.session, "user", content)
        elif role == "assistant" and message.get("tool_calls"):
            self.compile_once(None)
            events = []
            for number, call in enumerate(message["tool_calls"]):
                events.append({"type": "tool_call", "role": "assistant",
                               "content": content if number == 0 else "",
                               "tool_name": call["function"]["name"],
                               "tool_call_id": call["id"], "args": arguments(call)})
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


@dataclass
class _Run:
    """What one window's replay counts."""

    counter: TokenCounter
    tally: dict[str, Tally] = field(default_factory=lambda: {n: Tally() for n in BASELINES})
    found: Tally = field(default_factory=Tally)
    figures: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


def measure(replay: Replay, trail: Trail, position: int, task: str, run: _Run,
            cut: float, last: bool) -> None:
    # What recall finds must not depend on how far the background indexer got: an
    # agent's calls are seconds apart, which is time enough for it.
    replay.loci.wait_indexed(120)
    compiled = replay.compile_once(CONTINUE)
    text = context_text(compiled.to_openai()[:-1])  # the question itself left out
    tokens = compiled.total_tokens
    lines_upto = transcript_lines(replay.messages[:position])
    count = run.counter.count
    baselines = {
        "loci": text,
        "tail_at_loci_tokens": squash(tail(lines_upto, tokens, count)),
        "tail_at_history_budget": squash(tail(lines_upto, replay.loci.history_budget(),
                                              count)),
        "whole": squash("\n".join(lines_upto)),
    }
    window = compiled.window
    calls = {str(e.id): squash(str((e.args or {}).get("command", "")))
             for e in replay.loci.events(replay.session) if e.type == "tool_call"} if (
        last) else {}
    for artifact in trail.upto(position):
        third = min(int(3 * artifact.position / max(position, 1)), 2)
        for name, haystack in baselines.items():
            held = artifact.key in haystack
            run.tally[name].add(f"{window}|{cut}|{artifact.kind}", held)
            run.tally[name].add(f"{window}|{cut}|all", held)
            run.tally[name].add(f"{window}|{cut}|third{third + 1}", held)
        if last and artifact.key not in text:
            hits = replay.loci.search_conversation(artifact.key, replay.session, limit=10)
            hit = any(artifact.key in squash(h.text) or artifact.key in calls.get(h.id, "")
                      for h in hits)
            run.found.add(f"{window}|{artifact.kind}", hit)
            run.found.add(f"{window}|all", hit)
    run.figures[f"{window}|{cut}|task"].append(float(squash(task)[:100] in text))
    run.figures[f"{window}|{cut}|tokens"].append(tokens)
    run.figures[f"{window}|{cut}|whole_tokens"].append(sum(
        message_tokens(m, run.counter) for m in replay.messages[:position]))


def model_call(messages: Messages, index: int) -> int:
    """The first point at or after ``index`` where the agent calls the model."""
    while index < len(messages) and messages[index]["role"] != "assistant":
        index += 1
    return index


def replay(sessions: Sequence[tuple[str, Messages]], window: int, home: Path,
           cuts: Sequence[float] = CUTS) -> dict[str, Any]:
    """Replay each session in a fresh store under ``home`` with a model of ``window``
    tokens; the report pools the sessions (keys ``"<cut>|<row>|<baseline>"``, ...)."""
    model = f"agent-{window // 1000}k"
    base = Loci.open(home=str(home), store=f"sqlite:///{home}/loci-{window}.db", model=model,
                     models={model: window}, memory_mirror=False, workspace=str(home))
    run = _Run(token_counter(model))
    compile_ms: list[float] = []
    broken = empty = contexts = 0
    for name, messages in sessions:
        if not any(_request(m) for m in messages):
            raise ValidationError(f"session {name!r} has no user message: nothing to replay")
        clock = {"now": datetime(2026, 1, 1, tzinfo=UTC)}
        base.clock = lambda clock=clock: clock["now"]  # type: ignore[misc]
        session = Replay(base, name, messages)
        session.loci.clock = base.clock
        trail = trail_of(messages)
        points: dict[int, list[float]] = defaultdict(list)
        for cut in cuts:  # two points of a short session may fall on one model call
            points[model_call(messages, int(len(messages) * cut))].append(cut)
        for index in range(len(messages) + 1):
            clock["now"] += timedelta(seconds=5)
            for cut in points.get(index, ()):
                measure(session, trail, index, task_at(messages, index), run, cut,
                        last=cut == max(cuts))
            if index < len(messages):
                session.step(index)
        compile_ms += session.compile_ms
        broken += session.broken
        empty += session.empty
        contexts += session.contexts
    base.close()
    return _report(run, window, cuts, compile_ms, contexts=contexts, empty=empty,
                   broken=broken)


def _report(run: _Run, window: int, cuts: Sequence[float], compile_ms: list[float],
            **counts: int) -> dict[str, Any]:
    report: dict[str, Any] = {"window": window, "cuts": list(cuts)}
    for cut in cuts:
        for key in ROWS:
            for name, t in run.tally.items():
                report[f"{cut}|{key}|{name}"] = t.share(f"{window}|{cut}|{key}")
        report[f"{cut}|task"] = round(statistics.mean(run.figures[f"{window}|{cut}|task"]), 3)
        tokens = run.figures[f"{window}|{cut}|tokens"]
        whole = run.figures[f"{window}|{cut}|whole_tokens"]
        report[f"{cut}|tokens_mean"] = round(statistics.mean(tokens))
        report[f"{cut}|reduction"] = round(1 - sum(tokens) / sum(whole), 3) if sum(
            whole) else 0.0
    for key in (*CLASSES, "all"):
        report[f"missed_found|{key}"] = run.found.share(f"{window}|{key}")
    report.update(compile_p50_ms=round(statistics.median(compile_ms), 2) if compile_ms
                  else 0.0, contexts=counts["contexts"],
                  empty_histories=counts["empty"], broken_pairs=counts["broken"])
    return report


def task_at(messages: Messages, index: int) -> str:
    """The request the agent works on at ``index``: the newest user message before it
    (a session may hold several requests, each opening a loop), or the first one."""
    requests = [text for m in messages[:index] if (text := _request(m))]
    return requests[-1] if requests else next(t for m in messages if (t := _request(m)))


def _request(message: Mapping[str, Any]) -> str:
    """A user message's text ("" for any other message)."""
    if message["role"] != "user":
        return ""
    content = message["content"]
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def session_messages(loci: Loci, session: str) -> Messages:
    """A stored session as its agent's chat messages: every event, archived ones too,
    with the content compaction masked (the agent saw it whole), and a call without its
    result as it was (the replay's compiles answer it, as any compile does)."""
    events = [replace(e, masked=None) for e in loci.events(session) if e.type != "summary"]
    return events_to_messages(events, answer_open=False)


def evaluate(loci: Loci, session: str, windows: Sequence[int],
             cuts: Sequence[float] = CUTS, *, apart: bool = False) -> list[dict[str, Any]]:
    """``loci eval``: one report per window for a stored session of ``loci``, replayed
    into a scratch store (the session itself is only read); windows and points are
    checked first (``inputs.checked``) and the reports come in the windows' order.

    ``apart``: the replays run in a child process (a server's choice). Each builds a
    runtime with its own embedder, whose memory the allocator keeps for the process
    once freed, and holds the interpreter's lock while it computes; a child gives the
    memory back when it ends and leaves the server's threads their share of the CPU."""
    windows, cuts = checked(windows, cuts)
    messages = session_messages(loci, session)
    if not apart:
        return replay_windows(session, messages, windows, cuts)
    # Spawned, not forked: a fork of a process with threads (a server's) may deadlock.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        return child.submit(replay_windows, session, messages, windows, cuts).result()


def replay_windows(session: str, messages: Messages, windows: Sequence[int],
                   cuts: Sequence[float]) -> list[dict[str, Any]]:
    """One session replayed at each of ``windows``, in a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="loci-eval-") as tmp:
        return [replay([(session, messages)], window, Path(tmp), cuts) for window in windows]


def report_lines(report: dict[str, Any]) -> list[str]:
    """A report as a table: per point of the session, the share of each class of the
    trail held by Loci's context and by the baselines (the JSON keeps the raw keys)."""
    lines = [f"== window {report['window']:,}: {report['contexts']} compiles, empty "
             f"histories {report['empty_histories']}, broken pairs {report['broken_pairs']}, "
             f"compile p50 {report['compile_p50_ms']} ms",
             "share of the agent's trail held; a tail is the transcript's last N tokens, "
             "N = Loci's tokens or its history budget; the thirds say where in the session "
             "the artifacts came from",
             f"{'at':>4} {'class':>10} " + " ".join(f"{_HEADERS[n]:>22}" for n in BASELINES)]
    for cut in report["cuts"]:
        for key in ROWS:
            row = [report[f"{cut}|{key}|{n}"] for n in BASELINES]
            lines.append(f"{cut:>4.0%} {_ROW_LABELS.get(key, key):>10} " + " ".join(
                f"{'-' if v is None else v:>22}" for v in row))
        lines.append(f"{cut:>4.0%} task {report[f'{cut}|task']}, tokens "
                     f"{report[f'{cut}|tokens_mean']:,}, reduction {report[f'{cut}|reduction']}")
    lines.append("missed artifacts found in search_conversation's top 10: " + ", ".join(
        f"{k} {report[f'missed_found|{k}']}" for k in (*CLASSES, "all")))
    return lines
