"""REST routes for memories (CRUD, hybrid search, history, paginated reads) and the
key/value state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from loci import (
    Memory,
    MemoryPage,
    MemorySummary,
    MemoryVersion,
    NotFoundError,
    SearchFilters,
    StateItem,
)
from loci.server.deps import Engine, hub_of
from loci.server.routing import JSONRoute

router = APIRouter(tags=["memories"], route_class=JSONRoute)


class MemoryIn(BaseModel):
    """``memory_write``: the type decides the expiry."""

    content: str
    type: str = "project_context"
    tags: list[str] = Field(default_factory=list)


class SearchIn(BaseModel):
    """``memory_search``: hybrid search with optional filters."""

    query: str
    limit: int = Field(5, ge=1, le=100)
    types: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    #: Facts that expired or were superseded: True ranks them as they match, False
    #: leaves them out; default: ranked below the facts that hold, unless the query
    #: asks about the past.
    past: bool | None = None


class StateIn(BaseModel):
    value: str


# The hottest route first: a request tries the routes in order, paying for each miss.
@router.post("/search", response_model=None)
async def search_memories(request: Request, loci: Engine, body: SearchIn) -> list[MemorySummary]:
    filters = SearchFilters(types=tuple(body.types), tags=tuple(body.tags),
                            since=body.since, until=body.until)
    return await hub_of(request).run(
        lambda: loci.memory_search(body.query, body.limit, filters, past=body.past))


@router.get("/memories", response_model=None)
def list_memories(
    loci: Engine, type: str | None = None, include_expired: bool = False,
    limit: int = Query(500, ge=1, le=10_000),
) -> list[Memory]:
    """Memories newest first; expired ones only when asked for."""
    return loci.memories(type, include_expired=include_expired)[:limit]


@router.post("/memories", response_model=None, status_code=201)
def create_memory(loci: Engine, body: MemoryIn) -> Memory:
    return loci.memory_write(body.type, body.tags, body.content)


@router.post("/memories/consolidation", response_model=None)
def propose_consolidation(loci: Engine) -> dict[str, Any]:
    """Propose merges, supersessions, retirements and retypes of the memories, as a
    diff to review; it becomes the pending proposal and changes nothing."""
    return loci.consolidate().to_dict()


@router.get("/memories/consolidation", response_model=None)
def pending_consolidation(loci: Engine) -> dict[str, Any]:
    """The pending proposal (one made here, by the CLI, or by the server when idle)."""
    proposal = loci.consolidation()
    if proposal is None:
        raise NotFoundError("no pending consolidation proposal")
    return proposal.to_dict()


@router.post("/memories/consolidation/{proposal_id}/apply", response_model=None)
def apply_consolidation(loci: Engine, proposal_id: str) -> dict[str, Any]:
    """Apply the pending proposal ``proposal_id`` as new versions (history kept,
    retired memories restorable); 409 if its memories changed since it was made."""
    return loci.apply_consolidation(proposal_id).to_dict()


@router.get("/memories/{memory_id}", response_model=None)
def get_memory(loci: Engine, memory_id: str) -> Memory:
    return loci.memory(memory_id)


@router.put("/memories/{memory_id}", response_model=None)
def update_memory(loci: Engine, memory_id: str, body: MemoryIn) -> Memory:
    """Update in place; the old version stays in the memory's history."""
    return loci.memory_write(body.type, body.tags, body.content, id=memory_id)


@router.delete("/memories/{memory_id}", status_code=204)
def delete_memory(loci: Engine, memory_id: str, redact_source: bool = False) -> Response:
    """Delete a memory with its history; ``redact_source`` also removes the reply tag
    that wrote it from the raw reply in the log."""
    loci.forget(memory_id, redact_source=redact_source)
    return Response(status_code=204)


@router.get("/memories/{memory_id}/history", response_model=None)
def memory_history(loci: Engine, memory_id: str) -> list[MemoryVersion]:
    return loci.memory_history(memory_id)


@router.get("/memories/{memory_id}/read", response_model=None)
def read_memory(
    loci: Engine, memory_id: str, offset: int = Query(0, ge=0),
    limit: int = Query(1000, ge=1, le=100_000),
) -> MemoryPage:
    """``memory_read``: the memory's markdown, paginated by characters."""
    return loci.memory_read(memory_id, offset, limit)


@router.get("/state", response_model=None)
def list_state(loci: Engine) -> list[StateItem]:
    return loci.state()


@router.get("/state/{key:path}", response_model=None)
def get_state(loci: Engine, key: str) -> StateItem:
    return loci.state_get(key)


@router.put("/state/{key:path}", response_model=None)
def set_state(loci: Engine, key: str, body: StateIn) -> StateItem:
    return loci.state_set(key, body.value)


@router.delete("/state/{key:path}", status_code=204)
def delete_state(loci: Engine, key: str) -> Response:
    loci.state_delete(key)
    return Response(status_code=204)
