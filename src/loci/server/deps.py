"""FastAPI dependencies: the hub, the caller's principal, and their engine."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from loci.engine import Loci
from loci.server.hub import Hub, Principal


async def get_hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


async def get_principal(
    hub: Annotated[Hub, Depends(get_hub)],
    authorization: Annotated[str | None, Header()] = None,
    x_loci_user: Annotated[str | None, Header()] = None,
    x_loci_agent: Annotated[str | None, Header()] = None,
) -> Principal:
    return hub.authenticate(authorization, x_loci_user, x_loci_agent)


async def get_engine(
    hub: Annotated[Hub, Depends(get_hub)],
    principal: Annotated[Principal, Depends(get_principal)],
) -> Loci:
    return hub.engine(principal)


#: The caller's engine, scoped to their tenant and agent: what every route works on.
Engine = Annotated[Loci, Depends(get_engine)]
#: The hub itself, for routes that run their work through ``Hub.run``.
HubDep = Annotated[Hub, Depends(get_hub)]
