"""Ingest: how fast writes are acknowledged, and how fast everything is indexed.

Real conversations (the LoCoMo file's turns, each with its speaker) are written into a
fresh store with the bundled local model (or ``--embedder hash``); SQLite, or
``--backend postgres`` (a throwaway embedded server, one database per run below):

- **one per call**: ``loci.add`` for each turn, as an agent records a conversation;
  each call timed (acknowledged: the write committed and returned), then the time until
  the background indexer has embedded everything (``wait_indexed``);
- **waiting per call** (the baseline, in the same run): the same writes, each followed
  by ``wait_indexed()``, which is what a write cost when it embedded inline;
- **bulk**: ``add_events`` with each session's turns in one call;
- **the embedder alone**: the same texts the indexer embeds (each turn with its
  preceding turns, as stored) through ``embedder.embed`` in the indexer's batches, with
  nothing else running: the ceiling for the indexed rate.

With ``--writers 1,2,4``: **parallel writers**, each count of threads adding the same
turns to a fresh store, each thread its own session: the acknowledged turns a second
of all of them together (SQLite takes one writer at a time; PostgreSQL runs them at
once).

On PostgreSQL two more figures say where a write's time goes, in the same run:

- **bare transactions**: what any append of one turn must do there, on the same server
  through psycopg as the store uses it, and nothing else: begin, take the session's
  lock, read the last turns, insert a narrow row, commit. The floor of one per call.
- **one per call without postings**: ``loci.add`` as above with the keyword postings
  trigger disabled (searches would miss these turns): what posting costs a write.

Usage: python benchmarks/ingest.py --data ../shared/data/locomo/locomo_dev.json
                                   [--backend sqlite] [--writers 1,2,4] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg

from common import machine
from loci import Loci, load_settings

sys.path.insert(0, str(Path(__file__).parent))
from locomo import load
from scale import postgres_url

Turn = tuple[str, str, str]  # session, speaker, text


def turns_of(path: Path, limit: int) -> list[Turn]:
    samples, _ = load(path, None)
    out = [(f"{s.sample_id}-{n}", t.speaker, t.text) for s in samples
           for n, turns in s.sessions for t in turns]
    return out[:limit] if limit else out


@contextmanager
def stores(backend: str, tmp: Path) -> Iterator[Callable[[str], str]]:
    """A function that gives each name a fresh store's URL."""
    if backend == "sqlite":
        yield lambda name: f"sqlite:///{tmp / name}.db"
        return
    with postgres_url(None, tmp, "1GB") as server:
        def database(name: str) -> str:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            return urlsplit(server)._replace(path=f"/{name}").geturl()
        yield database


def open_loci(store: str, tmp: Path, embedder: str) -> Loci:
    return Loci(load_settings(store=store, home=tmp, embedding_provider=embedder,
                              memory_mirror=False))


def wait_indexed(loci: Loci) -> None:
    """``Loci.wait_indexed``; a version whose writes embed inline has none to wait for
    (the benchmark runs against earlier commits too)."""
    getattr(loci, "wait_indexed", lambda: True)()


def one_per_call(loci: Loci, turns: list[Turn], wait_each: bool) -> dict[str, Any]:
    calls: list[float] = []
    pending_max = 0
    start = time.perf_counter()
    for i, (session, speaker, text) in enumerate(turns):
        began = time.perf_counter()
        loci.add(session, "user" if i % 2 == 0 else "assistant", text, name=speaker)
        if wait_each:
            wait_indexed(loci)
        calls.append((time.perf_counter() - began) * 1000)
        if i % 250 == 0 and not wait_each:
            pending_max = max(pending_max, loci.store.count_unembedded("event"))
    acknowledged = time.perf_counter() - start
    wait_indexed(loci)
    indexed = time.perf_counter() - start
    return summary(len(turns), calls, acknowledged, indexed,
                   pending_max=pending_max, drain_s=round(indexed - acknowledged, 2))


def bulk(loci: Loci, turns: list[Turn]) -> dict[str, Any]:
    sessions: dict[str, list[dict[str, Any]]] = {}
    for i, (session, speaker, text) in enumerate(turns):
        sessions.setdefault(session, []).append({
            "type": "message", "role": "user" if i % 2 == 0 else "assistant",
            "content": text, "metadata": {"name": speaker}})
    calls: list[float] = []
    start = time.perf_counter()
    for session, events in sessions.items():
        began = time.perf_counter()
        loci.add_events(session, events)
        calls.append((time.perf_counter() - began) * 1000)
    acknowledged = time.perf_counter() - start
    wait_indexed(loci)
    return summary(len(turns), calls, acknowledged, time.perf_counter() - start,
                   calls_made=len(calls))


def embedder_alone(loci: Loci) -> dict[str, Any]:
    """The indexer's own texts for the store's events, embedded in its batches by the
    warm embedder, and (for the bundled model) by bare onnxruntime: the same tokens,
    sorted by length, batches of the embedder's size."""
    from loci.indexing import BATCH

    indexer = loci.indexer
    assert indexer is not None
    embedder = indexer.embedder
    texts = [text for _, _, text in loci.store.unembedded("event", 10**9)]
    embedder.embed(texts[:8])  # the model loads (and its int8 build is made) first
    start = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        embedder.embed(texts[i:i + BATCH])
    seconds = time.perf_counter() - start
    out: dict[str, Any] = {"texts": len(texts), "texts_per_s": round(len(texts) / seconds, 1)}
    tokenizer = getattr(embedder, "tokenizer", None)
    if tokenizer is not None:
        ids = tokenizer.encode_batch(texts)
        tokens = sum(map(len, ids))
        out["mean_tokens"] = round(tokens / len(ids), 1)
        out["tokens_per_s"] = round(tokens / seconds)
        out["bare_onnxruntime_texts_per_s"] = round(len(ids) / bare_onnxruntime(embedder, ids), 1)
    return out


def bare_onnxruntime(embedder: Any, ids: list[list[int]]) -> float:
    """Seconds for the model alone on these token ids: no tokenizing, no pooling."""
    session = embedder._get_session()
    order = sorted(ids, key=len)
    start = time.perf_counter()
    for i in range(0, len(order), embedder.batch_size):
        batch = order[i:i + embedder.batch_size]
        width = max(map(len, batch))
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, tokens in enumerate(batch):
            input_ids[row, :len(tokens)], mask[row, :len(tokens)] = tokens, 1
        session.run(None, {"input_ids": input_ids, "attention_mask": mask,
                           "token_type_ids": np.zeros_like(input_ids)})
    return time.perf_counter() - start


def parallel_writers(loci: Loci, turns: list[Turn], writers: int) -> dict[str, Any]:
    """``writers`` threads, each adding its share of the turns to a session of its own."""
    share = len(turns) // writers

    def write(w: int) -> None:
        for i, (_, speaker, text) in enumerate(turns[w * share:(w + 1) * share]):
            loci.add(f"writer-{w}", "user" if i % 2 == 0 else "assistant", text,
                     name=speaker)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    acknowledged = time.perf_counter() - start
    wait_indexed(loci)
    return {"writers": writers, "turns": share * writers,
            "acknowledged_per_s": round(share * writers / acknowledged, 1),
            "indexed_per_s": round(share * writers / (time.perf_counter() - start), 1)}


def bare_transactions(url: str, turns: list[Turn]) -> dict[str, Any]:
    """One transaction per turn with the statements an append needs, on narrow rows."""
    calls: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE floor (id bigserial PRIMARY KEY, session text, body text)")
        start = time.perf_counter()
        for session, _, text in turns:
            began = time.perf_counter()
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (session,))
                cur.execute("SELECT body FROM floor WHERE session = %s ORDER BY id DESC "
                            "LIMIT 2", (session,))
                cur.fetchall()
                cur.execute("INSERT INTO floor (session, body) VALUES (%s, %s) RETURNING id",
                            (session, text))
                cur.fetchall()
            calls.append((time.perf_counter() - began) * 1000)
        seconds = time.perf_counter() - start
    return summary(len(turns), calls, seconds, seconds)


def without_postings(loci: Loci, url: str, turns: list[Turn]) -> dict[str, Any]:
    """One per call on a store whose postings trigger is off (a counterfactual)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_terms_insert")
    return one_per_call(loci, turns, False)


def summary(count: int, calls: list[float], acknowledged: float, indexed: float,
            **extra: Any) -> dict[str, Any]:
    ordered = sorted(calls)
    return {
        "turns": count,
        "acknowledged_per_s": round(count / acknowledged, 1),
        "call_p50_ms": round(ordered[len(ordered) // 2], 3),
        "call_p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "indexed_per_s": round(count / indexed, 1),
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo_dev.json"))
    parser.add_argument("--limit", type=int, default=0, help="at most this many turns")
    parser.add_argument("--embedder", default="local", choices=("local", "hash"))
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"))
    parser.add_argument("--writers", default="",
                        help="thread counts for the parallel writers (e.g. 1,2,4)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    turns = turns_of(args.data, args.limit)
    report: dict[str, Any] = {"machine": machine(), "embedder": args.embedder,
                              "backend": args.backend}
    with tempfile.TemporaryDirectory(prefix="loci-ingest-") as tmp, \
            stores(args.backend, Path(tmp)) as store:
        # The texts first, from a store that does not embed, for the embedder alone.
        texts = store("texts")
        with open_loci(texts, Path(tmp), "none") as plain:
            bulk(plain, turns)
        with open_loci(texts, Path(tmp), args.embedder) as loci:
            report["embedder_alone"] = embedder_alone(loci)
        for name, run in (("one_per_call", lambda lo: one_per_call(lo, turns, False)),
                          ("waiting_per_call", lambda lo: one_per_call(lo, turns, True)),
                          ("bulk", lambda lo: bulk(lo, turns))):
            with open_loci(store(name), Path(tmp), args.embedder) as loci:
                report[name] = run(loci)
        for writers in (int(w) for w in args.writers.split(",") if w):
            with open_loci(store(f"writers{writers}"), Path(tmp), args.embedder) as loci:
                report.setdefault("parallel_writers", []).append(
                    parallel_writers(loci, turns, writers))
        if args.backend == "postgres":
            report["bare_transactions"] = bare_transactions(store("floor"), turns)
            url = store("unposted")
            with open_loci(url, Path(tmp), args.embedder) as loci:
                report["one_per_call_without_postings"] = without_postings(loci, url, turns)
    alone = report["embedder_alone"]["texts_per_s"]
    report["indexed_share_of_embedder"] = {
        name: round(report[name]["indexed_per_s"] / alone, 3)
        for name in ("one_per_call", "bulk")}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
