"""Facts from every turn, in the background.

Each write of messages (``Loci.add``/``add_events``, so REST, MCP and the proxy's faces
too) hands its new turns to the runtime's ``TurnExtraction``: one thread that extracts
and saves their facts after the write has returned, in the order the writes came. With
a chat model configured, one call per turn decides against the most similar stored facts
(``loci.memory.decide``); offline, or when that call fails, the rules of
``loci.memory.extract`` do. ``wait`` blocks until what was handed over so far is saved
(``Loci.wait_extracted``); a read of memories first runs the rules' jobs still waiting
(``catch_up``), so it sees the facts of the writes before it.
"""

from __future__ import annotations

import _thread
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from loci.errors import LociError
from loci.index_worker import IndexWorker
from loci.llm.base import ChatModel
from loci.memory.decide import decide_turn
from loci.memory.extract import RuleExtractor, readable_lines
from loci.memory.service import MemoryService, SaveResult
from loci.models import Event

log = logging.getLogger("loci.memory")


@dataclass(frozen=True)
class Job:
    """Saving the facts of one write's turns; ``slow`` when it calls a chat model;
    ``tenant``: the user whose turns they are (an erasure of the user drops it)."""

    run: Callable[[], object]
    slow: bool = False
    tenant: str | None = None


class TurnExtraction:
    """A queue of extraction jobs and the one thread that runs them in order.

    With a store that computes in this process (SQLite), a job that needs no model runs
    holding the store's lock, taken before the job leaves the queue: so whoever holds
    that lock may run what waits itself (``finish``), without waiting on a thread that
    waits on it. A job that calls a chat model runs without it (it would hold the store
    for the length of a model call)."""

    def __init__(self, lock: _thread.RLock | None = None) -> None:
        self._jobs: deque[Job] = deque()
        self._lock = lock
        self._state = threading.Condition()
        self._running = self._running_quick = 0
        self._running_of: Counter[str | None] = Counter()  # by tenant
        self._worker = IndexWorker(self._drain)

    def submit(self, job: Job) -> None:
        with self._state:
            self._jobs.append(job)
        self._worker.notify()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every job submitted so far has run; False on timeout."""
        return self._worker.wait(timeout)

    def forget(self, tenant: str, timeout: float | None = None) -> bool:
        """Drop the waiting jobs of ``tenant`` and wait for its job under way, if any
        (an erasure of the user: no fact of theirs may be saved after it); False on
        timeout."""
        with self._state:
            self._jobs = deque(job for job in self._jobs if job.tenant != tenant)
            return self._state.wait_for(lambda: not self._running_of[tenant], timeout)

    def finish(self) -> None:
        """Run what waits in this thread, then wait for the job under way, if any."""
        while self._step():
            pass
        with self._state:
            self._state.wait_for(lambda: self._running == 0)

    def catch_up(self) -> None:
        """Run the waiting jobs that need no model in this thread, up to the first that
        does, and wait for such a job under way: what a read of memories does first, so
        it sees the facts of the writes before it without waiting on a model call."""
        while self._step(quick_only=True):
            pass
        with self._state:
            self._state.wait_for(lambda: self._running_quick == 0)

    def close(self) -> None:
        """Run the jobs submitted so far, then stop the thread."""
        self._worker.close()

    def _drain(self, stop: Callable[[], bool]) -> int:
        done = 0
        while not stop() and self._step():
            done += 1
        return done

    def _step(self, quick_only: bool = False) -> bool:
        """Run the next job (only one that needs no model if ``quick_only``); False if
        none waits."""
        with self._lock if self._lock is not None else nullcontext():
            with self._state:
                if not self._jobs or (quick_only and self._jobs[0].slow):
                    return False
                job = self._jobs.popleft()
                self._running += 1
                self._running_quick += not job.slow
                self._running_of[job.tenant] += 1
            if not job.slow:
                self._run(job)
        if job.slow:
            self._run(job)
        return True

    def _run(self, job: Job) -> None:
        try:
            job.run()
        except LociError as exc:  # a store or provider failure: the events stay
            log.warning("extracting facts from a turn failed: %s", exc)
        finally:
            with self._state:
                self._running -= 1
                self._running_quick -= not job.slow
                self._running_of[job.tenant] -= 1
                self._state.notify_all()


def worth_reading(events: Sequence[Event]) -> list[Event]:
    """The events of a write that may hold facts: messages someone wrote, not Loci."""
    return [e for e in events if readable_lines(e)]


def extract_turns(memories: MemoryService, events: Sequence[Event],
                  chat: ChatModel | None) -> list[SaveResult]:
    """Save the facts of new ``events``: with a chat model, it decides on each user turn
    (the rules read a turn it fails on); without one, the rules read every turn."""
    if chat is None:
        return memories.extract(events, RuleExtractor(), save=True)
    left: list[Event] = []
    results: list[SaveResult] = []
    for event in (e for e in events if e.role == "user"):
        try:
            decided = decide_turn(memories, event, chat)
        except LociError as exc:
            log.warning("the chat model could not decide on a turn; rules instead: %s", exc)
            decided = None
        if decided is None:
            left.append(event)
        else:
            results += decided
    if left:
        results += memories.extract(left, RuleExtractor(), save=True)
    return results


def extracted_from(memories: MemoryService, events: Sequence[Event],
                   extraction: TurnExtraction) -> list[SaveResult]:
    """The active memories whose source is one of ``events`` (what the turns gave), once
    the turns handed over so far are extracted."""
    extraction.finish()
    sources = {f"event:{e.id}" for e in events}
    return [SaveResult(m, "created") for m in memories.store.list_memories(
        memories.scope, now=memories.clock()) if m.source in sources]
