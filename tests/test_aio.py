"""``AsyncLoci`` beyond the behaviour suite it shares with ``Loci`` (the modules with
``BOTH_APIS``): its surface is Loci's, and a call that waits on the chat model leaves
the event loop free."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loci import AsyncLoci, Loci, load_settings
from loci.aio import SYNC_ONLY
from loci.testing.scripted import ScriptedChatModel

#: Loci's methods that AsyncLoci keeps plain (they compute, or build a view).
PLAIN = {"for_scope", "workspace", "history_budget", "open"}
#: The server's way to keep a compile on its loop; ``AsyncLoci.compile`` decides itself.
SERVER_ONLY = {"compile_unless_compacting"}


def test_every_method_of_loci_is_a_coroutine_of_async_loci() -> None:
    for name, member in inspect.getmembers(Loci, inspect.isfunction):
        if name.startswith("_") or name in PLAIN | SERVER_ONLY:
            continue
        own = getattr(AsyncLoci, name, None)
        assert inspect.iscoroutinefunction(own), name
        ours = list(inspect.signature(own).parameters)
        assert ours == list(inspect.signature(member).parameters), name


def test_a_call_waiting_on_the_chat_model_leaves_the_loop_free(home: Path) -> None:
    waiting = threading.Event()

    def slow(messages: Sequence[Mapping[str, Any]]) -> str:
        waiting.set()
        time.sleep(0.5)  # the chat model answers late
        return "## Facts\n- Ana lives in Lisbon."

    settings = load_settings(store=f"sqlite:///{home / 'a.db'}", memory_mirror=False,
                             model="tiny", models={"tiny": 4_000}, compaction_auto=False,
                             compaction_preserve_messages=2)
    with Loci(settings) as loci:
        loci.runtime.chat = loci.chat = ScriptedChatModel(responder=slow)
        for i in range(30):
            loci.add("s1", "user", f"Message {i}: I live in Lisbon. " + "Walks. " * 40)

        async def main() -> tuple[int, Any]:
            aloci, ticks = AsyncLoci(loci), 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            task = asyncio.create_task(ticker())
            result = await aloci.compact("s1")
            task.cancel()
            return ticks, result

        ticks, result = asyncio.run(main())
    assert waiting.is_set() and result.summary  # the model was asked
    assert ticks >= 5  # the loop ran on while it waited half a second (inline: 0)


def test_a_local_call_runs_on_the_loop_and_a_busy_store_sends_it_to_a_thread(
        home: Path) -> None:
    settings = load_settings(store=f"sqlite:///{home / 'b.db'}", memory_mirror=False)
    with Loci(settings) as loci:
        aloci, seen = AsyncLoci(loci), []
        lock = loci.runtime.local_lock()
        assert lock is not None

        def where() -> int:
            seen.append(threading.get_ident())
            return len(loci.sessions())

        async def main() -> None:
            await aloci._local(where)  # the store is free: right here
            holder = threading.Thread(target=lambda: (lock.acquire(), time.sleep(0.2),
                                                      lock.release()))
            holder.start()
            await asyncio.sleep(0.05)
            await aloci._local(where)  # the store is busy: a thread waits for it
            holder.join()

        asyncio.run(main())
        assert seen[0] == threading.get_ident() != seen[1]


def test_a_public_method_of_loci_without_a_counterpart_must_be_named_sync_only() -> None:
    public = {name for name, _ in inspect.getmembers(Loci, inspect.isfunction)
              if not name.startswith("_")}
    lacking = {name for name in public if not callable(getattr(AsyncLoci, name, None))}
    assert lacking == SYNC_ONLY  # a new operation needs its line in AsyncLoci's table


def test_a_derived_coroutine_reads_as_the_method_it_runs() -> None:
    for name in ("add", "search", "compile", "reindex", "history_budget"):
        ours, theirs = getattr(AsyncLoci, name), getattr(Loci, name)
        assert ours.__doc__ == theirs.__doc__ and ours.__doc__, name
        assert inspect.signature(ours) == inspect.signature(theirs), name
        assert ours.__qualname__ == f"AsyncLoci.{name}"


def test_bulk_work_runs_in_a_thread_even_when_the_store_is_free(home: Path) -> None:
    settings = load_settings(store=f"sqlite:///{home / 'c.db'}", memory_mirror=False,
                             embedding_provider="hash")
    with Loci(settings) as loci:
        loci.remember("Ana lives in Lisbon.")
        aloci, seen = AsyncLoci(loci), []

        async def main() -> int:
            await aloci.reindex(lambda done, total: seen.append(threading.get_ident()))
            return len(await aloci.search("Lisbon"))  # local: on the loop

        found = asyncio.run(main())
    assert seen and threading.get_ident() not in seen
    assert found == 1
