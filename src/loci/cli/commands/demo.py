"""``loci demo``: a guided tour on a small multi-session conversation shipped with Loci."""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path

import click

from loci.cli.app import cli, one_line
from loci.engine import Loci

QUESTION = "Why did station 9414290 fail, and what did we decide to do about it?"
#: Facts an agent would have saved with memory tags during these sessions.
DEMO_FACTS = (
    ("sticky", "The user is Maya, a backend engineer in Lisbon.", ("identity",)),
    ("user_preference", "Maya wants short answers, in bullet points.", ("style",)),
    ("project_context", "Tidepool: tide-prediction API, FastAPI + PostgreSQL, NOAA data.",
     ("tidepool",)),
    ("project_context", "Tidepool launches on December 1st; Rui builds the mobile app.",
     ("tidepool", "launch")),
)


def _step(title: str) -> None:
    click.echo()
    click.secho(f"== {title}", bold=True)


@cli.command()
@click.option("--store", metavar="URL", help="Store to load into (default: a temporary one).")
@click.option("--user", default="maya", show_default=True)
def demo(store: str | None, user: str) -> None:
    """Load an example conversation and show what Loci stores and compiles."""
    with tempfile.TemporaryDirectory(prefix="loci-demo-") as tmp:
        url = store or f"sqlite:///{Path(tmp) / 'demo.db'}"
        with Loci.open(store=url, user=user, home=tmp) as loci:
            _tour(loci, url)


def _tour(loci: Loci, url: str) -> None:
    click.echo(f"Loci demo: store {url}, user {loci.scope.tenant}")
    _step("1. Import three sessions (JSONL, one event per line)")
    demo_files = resources.files("loci") / "data" / "demo"
    for item in sorted(demo_files.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".jsonl"):
            session = item.name.removesuffix(".jsonl")
            events = loci.import_jsonl(item.read_text(encoding="utf-8").splitlines(), session)
            info = loci.session(session)
            click.echo(f"  {session}: {len(events)} events, {info.message_count} messages, "
                       f"{info.token_count} tokens")

    _step("2. Memories and state the agent saved")
    for memory_type, text, tags in DEMO_FACTS:
        memory = loci.remember(text, type=memory_type, tags=tags)
        expires = f"{memory.expires_at:%Y-%m-%d}" if memory.expires_at else "never"
        click.echo(f"  {memory.id} [{memory.type}, expires {expires}] {text}")
    loci.state_set("free_tier_requests_per_day", "1000")
    loci.state_set("launch_date", "2026-12-01")
    for pair in loci.state():
        click.echo(f"  state {pair.key} = {pair.value}")

    _step(f"3. Recall (hybrid search of the conversations): {QUESTION!r}")
    for hit in loci.search_conversation(QUESTION, limit=4):
        click.echo(f"  {hit.score:.2f} {hit.session:13} #{hit.id:<3} {one_line(hit.text, 70)}")
    _step("   Memory search (summaries first, read if needed): 'what stack does Tidepool use'")
    for result in loci.memory_search("what stack does Tidepool use", limit=2):
        click.echo(f"  {result.relevance:.2f} {result.id} [{result.type}] {result.summary}")

    _step("4. The context compiled for the next call in 03-launch")
    compiled = loci.compile("03-launch", QUESTION)
    click.echo(_indent(compiled.to_text()))

    _step("5. Explain: every layer, its tokens against its budget, what was kept or dropped")
    click.echo(_indent(compiled.explain()))
    click.echo("\nTry it yourself: loci --help, loci context SESSION MESSAGE --explain")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
