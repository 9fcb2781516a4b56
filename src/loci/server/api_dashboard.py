"""REST routes the dashboard needs beyond the domain APIs: one overview call that says
who the caller is (user, agent, how they authenticated) and how much of each kind of
data their scope holds, for the header and the tab counts; and the users and agents
the caller may open, for its pickers."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Request

from loci import __version__
from loci.server.deps import Engine, hub_of, principal_of
from loci.server.routing import JSONRoute

router = APIRouter(tags=["dashboard"], route_class=JSONRoute)


@router.get("/overview", response_model=None)
def overview(loci: Engine, request: Request) -> dict[str, Any]:
    """The caller's scope and counts: live memories by type, state keys, sessions and
    knowledge documents; and the store's rows that wait for their vector."""
    memories = Counter(m.type for m in loci.memories(None))
    index = loci.runtime.index_status()
    return {
        "version": __version__,
        "user": loci.scope.tenant,
        "agent": loci.scope.agent,
        "auth": "key" if principal_of(request).key_id else "open",
        "keys_required": hub_of(request).keys_required(),
        "memories": dict(sorted(memories.items())),
        "state": len(loci.state()),
        "sessions": len(loci.sessions()),
        "documents": len(loci.knowledge.ls("/")),
        "vectors_pending": index.pending if index else 0,
    }


@router.get("/scopes", response_model=None)
def scopes(loci: Engine, request: Request) -> list[dict[str, str]]:
    """The users and agents the caller may open: every one the store holds in open mode
    and for an operator key, the key's own user's otherwise."""
    hub, principal = hub_of(request), principal_of(request)
    everyone = principal.key_id is None or hub.is_operator(principal.key_id)
    return [{"user": s.tenant, "agent": s.agent} for s in hub.runtime.scopes()
            if everyone or s.tenant == loci.scope.tenant]
