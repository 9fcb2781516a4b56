"""REST routes of the usage ledger: a report of the caller's LLM calls (per session and
in all, priced, against the full-history counterfactual) and recording a call made
outside the proxy."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from loci.server.deps import Engine
from loci.server.routing import JSONRoute
from loci.timeutil import parse_timestamp

router = APIRouter(tags=["usage"], route_class=JSONRoute)


class UsageIn(BaseModel):
    """A call the client made itself: the provider's ``usage`` object as it came."""

    session: str
    model: str
    usage: dict[str, Any]
    latency_ms: float | None = Field(None, ge=0)
    #: What the client sent besides Loci's context (its system prompt), for the
    #: counterfactual.
    client_text: list[str] = Field(default_factory=list)


def _time(value: str | None) -> datetime | None:
    return None if value is None else parse_timestamp(value)


@router.get("/usage", response_model=None)
def usage_report(
    loci: Engine, session: str | None = None,
    since: str | None = Query(None, description="ISO 8601; calls from this time on"),
    until: str | None = Query(None, description="ISO 8601; calls before this time"),
    all_agents: bool = Query(False, description="every agent of the user"),
) -> dict[str, Any]:
    """The caller's calls per session and in all: tokens, cache-hit rate, cost under the
    price table and the cost of sending each session's whole log uncached; with
    ``session``, each call too."""
    report = loci.usage.report(session, since=_time(since), until=_time(until),
                               all_agents=all_agents)
    return report.to_dict()


@router.post("/usage", response_model=None, status_code=201)
def record_usage(loci: Engine, body: UsageIn) -> dict[str, Any]:
    """Record one LLM call of a session that the client made itself."""
    record = loci.usage.record(body.session, body.usage, model=body.model,
                               latency_ms=body.latency_ms, client_text=body.client_text)
    return {"id": record.id, "input_tokens": record.input_tokens,
            "cached_tokens": record.cached_tokens}
