"""Consolidation proposals prepared while users are away (``[server]
consolidate_idle``): each scope whose memories have not changed for that long, and
changed since its pending proposal, gets a new one to review on the dashboard, over
REST or with ``loci memory consolidate``. The server never applies a proposal."""

from __future__ import annotations

import logging
from datetime import timedelta

import anyio

from loci import LociError, Runtime, Scope

log = logging.getLogger("loci.server")


async def prepare_when_idle(runtime: Runtime, minutes: float) -> None:
    """Look every ``minutes`` for scopes to prepare a proposal for."""
    idle = timedelta(minutes=minutes)
    while True:
        await anyio.sleep(idle.total_seconds())
        try:
            prepared = await anyio.to_thread.run_sync(prepare_proposals, runtime, idle)
            if prepared:
                log.info("consolidation proposals prepared for %d scopes", len(prepared))
        except LociError as exc:
            log.warning("preparing consolidation proposals failed: %s", exc)


def prepare_proposals(runtime: Runtime, idle: timedelta) -> list[Scope]:
    """A proposal for each scope whose newest memory write is older than ``idle`` and
    newer than its pending proposal; the scopes that got one."""
    now = runtime.clock()
    prepared = []
    for scope, loci in runtime.memory_views().items():
        newest = runtime.store.list_memories(scope, limit=1)
        if not newest or now - newest[0].updated_at < idle:
            continue
        pending = loci.consolidation()
        if pending is not None and pending.created_at >= newest[0].updated_at:
            continue
        loci.consolidate()
        prepared.append(scope)
    return prepared
