"""The usage ledger (``Loci.usage``): every LLM call of a session recorded with its
tokens (cached, written to the cache, output), latency and the compiled context it was
sent, and reports that price them against what the same calls would have cost without
Loci: the session's whole log sent every time, uncached.

The proxy records each upstream call itself; a library user who calls their own model
records it with one call, the provider's usage object as it came::

    context = loci.compile(session, message)
    answer = client.chat.completions.create(model=..., messages=context.to_openai())
    loci.usage.record(session, answer.usage, model=..., context=context)

Record a call before adding its exchange to the log: the counterfactual is the log as
it stands plus the context's new message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from loci.apis.wire import check_usage, read_usage
from loci.checks import check_label, check_name, check_stored_name, check_text
from loci.context.compiled import CompiledContext
from loci.context.compiler import memo_counter
from loci.errors import ValidationError
from loci.models import NewUsage, Scope, Usage, UsageRecord
from loci.pricing import price_of
from loci.settings import Settings
from loci.store import Store
from loci.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, token_counter

FACES = ("chat", "messages", "responses", "library")


@dataclass(frozen=True)
class UsageTotals:
    """A set of calls summed up and priced."""

    calls: int
    usage: Usage
    #: Input tokens read from the cache, over all input tokens.
    hit_rate: float
    #: US dollars under the price table; None if a call's model has no price.
    cost: float | None
    #: The counterfactual: each call sent the session's whole log, uncached.
    full_input_tokens: int
    full_cost: float | None
    compactions: int

    @property
    def saving(self) -> float | None:
        """The share of the counterfactual's cost saved."""
        if self.cost is None or not self.full_cost:
            return None
        return 1 - self.cost / self.full_cost

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, **asdict(self.usage), "hit_rate": self.hit_rate,
                "cost": self.cost, "full_input_tokens": self.full_input_tokens,
                "full_cost": self.full_cost, "saving": self.saving,
                "compactions": self.compactions}


@dataclass(frozen=True)
class SessionUsage:
    agent: str
    session: str
    first: datetime
    last: datetime
    totals: UsageTotals


@dataclass(frozen=True)
class UsageReport:
    totals: UsageTotals
    #: Per session, the most recently active first.
    sessions: list[SessionUsage]
    #: Each call, oldest first (when the report is of one session).
    calls: list[UsageRecord]
    #: Models the price table does not know (their calls are not priced).
    unpriced: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain values (times as datetimes) for JSON: REST, ``loci usage --json``."""
        return {"totals": self.totals.to_dict(),
                "sessions": [{"agent": s.agent, "session": s.session, "first": s.first,
                              "last": s.last, **s.totals.to_dict()} for s in self.sessions],
                "calls": [asdict(call) for call in self.calls], "unpriced": self.unpriced}


def full_input(record: UsageRecord) -> int:
    """What a client without Loci would have sent for the call: its own text and the
    session's whole log as chat messages."""
    return (record.base_tokens + record.log_tokens + record.log_events * MESSAGE_OVERHEAD
            + REPLY_PRIMING)


class UsageLedger:
    """Records and reports the LLM calls of one scope (``Loci.usage``)."""

    def __init__(self, store: Store, scope: Scope, settings: Settings,
                 now: Callable[[], datetime]) -> None:
        self.store, self.scope, self.settings, self._now = store, scope, settings, now

    def record(self, session: str, usage: Any, *, model: str, face: str = "library",
               latency_ms: float | None = None, context: CompiledContext | None = None,
               client_text: Iterable[str] = ()) -> UsageRecord:
        """Record one call of ``session``: ``usage`` as the provider returned it (OpenAI,
        Anthropic or Gemini, a dict or the SDK's object); ``context`` is what Loci
        compiled for it; ``client_text`` the text the caller sent besides (its own
        system prompt), which a client without Loci would have sent too."""
        check_name("session", session)
        check_label("model", model)
        if face not in FACES:
            raise ValidationError(f"face must be one of {', '.join(FACES)}")
        if latency_ms is not None and not 0 <= latency_ms < 1e9:
            raise ValidationError("latency_ms must be a duration in milliseconds")
        # The client's system text recurs on every call: counted once.
        counter = memo_counter(token_counter(model, self.settings.tokenizer))
        base = sum(counter.count_message("system", check_text("client_text", text))
                   for text in client_text)
        layers: dict[str, int] = {}
        if context is not None:
            layers = {layer.name: layer.used for layer in context.layers if layer.used}
            if context.message is not None:  # not in the log yet
                base += counter.count_message("user", context.message)
        call = NewUsage(session=session, model=model, face=face,
                        usage=read_usage(check_usage(usage)), at=self._now(),
                        latency_ms=latency_ms,
                        context_tokens=context.total_tokens if context else 0,
                        layers=layers, prefix_hash=context.prefix_hash if context else "",
                        base_tokens=base)
        return self.store.add_usage(self.scope, call)

    def records(self, session: str | None = None, *, since: datetime | None = None,
                until: datetime | None = None, all_agents: bool = False,
                ) -> list[UsageRecord]:
        """The recorded calls, oldest first: of this agent (or all the user's agents), of
        one session, in a time range (``since`` included, ``until`` not)."""
        if session is not None:
            check_stored_name("session", session)
        agent = None if all_agents else self.scope.agent
        return self.store.list_usage(self.scope.tenant, agent, session, since, until)

    def report(self, session: str | None = None, *, since: datetime | None = None,
               until: datetime | None = None, all_agents: bool = False) -> UsageReport:
        """The calls summed up per session and in all, priced; with ``session``, each
        call too."""
        records = self.records(session, since=since, until=until, all_agents=all_agents)
        by_session: dict[tuple[str, str], list[UsageRecord]] = {}
        for record in records:
            by_session.setdefault((record.agent, record.session), []).append(record)
        sessions = sorted(
            (SessionUsage(agent, name, calls[0].at, calls[-1].at, self.totals(calls))
             for (agent, name), calls in by_session.items()),
            key=lambda s: s.last, reverse=True)
        unpriced = sorted({r.model for r in records
                           if price_of(r.model, self.settings.prices) is None})
        return UsageReport(self.totals(records), sessions,
                           records if session is not None else [], unpriced)

    def totals(self, records: Sequence[UsageRecord]) -> UsageTotals:
        usage = sum((r.usage for r in records), Usage())
        cost: float | None = 0.0
        full_cost: float | None = 0.0
        for r in records:
            price = price_of(r.model, self.settings.prices)
            if price is None:
                cost = full_cost = None
            elif cost is not None and full_cost is not None:
                cost += price.cost(r.usage)
                full_cost += price.uncached_cost(full_input(r), r.output_tokens)
        compactions: dict[tuple[str, str], int] = {}
        for r in records:  # the last count of each session
            compactions[(r.agent, r.session)] = r.compactions
        return UsageTotals(
            calls=len(records), usage=usage,
            hit_rate=usage.cached_tokens / usage.input_tokens if usage.input_tokens else 0.0,
            cost=cost, full_input_tokens=sum(full_input(r) for r in records),
            full_cost=full_cost, compactions=sum(compactions.values()))
