"""Two processes compacting one session at once make one compaction: the plan is applied
only if no compaction came since it read the session (checked in the write transaction)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loci import Event, Loci, load_settings
from loci.compaction.compactor import CompactionResult
from loci.compaction.summarize import Summarizer
from tests.compaction.test_compaction import TINY, chat
from tests.conftest import FakeClock


class Together:
    """The summarizer of one process, which waits until the other has read the session
    too (so both plan over the same span) before summarizing as it would."""

    def __init__(self, inner: Summarizer, barrier: threading.Barrier) -> None:
        self.inner, self.barrier = inner, barrier

    def summarize(self, events: Sequence[Event], previous_summary: str | None = None,
                  instructions: str | None = None, max_tokens: int = 800) -> str:
        self.barrier.wait(timeout=30)
        return self.inner.summarize(events, previous_summary, instructions, max_tokens)


def test_two_processes_compacting_at_once_make_one_compaction(store_url: str,
                                                              clock: FakeClock,
                                                              home: Path) -> None:
    options = {"store": store_url, "model": "tiny", "models": TINY,
               "compaction_preserve_messages": 4, "compaction_auto": False}
    barrier = threading.Barrier(2)
    views = [Loci(load_settings(**options), clock=clock) for _ in range(2)]
    try:
        chat(views[0], 12, big=400)
        for view in views:  # separate runtimes: separate connections, as two processes
            service = view._compaction
            service.summarizer = Together(service.summarizer, barrier)
        with ThreadPoolExecutor(2) as pool:
            results: list[CompactionResult] = list(pool.map(lambda v: v.compact("s"), views))
        assert len(views[0].compactions("s")) == 1
        assert sorted(r.archived > 0 for r in results) == [False, True]
        loser = next(r for r in results if not r.archived)
        assert loser.record is None and not loser.changed
        events = views[1].events("s")
        assert sum(e.type == "summary" for e in events) == 1
    finally:
        for view in views:
            view.close()
