"""The recall layer: what the stored memories and conversations hold for the incoming
message, found by hybrid search, kept while worth their tokens, each recalled turn with
the turn that completes it, shown by session under its date."""

from __future__ import annotations

from collections.abc import Sequence

from loci.context.sources import BuildContext, Item, in_summary, said, source_event
from loci.memory.scopes import search_memories
from loci.memory.timeline import asks_about_past, hit_standing, shown_as_past
from loci.models import Event, SearchHit, captions, shared, speaker
from loci.search.relevance import MIN_RELEVANCE
from loci.store.base import SearchFilters
from loci.timeutil import day_label

#: A recalled item is worth its tokens while it scores at least this share of the best
#: hit's score, and never below the calibrated ``search.relevance.MIN_RELEVANCE``.
RECALL_RELATIVE_FLOOR = 0.5


def recall(ctx: BuildContext) -> list[Item]:
    """Recall: hybrid search on the incoming message over memories and the
    event log (archived turns of this session, the user's other sessions), best first,
    down to a floor relative to the best hit (``recall_floor``), leaving out what is
    already in context. A turn brings its neighbour (the answer after a question, the
    question before an answer); turns are shown by session, in time order, under the
    session's date, each line saying who spoke. How many fit is the budget's call."""
    if ctx.retriever is None or not ctx.message or not ctx.message.strip():
        return []
    filters = SearchFilters(now=ctx.now)
    limit = max(ctx.recall_limit, 1)
    # A question about the past also finds facts that no longer hold, marked so.
    past = SearchFilters() if asks_about_past(ctx.message, ctx.now) else filters
    hits = search_memories(ctx.retriever, ctx.memory_scopes, ctx.message,
                           limit=max(limit // 3, 1), filters=past, now=ctx.now)
    hits += ctx.retriever.search(ctx.scope, "event", ctx.message, limit=limit,
                                 filters=filters, now=ctx.now)
    hits.sort(key=lambda h: h.score, reverse=True)
    shown = _worth_showing(ctx, hits)
    neighbours = _neighbours(ctx, [hit for _, hit in shown])
    seen = {key for key, _ in shown}
    items: list[Item] = []
    for key, hit in shown:
        if hit.kind == "memory":
            items.append(_memory_item(ctx, hit, key))
            continue
        items.append(_turn_item(ctx, hit, f"{key} (score {hit.score:.2f})"))
        neighbour = neighbours.get(hit.id)
        if neighbour is not None and (near := f"event {neighbour.id}") not in seen and (
                near not in ctx.included) and (
                said(neighbour.text, labelled=False) not in ctx.shown):
            seen.add(near)
            items.append(_turn_item(ctx, neighbour, f"{near} (next to {key})"))
    return items


def _worth_showing(ctx: BuildContext, hits: Sequence[SearchHit]
                   ) -> list[tuple[str, SearchHit]]:
    """The hits above the floor that the context does not show yet, with their keys."""
    floor = recall_floor(hits)
    shown: dict[str, SearchHit] = {}
    for hit in hits:
        key = f"event {hit.id}" if hit.kind == "event" else hit.id
        if hit.score < floor:
            break
        if key in ctx.included or key in shown or not hit.text.strip() or (
                in_summary(ctx, hit.text)) or said(hit.text, labelled=False) in ctx.shown:
            continue
        shown[key] = hit
    return list(shown.items())


def recall_floor(hits: Sequence[SearchHit]) -> float:
    """The score below which recall stops: a share of the best hit's, so that a question
    with a clear answer is not padded with what merely shares its words."""
    best = max((h.score for h in hits), default=0.0)
    return max(MIN_RELEVANCE, RECALL_RELATIVE_FLOOR * best)


def _memory_item(ctx: BuildContext, hit: SearchHit, key: str) -> Item:
    """A recalled memory; one that still holds is said by the turn it was taken from,
    in the user's own words, when recall shows that turn too."""
    standing = hit_standing(hit, ctx.now)
    source = hit.metadata.get("source")
    return Item(key, f"[RECALL {day_label(hit.timestamp)}] {shown_as_past(hit.text, standing)}",
                covered_by=source_event(source if isinstance(source, str) else None)
                if standing.status == "active" else None)


def _turn_item(ctx: BuildContext, hit: SearchHit, item_id: str) -> Item:
    who = speaker(hit.metadata) or str(hit.metadata.get("role") or "someone")
    where = "this session" if hit.session == ctx.session else f"session {hit.session}"
    return Item(item_id, f"{who}: {hit.text}{shared(hit.metadata)}",
                group=f"[RECALL {where}, {day_label(hit.timestamp)}]",
                order=(hit.timestamp.timestamp(), int(hit.id)), shows=f"event {hit.id}")


#: The role of the turn that completes a turn of each role, and where it is in the log.
_COMPLETES = {"user": ("assistant", 1), "assistant": ("user", -1)}


def _neighbours(ctx: BuildContext, hits: Sequence[SearchHit]) -> dict[str, SearchHit]:
    """The turn that completes each turn among ``hits``, by the hit's id: the reply
    after a user's turn, the user's turn before a reply (messages only). The turns next
    to them in the log are read together; a turn whose neighbour there is another
    session's is looked up on its own."""
    turns = [h for h in hits if h.kind == "event" and h.session is not None
             and h.metadata.get("type") in (None, "message")
             and h.metadata.get("role") in _COMPLETES]
    near = {h.id: str(int(h.id) + _COMPLETES[str(h.metadata["role"])][1]) for h in turns}
    found = {h.id: h for h in ctx.store.hits(
        ctx.scope, "event", [(int(i), 0.0) for i in set(near.values())])}
    neighbours: dict[str, SearchHit] = {}
    for hit in turns:
        wanted = _COMPLETES[str(hit.metadata["role"])][0]
        other = found.get(near[hit.id])
        if other is None or other.session != hit.session:
            other = _neighbour_apart(ctx, hit)
        if other is not None and other.metadata.get("role") == wanted and (
                other.metadata.get("type") == "message"):
            neighbours[hit.id] = other
    return neighbours


def _neighbour_apart(ctx: BuildContext, hit: SearchHit) -> SearchHit | None:
    """The event next to ``hit`` in its session when the log interleaves sessions."""
    assert hit.session is not None
    if hit.metadata.get("role") == "user":
        events = ctx.store.list_events(ctx.scope, hit.session, after_id=int(hit.id), limit=1)
    else:
        events = ctx.store.tail_events(ctx.scope, hit.session, 1, include_archived=True,
                                       before_id=int(hit.id))
    return _as_hit(events[0]) if events else None


def _as_hit(event: Event) -> SearchHit:
    return SearchHit("event", str(event.id), 0.0, event.content, event.timestamp,
                     event.session, {"role": event.role, "type": event.type,
                                     **({"name": n} if (n := speaker(event.metadata)) else {}),
                                     **({"caption": c} if (c := captions(event.metadata)) else {})})
