"""Loci as the backend of the ``anthropic`` SDK's memory tool (``memory_20250818``).

``LociMemoryTool(loci)`` (and ``LociAsyncMemoryTool`` for the async client) implement the
SDK's abstract memory tool over ``loci.knowledge.memory_files``: the model's files under
``/memories`` become versioned, searchable documents of the ``Loci`` view's user and
agent. Use it wherever the SDK takes a memory tool, e.g.
``client.beta.messages.tool_runner(..., tools=[LociMemoryTool(loci)])``. Needs the
``anthropic`` package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio.to_thread import run_sync

from loci import Loci, LociError, MemoryFiles

Command = (BetaMemoryTool20250818ViewCommand | BetaMemoryTool20250818CreateCommand
           | BetaMemoryTool20250818StrReplaceCommand | BetaMemoryTool20250818InsertCommand
           | BetaMemoryTool20250818DeleteCommand | BetaMemoryTool20250818RenameCommand)


def _run(files: MemoryFiles, command: Command) -> str:
    """One command; a mistake of the model's (a path Loci cannot store, too long a
    text, a bad range) is the SDK's ``ToolError``: its text goes back to the model as an
    error result."""
    try:
        # The SDK builds a command unvalidated: its fields are checked here, not warned of.
        return files.run(command.model_dump(exclude_none=True, warnings=False))
    except LociError as exc:
        raise ToolError(str(exc)) from exc


class LociMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over a ``Loci`` view's knowledge base."""

    def __init__(self, loci: Loci, **options: Any) -> None:
        super().__init__(**options)
        self.files = MemoryFiles(loci.knowledge)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return _run(self.files, command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return _run(self.files, command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return _run(self.files, command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return _run(self.files, command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return _run(self.files, command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return _run(self.files, command)


class LociAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """The same for the async client: each command runs in a worker thread, since the
    store's calls block."""

    def __init__(self, loci: Loci, **options: Any) -> None:
        super().__init__(**options)
        self.files = MemoryFiles(loci.knowledge)

    async def _call(self, command: Command) -> str:
        run: Callable[[MemoryFiles, Command], str] = _run
        return await run_sync(run, self.files, command)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._call(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._call(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._call(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._call(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._call(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._call(command)
