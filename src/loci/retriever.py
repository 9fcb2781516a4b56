"""Hybrid retrieval: keyword (BM25) and vector hits for one kind of item, fused.

Without an embedder (provider ``none``) it is keyword search alone. Memory hits are
rescored by how much of the question they hold (``search.relevance``).

Conversation search (kind ``event``) does more, all of it generic:

- what is indexed for an event includes its speaker, captions and preceding turns
  (``search.conversation``; done by the store when events are appended);
- session evidence: a turn in a session that matches the query well elsewhere is more
  likely relevant (hierarchical retrieval), so ``SESSION_WEIGHT`` of each event's score
  comes from the best score of its session's candidates;
- time awareness: dates named in the query (``search.temporal``) bring in candidates
  from those periods (the same searches, filtered to the period), and events inside a
  named period get ``TIME_WEIGHT`` of their final score from being there; when the
  query asks *when* (or how long), ``WHEN_WEIGHT`` of the score comes from the event
  saying when something happened;
- people: when the query names someone who speaks among the candidates (by the
  ``name`` of their events; a keyword search of the query finds them, each turn being
  indexed with its speaker), the sessions they speak in are the conversations the
  question is about (``Store.speaker_sessions``; of more than ``MAX_FOCUS_SESSIONS``,
  those where they speak most: a namesake who says a word in someone else's
  conversation is not who the question means; if they speak as much in more sessions
  than that, those among the candidates). The search then runs without
  the names, with those sessions' own candidates added (their keyword parts relative
  to the best match among those sessions: ``search.fusion``), and each event gets
  ``PEOPLE_WEIGHT`` of its score from lying in one. Among other people's
  conversations a name is a rare word, and left in the query it would rank that
  person's shortest turns first; in a store of their conversations only, every
  session is theirs and no order changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

from loci.embeddings.base import Vectors
from loci.indexing import Indexer
from loci.models import Scope, SearchHit, speaker
from loci.search.fusion import Floors, fuse, with_recency
from loci.search.relevance import by_coverage
from loci.search.temporal import Period, asks_when, periods, says_when
from loci.settings import SearchSettings
from loci.store.base import Scored, SearchFilters, Store

#: Each retriever returns this many times the requested hits before fusion.
POOL_FACTOR = 3
MIN_POOL = 30
#: Share of an event's score that comes from the best candidate of its session.
SESSION_WEIGHT = 0.2
#: Share of an event's score that comes from lying in a period the query names.
TIME_WEIGHT = 0.25
#: Share of an event's score that comes from a session where someone the query names
#: speaks.
PEOPLE_WEIGHT = 0.2
#: At most this many of their sessions add candidates of their own: those where they
#: speak most, unless they speak at least ``MAIN_SHARE`` as often as there in more
#: sessions (then the sessions of the query's hits where they speak).
MAX_FOCUS_SESSIONS = 50
MAIN_SHARE = 0.5
#: Words of a query written as names that are looked up among the speakers, at most.
MAX_NAME_LOOKUPS = 8
#: Share of an event's score that comes from saying when, if the query asks when.
WHEN_WEIGHT = 0.1
#: At most this many named periods add candidates of their own.
MAX_PERIODS = 3
#: Threads that search keywords while callers embed their queries and search vectors.
KEYWORD_THREADS = 4
_TICK = timedelta(microseconds=1)
_WORD = re.compile(r"\w+")


class Retriever:
    def __init__(self, store: Store, indexer: Indexer | None, config: SearchSettings) -> None:
        self.store = store
        self.indexer = indexer
        self.config = config
        self._beside = (ThreadPoolExecutor(KEYWORD_THREADS, "loci-keywords")
                        if store.reads_alongside() else None)

    def search(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters,
        now: datetime | None = None,
    ) -> list[SearchHit]:
        pool = max(limit * POOL_FACTOR, MIN_POOL)
        theirs: tuple[str, ...] = ()  # the sessions of the people the query names
        read: list[SearchHit] = []  # hits already read (kept for the final reading)
        if kind == "event":  # whom it names decides what is searched and embedded
            first = self.store.keyword_candidates(scope, kind, query, limit=pool,
                                                  filters=filters)
            read = self.store.hits(scope, kind, first) if first else []
            topic, theirs = self._people(scope, query, read)
            keyword = (lambda: first) if topic == query else self._keywords(
                scope, kind, topic, pool, filters)
            query = topic
        else:
            keyword = self._keywords(scope, kind, query, pool, filters)
        vector_query = self._embed(query)
        named = periods(query) if kind == "event" else []
        fused = self._fused(scope, kind, (query, vector_query, keyword), pool, filters,
                            named, theirs)
        recency = bool(self.config.recency_weight) and now is not None
        if kind == "document" and not recency:
            return self.store.hits(scope, kind, fused[:limit])  # read only the winners
        # What follows rescores by the items' times, sessions and text: read them all.
        hits = self._hits(scope, kind, fused, read)
        if recency:
            assert now is not None
            hits = with_recency(hits, self.config, now)
        if kind == "memory":
            hits = by_coverage(query, hits)
        if kind == "event":
            hits = _with_session_evidence(hits)
            if asks_when(query):
                hits = _blend(hits, WHEN_WEIGHT, lambda hit: says_when(hit.text))
            if named:
                hits = _favour_periods(hits, named)
            if theirs:
                hits = _blend(hits, PEOPLE_WEIGHT, lambda hit: hit.session in theirs)
        return hits[:limit]

    def close(self) -> None:
        """Stop the keyword threads (searches after this run on the caller's thread)."""
        beside, self._beside = self._beside, None
        if beside is not None:
            beside.shutdown(wait=True)

    def _keywords(self, scope: Scope, kind: str, query: str, pool: int,
                  filters: SearchFilters) -> Callable[[], list[Scored]]:
        """The keyword candidates of ``query``, to be had by calling the result: when
        the store reads on several threads at once they are searched on another while
        this one embeds the query and searches vectors, else when called."""
        search = partial(self.store.keyword_candidates, scope, kind, query, limit=pool,
                         filters=filters)
        beside = self._beside
        return search if beside is None else beside.submit(search).result

    def _hits(self, scope: Scope, kind: str, scored: Sequence[Scored],
              read: Sequence[SearchHit]) -> list[SearchHit]:
        """The hits of ``scored``, in its order; those already ``read`` are not read
        again (a key without a row is left out, as ``Store.hits`` leaves it)."""
        if kind != "event":  # keyed by row, named by id: read in the order given
            return self.store.hits(scope, kind, scored)
        known = {int(hit.id): hit for hit in read}
        fresh = {int(hit.id): hit for hit in self.store.hits(
            scope, kind, [c for c in scored if c[0] not in known])}
        return [hit.rescored(score) for key, score in scored
                if (hit := known.get(key) or fresh.get(key)) is not None]

    def _people(self, scope: Scope, query: str, hits: list[SearchHit]
                ) -> tuple[str, tuple[str, ...]]:
        """The query without the names of the people it names who speak in the scope,
        and the sessions they speak in; or the query and no sessions. Their turns carry
        their names (the keyword index has each turn's speaker), so the ``hits`` of the
        query's keyword candidates usually include theirs; a name spoken in thousands of
        turns may rank below the query's rarer words, so a word written as a name that
        is someone's whole name is looked up too."""
        people = _named_speakers(hits, query)
        written = [word for word in dict.fromkeys(_WORD.findall(query))
                   if word[0].isupper() and word not in people][:MAX_NAME_LOOKUPS]
        people |= self.store.speakers_among(scope, written)
        if not people:
            return query, ()
        counted = self.store.speaker_sessions(scope, sorted(people), MAX_FOCUS_SESSIONS + 1)
        if len(counted) > MAX_FOCUS_SESSIONS and counted[-1][1] >= MAIN_SHARE * counted[0][1]:
            # Main speakers of more sessions than are searched: those of the best hits.
            theirs = list(dict.fromkeys(hit.session for hit in hits if hit.session is not None
                                        and speaker(hit.metadata) in people))
        else:  # the sessions where they speak most (not where a namesake says a word)
            theirs = [session for session, _ in counted]
        names = {word for name in people for word in _WORD.findall(name)}
        # Only the names go: dates and the rest of the question stay as written.
        spoken = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
        topic = spoken.sub(" ", query).strip()
        return (topic or query), tuple(theirs[:MAX_FOCUS_SESSIONS])

    def _fused(self, scope: Scope, kind: str,
               searched: tuple[str, Vectors | None, Callable[[], list[Scored]]], pool: int,
               filters: SearchFilters, named: Sequence[Period], theirs: tuple[str, ...]
               ) -> list[Scored]:
        """The candidates of the query (as ``searched``: the query, its vector and its
        keyword candidates to come), with those of the ``named`` periods and of the
        sessions of the people it names (``theirs``) added, fused."""
        query, vector_query, keyword_search = searched
        vector = self._vectors(scope, kind, vector_query, pool, filters)
        keyword = keyword_search()
        floors: Floors[int] = Floors.of(keyword, vector, pool)
        narrowed = [_narrow(filters, p) for p in named if p.start is not None][:MAX_PERIODS]
        if theirs:
            narrowed.append(replace(filters, sessions=theirs))
        for more in narrowed:
            if more is not None:
                more_keyword = self._keywords(scope, kind, query, pool, more)
                more_vector = self._vectors(scope, kind, vector_query, pool, more)
                found = more_keyword()
                floors.narrow(found, more_vector, pool, own_best=bool(more.sessions))
                keyword = _merge(keyword, found)
                vector = _merge(vector, more_vector)
        if vector_query is not None:  # keyword-only candidates: their true cosines
            have = {key for key, _ in vector}
            vector = _merge(vector, self.store.vector_scores(
                scope, kind, vector_query, [key for key, _ in keyword if key not in have]))
        return fuse(keyword, vector, self.config, floors)

    def _embed(self, query: str) -> Vectors | None:
        if self.indexer is None or not query.strip():
            return None
        self.indexer.catch_up()
        return self.indexer.embed_query(query)

    def _vectors(self, scope: Scope, kind: str, vector_query: Vectors | None, pool: int,
                 filters: SearchFilters) -> list[Scored]:
        if vector_query is None:
            return []
        return self.store.vector_candidates(scope, kind, vector_query, limit=pool,
                                            filters=filters)


def _narrow(filters: SearchFilters, period: Period) -> SearchFilters | None:
    """``filters`` limited to a bounded period, or None if nothing can pass both."""
    assert period.start is not None and period.end is not None
    since = max(filters.since, period.start) if filters.since else period.start
    last = period.end - _TICK  # ``until`` is inclusive
    until = min(filters.until, last) if filters.until else last
    return None if since > until else replace(filters, since=since, until=until)


def _merge(scored: Sequence[Scored], more: Sequence[Scored]) -> list[Scored]:
    """Both lists' candidates, each once (at its best score), best first."""
    best: dict[int, float] = {}
    for key, score in (*scored, *more):
        best[key] = max(score, best.get(key, score))
    return sorted(best.items(), key=lambda c: c[1], reverse=True)


def _with_session_evidence(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """Blend ``SESSION_WEIGHT`` of the best score in each hit's session into it."""
    best: dict[str | None, float] = {}
    for hit in hits:
        best[hit.session] = max(best.get(hit.session, 0.0), hit.score)
    w = SESSION_WEIGHT
    blended = [h.rescored((1 - w) * h.score + w * best[h.session]) for h in hits]
    return sorted(blended, key=lambda h: h.score, reverse=True)


def _named_speakers(hits: Sequence[SearchHit], query: str) -> set[str]:
    """The speakers of ``hits`` whom the query names: one of the name's words is a
    word of the query, as written (names are capitalized: "May" is not "may")."""
    words = set(_WORD.findall(query))
    return {name for name in {speaker(hit.metadata) for hit in hits}
            if name is not None and words & set(_WORD.findall(name))}


def _favour_periods(hits: Sequence[SearchHit], named: Sequence[Period]) -> list[SearchHit]:
    """Blend ``TIME_WEIGHT`` of "lies in a named period" into each score."""
    return _blend(hits, TIME_WEIGHT,
                  lambda hit: any(period.contains(hit.timestamp) for period in named))


def _blend(
    hits: Sequence[SearchHit], weight: float, test: Callable[[SearchHit], bool]
) -> list[SearchHit]:
    """Scores become ``(1 - weight) * score + weight * test(hit)``, best first."""
    blended = [h.rescored((1 - weight) * h.score + weight * test(h)) for h in hits]
    return sorted(blended, key=lambda h: h.score, reverse=True)
