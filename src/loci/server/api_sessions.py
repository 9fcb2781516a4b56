"""REST routes for sessions: events (append, list, import, export), conversation
search, context compilation with its explain view, compaction and session end."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from loci import (
    Compaction,
    CompactionResult,
    Event,
    SearchHit,
    SessionInfo,
    SessionKnowledge,
    ValidationError,
)
from loci.server.api_eval import router as eval_router
from loci.server.deps import Engine, hub_of
from loci.server.routing import JSONRoute

router = APIRouter(tags=["sessions"], route_class=JSONRoute)


class EventIn(BaseModel):
    """One event to append: a message, a tool call or a tool result."""

    type: str = "message"
    role: str
    content: str = ""
    tool_name: str | None = None
    tool_call_id: str | None = None
    args: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ContextIn(BaseModel):
    message: str | None = None
    model: str | None = None
    #: Overrides the model's context window for this call.
    window: int | None = Field(None, ge=512, le=10_000_000)
    format: Literal["openai", "anthropic", "text"] = "openai"


class CompactIn(BaseModel):
    instructions: str | None = None
    dry_run: bool = False
    strategy: str = "full"
    model: str | None = None


class ReplyIn(BaseModel):
    content: str


class RecallIn(BaseModel):
    query: str
    session: str | None = None
    limit: int = Field(10, ge=1, le=100)


# The hottest routes first: a request tries the routes in order, paying for each miss.
@router.post("/sessions/{session:path}/context", response_model=None)
async def compile_context(request: Request, loci: Engine, session: str, body: ContextIn
                          ) -> dict[str, Any]:
    """Compile the context for the next LLM call, with the explain view."""
    # Like a search when no compaction is due (on the event loop if it may: less CPU
    # than a thread hop); compacting may wait on an LLM, so it gets a thread.
    compiled = await hub_of(request).run(lambda: loci.compile_unless_compacting(
        session, body.message, model=body.model, window=body.window))
    if compiled is None:
        compiled = await run_in_threadpool(loci.compile, session, body.message,
                                           model=body.model, window=body.window)
    result = compiled.to_dict()
    if body.format == "anthropic":
        result["messages"] = compiled.to_anthropic()
    elif body.format == "text":
        result["messages"] = compiled.to_text()
    result["explain"] = compiled.explain()
    return result


@router.get("/sessions", response_model=None)
def list_sessions(loci: Engine) -> list[SessionInfo]:
    return loci.sessions()


@router.post("/sessions/{session:path}/events", response_model=None, status_code=201)
def append_events(loci: Engine, session: str, body: EventIn | list[EventIn]) -> list[Event]:
    """Append one event or a list of events, atomically."""
    events = body if isinstance(body, list) else [body]
    if not events:
        raise ValidationError("no events to append")
    return loci.add_events(session, [e.model_dump(exclude_none=True) for e in events])


@router.get("/sessions/{session:path}/events", response_model=None)
def list_events(
    loci: Engine, session: str, include_archived: bool = True,
    after: int = Query(0, ge=0, description="only events with a greater id"),
    limit: int = Query(1000, ge=1, le=10_000),
) -> list[Event]:
    events = loci.events(session, include_archived=include_archived)
    return [e for e in events if e.id > after][:limit]


@router.get("/sessions/{session:path}/export", response_class=PlainTextResponse)
def export_session(loci: Engine, session: str) -> PlainTextResponse:
    """The session's log as JSONL (the session format)."""
    text = "".join(line + "\n" for line in loci.export_jsonl(session))
    return PlainTextResponse(text, media_type="application/x-ndjson")


@router.post("/sessions/{session:path}/import", response_model=None, status_code=201)
async def import_session(loci: Engine, session: str, request: Request) -> dict[str, int]:
    """Append a JSONL log (the body); a bad line stores nothing."""
    try:
        body = (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"the JSONL body is not UTF-8: {exc}") from exc
    return {"imported": len(loci.import_jsonl(body, session))}


@router.post("/sessions/{session:path}/reply", response_model=None, status_code=201)
def add_reply(loci: Engine, session: str, body: ReplyIn) -> dict[str, Any]:
    """Record an assistant reply: memory and state tags are saved and stripped."""
    event, result = loci.add_reply(session, body.content)
    return {"event": event, "saved": [{"action": s.action, "memory": s.memory}
                                       for s in result.saved], "state": result.state}


@router.post("/sessions/{session:path}/compact", response_model=None)
def compact(loci: Engine, session: str, body: CompactIn | None = None) -> CompactionResult:
    body = body or CompactIn()
    return loci.compact(session, instructions=body.instructions, dry_run=body.dry_run,
                        strategy=body.strategy, model=body.model)


@router.get("/sessions/{session:path}/compactions", response_model=None)
def list_compactions(loci: Engine, session: str) -> list[Compaction]:
    return loci.compactions(session)


@router.post("/sessions/{session:path}/end", response_model=None)
def end_session(loci: Engine, session: str) -> SessionKnowledge:
    """The librarian: file the session into the knowledge base and memories."""
    return loci.end_session(session)


# Its own module (it runs the evaluation), its route among those below a session.
router.include_router(eval_router)


# After the routes below a session, so that "/sessions/a/events" is not session
# "a/events" (session names may hold "/": the path converter takes them whole).
@router.get("/sessions/{session:path}", response_model=None)
def get_session(loci: Engine, session: str) -> SessionInfo:
    return loci.session(session)


@router.post("/recall", response_model=None)
async def search_conversation(request: Request, loci: Engine, body: RecallIn) -> list[SearchHit]:
    """Search the event log, archived events included."""
    return await hub_of(request).run(lambda: loci.search_conversation(
        body.query, body.session, body.limit))
