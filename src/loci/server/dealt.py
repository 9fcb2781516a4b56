"""A uvicorn server for connections that another process accepted.

``loci serve --workers N`` accepts connections in the parent and hands each to a worker
over a Unix socket (see ``server.workers``). uvicorn only serves listening sockets, so
:class:`DealtServer` starts it with none and feeds it the received sockets through the
event loop's ``connect_accepted_socket``, with the protocol factory uvicorn's own
listeners use. It relies on uvicorn's ``Server.lifespan``, ``server_state`` and
``Config.http_protocol_class`` (uvicorn is pinned).
"""

from __future__ import annotations

import asyncio
import functools
import socket

import uvicorn

#: Descriptors read from the channel at most per wake-up.
_BATCH = 64


class DealtServer(uvicorn.Server):
    """Serves the connections that arrive as descriptors on ``channel``; stops when the
    parent closes it."""

    def __init__(self, config: uvicorn.Config, channel: socket.socket) -> None:
        super().__init__(config)
        self.channel = channel
        self._handshakes: set[asyncio.Task[object]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])
        config = self.config
        protocol = functools.partial(
            config.http_protocol_class, config=config,  # type: ignore[call-arg]
            server_state=self.server_state, app_state=self.lifespan.state)
        self.channel.setblocking(False)
        loop = asyncio.get_running_loop()
        loop.add_reader(self.channel.fileno(), self._receive, loop, protocol)

    def _receive(self, loop: asyncio.AbstractEventLoop,
                 protocol: functools.partial[asyncio.Protocol]) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self.channel, _BATCH, _BATCH)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        if not data and not fds:  # the parent is gone
            loop.remove_reader(self.channel.fileno())
            self.should_exit = True
            return
        for fd in fds:
            conn = socket.socket(fileno=fd)
            conn.setblocking(False)
            task = loop.create_task(loop.connect_accepted_socket(protocol, conn))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().remove_reader(self.channel.fileno())
        await super().shutdown(sockets=[])
