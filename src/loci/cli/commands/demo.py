"""``loci demo``: a guided tour on a small multi-session conversation shipped with Loci."""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path

import click

from loci import Loci, ValidationError
from loci.cli.app import cli, global_option, one_line

QUESTION = "Why did station 9414290 fail, and what did we decide to do about it?"
#: A reply as an agent would write it, saving facts with memory tags.
TAGGED_REPLY = (
    "Welcome back, Maya!\n"
    "[MEMORY:sticky] The user is Maya, a backend engineer in Lisbon. [/MEMORY]\n"
    "[MEMORY:user_preference] Maya wants short answers, in bullet points. [/MEMORY]\n"
    "[MEMORY:project_context] Tidepool launches on December 1st; Rui builds the mobile "
    "app. [/MEMORY]\n"
    "[STATE:free_tier_requests_per_day] 1000 [/STATE]"
)
SOUL = ("# Soul\nYou are Tide, a backend engineering assistant. You answer briefly, show "
        "code rather than prose, and say when you are unsure.\n")
SKILL = ("---\nslug: api-errors\nname: Debugging API errors\ntriggers:\n"
         "  keywords: [error, fail, 500, 503]\n  patterns: [\"station \\\\d+\"]\n---\n"
         "1. Read the log line of the failing request.\n2. Check the upstream payload.\n"
         "3. Prefer 503 + Retry-After when upstream data is missing.\n")


def _step(title: str) -> None:
    click.echo()
    click.secho(f"== {title}", bold=True)


@cli.command()
@click.option("--store", metavar="URL", help="Store to load into (default: a temporary one); "
              "refused if the demo's user has data there.")
@click.option("--user", help="The user to load it for (default: maya).")
@click.option("--keep", is_flag=True,
              help="Keep the demo's home (store and workspace) to try commands on it.")
def demo(store: str | None, user: str | None, keep: bool) -> None:
    """Load an example conversation and show what Loci stores and compiles."""
    user, store = global_option("user", user) or "maya", global_option("store", store)
    tmp = tempfile.mkdtemp(prefix="loci-demo-")
    try:
        url = store or f"sqlite:///{Path(tmp) / 'demo.db'}"
        workspace = Path(tmp) / "workspace"
        (workspace / "skills").mkdir(parents=True)
        (workspace / "SOUL.md").write_text(SOUL, encoding="utf-8")
        (workspace / "skills" / "api-errors.md").write_text(SKILL, encoding="utf-8")
        with Loci.open(store=url, user=user, home=tmp, workspace=str(workspace)) as loci:
            if any(scope.tenant == user for scope in loci.store.list_scopes()):
                # The demo writes into that user's sessions and state: never a real one's.
                raise ValidationError(f"{url} already holds data of user {user!r}: run "
                                      "the demo as another user (--user) or in its own "
                                      "store (no --store)")
            _tour(loci, url)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    click.echo(_farewell(tmp, url, user, kept_store=store is not None, keep=keep))


def _farewell(tmp: str, url: str, user: str, *, kept_store: bool, keep: bool) -> str:
    """What is left of the demo, as it really is."""
    if keep:
        return (f"\nThe demo is kept in {tmp}. Try it yourself:\n"
                f"  export LOCI_HOME={tmp} LOCI_STORE={url} LOCI_USER={user}\n"
                "  loci sessions; loci context 02-debugging 'What broke?' --explain")
    if kept_store:
        return (f"\nThe demo's sessions, memories and state stay in {url} (user {user}); "
                "its workspace and memory files were temporary and are removed. "
                f"`loci user erase {user} --store {url}` erases them.")
    return ("\nThe demo's temporary store and workspace are removed. Run `loci demo "
            "--keep` to try commands on them, or start your own: loci --help")


def _tour(loci: Loci, url: str) -> None:
    click.echo(f"Loci demo: store {url}, user {loci.scope.tenant}")
    _step("1. Import three sessions (JSONL, one event per line)")
    demo_files = resources.files("loci") / "data" / "demo"
    for item in sorted(demo_files.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".jsonl"):
            session = item.name.removesuffix(".jsonl")
            events = loci.import_jsonl(item.read_text(encoding="utf-8"), session)
            info = loci.session(session)
            click.echo(f"  {session}: {len(events)} events, {info.message_count} messages, "
                       f"{info.token_count} tokens")

    _step("2. An assistant reply with memory tags: saved, and stripped from what Maya sees")
    event, result = loci.add_reply("03-launch", TAGGED_REPLY)
    click.echo(f"  shown to the user: {event.content!r}")
    for saved in result.saved:
        expires = f"{saved.memory.expires_at:%Y-%m-%d}" if saved.memory.expires_at else "never"
        click.echo(f"  {saved.action} {saved.memory.id} [{saved.memory.type}, expires "
                   f"{expires}] {saved.memory.content}")
    for pair in result.state:
        click.echo(f"  state {pair.key} = {pair.value}")
    extracted = loci.extract_memories(loci.events("01-kickoff"))
    click.echo(f"  + {len(extracted)} facts extracted offline from 01-kickoff, e.g. "
               f"{extracted[0].memory.content!r}" if extracted else "")

    _step(f"3. Recall (hybrid search of the conversations): {QUESTION!r}")
    for hit in loci.search_conversation(QUESTION, limit=4):
        click.echo(f"  {hit.score:.2f} {hit.session:13} #{hit.id:<3} {one_line(hit.text, 70)}")
    _step("   Memory search (summaries first, read if needed): 'what stack does Tidepool use'")
    for found in loci.memory_search("what stack does Tidepool use", limit=2):
        click.echo(f"  {found.relevance:.2f} {found.id} [{found.type}] {found.summary}")

    _step("4. The context compiled for the next call in 02-debugging")
    compiled = loci.compile("02-debugging", QUESTION)
    click.echo(_indent(compiled.to_text()))

    _step("5. Explain: every layer, its tokens against its budget, what was kept or dropped")
    click.echo(_indent(compiled.explain()))

    _step("6. Compaction (dry run): what would be masked, summarized and archived")
    dry = loci.compact("02-debugging", dry_run=True, strategy="mask")
    click.echo(f"  {dry.masked} tool output(s) would be masked; nothing is ever deleted")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
