"""Sending a stream to the client: its events made in a thread of their own and written
in batches (``batched``), each a Server-Sent Event (``sse``). Memory tags are held back
before that, by ``loci.memory.stream.TagFilter``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping

#: Events a stream's thread may make ahead of what the client was sent: enough to fill
#: a write, few enough that a client that leaves stops the turn soon after.
AHEAD = 256


async def batched(events: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``events`` made in a thread of their own and sent as they come, all that is ready
    in one write. (Starlette iterates a plain iterator one thread hop per event: 200 µs
    an event, 3 s for a 64k-character reply in 16k deltas.)"""
    loop = asyncio.get_running_loop()
    pipe = _Pipe(events, loop, asyncio.Event())
    threading.Thread(target=pipe.produce, name="loci-stream", daemon=True).start()
    try:
        while True:
            await pipe.wake.wait()
            pipe.wake.clear()
            if data := pipe.take():
                yield data
            if pipe.done and not pipe.ready:
                if pipe.error is not None:
                    raise pipe.error
                return
    finally:
        pipe.stop()


class _Pipe:
    """The events a stream's thread made, waiting for the event loop to send them."""

    def __init__(self, events: Iterator[bytes], loop: asyncio.AbstractEventLoop,
                 wake: asyncio.Event) -> None:
        self.events, self.loop, self.wake = events, loop, wake
        self.ready: deque[bytes] = deque()
        self.room = threading.Condition()
        self.stopped = self.done = False
        self.error: BaseException | None = None

    def produce(self) -> None:
        try:
            for item in self.events:
                with self.room:
                    while len(self.ready) >= AHEAD and not self.stopped:
                        self.room.wait()
                    if self.stopped:  # the client left: the rest is not made
                        break
                    # Events already waiting have woken the loop: it takes this too.
                    waiting = bool(self.ready)
                    self.ready.append(item)
                if not waiting:
                    self._wake()
        except BaseException as exc:  # raised again on the event loop, as Starlette would
            self.error = exc
        finally:
            close = getattr(self.events, "close", None)
            if close is not None:
                close()
            self.done = True
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
            self.loop.call_soon_threadsafe(self.wake.set)

    def take(self) -> bytes:
        with self.room:
            data = b"".join(self.ready)
            self.ready.clear()
            self.room.notify()
        return data

    def stop(self) -> None:
        with self.room:
            self.stopped = True
            self.room.notify()


def sse(data: Mapping[str, object] | str) -> bytes:
    """One Server-Sent Event carrying ``data`` (JSON unless it is a string)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()
