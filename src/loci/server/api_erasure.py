"""REST routes that erase: a session (with what was derived from it) and the caller's
whole user. Both answer what they erased; a session's ``dry_run`` only lists it."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from loci import NotFoundError, SessionErasure, UserErasure, ValidationError
from loci.server.deps import Engine, hub_of
from loci.server.routing import JSONRoute

router = APIRouter(tags=["erasure"], route_class=JSONRoute)


@router.delete("/sessions/{session:path}", response_model=None)
def erase_session(
    loci: Engine, session: str, keep_derived: bool = False, dry_run: bool = False
) -> SessionErasure:
    """Erase a session: its events, compactions and index entries, and (unless
    ``keep_derived``) the memories and documents derived from it."""
    plan = loci.erase_session(session, keep_derived=keep_derived, dry_run=True)
    if not (plan.events or plan.memories or plan.documents):
        raise NotFoundError(f"no session {session!r}")
    return plan if dry_run else loci.erase_session(session, keep_derived=keep_derived)


@router.delete("/user", response_model=None)
async def erase_user(
    request: Request, loci: Engine,
    confirm: str = Query(description="the user's name again, as a safeguard"),
) -> UserErasure:
    """Erase everything of the calling user (the API key's, or in open mode the
    ``X-Loci-User`` one): every agent's data, API keys and index entries."""
    user = loci.scope.tenant
    if confirm != user:
        raise ValidationError(f"confirm must repeat the user's name ({user!r})")
    # This request holds the user's engine too: the erasure waits for the others.
    return await run_in_threadpool(partial(hub_of(request).erase_user, user, callers=1))
