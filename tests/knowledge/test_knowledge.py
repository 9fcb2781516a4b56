"""The knowledge base through ``Loci``: versions, tree, search filters, the agent's tools,
tenant isolation and /profile/ in compiled context."""

from __future__ import annotations

from datetime import timedelta

import pytest

from loci import Loci, NotFoundError, ValidationError
from loci.knowledge.tree import render_tree
from tests.conftest import FakeClock


def test_put_versions_and_get_latest(loci: Loci, clock: FakeClock) -> None:
    kb = loci.knowledge
    first = kb.put("/projects/loci/db.md", "We use SQLite.", tags=["decision"],
                   metadata={"title": "Database"})
    assert (first.status, first.document.version) == ("created", 1)
    clock.advance(minutes=5)
    second = kb.put("/projects/loci/db.md", "We use SQLite first, Postgres later.")
    assert (second.status, second.document.version) == ("updated", 2)
    # None tags and metadata keep the stored ones; the same text again is a no-op.
    assert second.document.tags == ("decision",)
    assert second.document.metadata == {"title": "Database"}
    assert kb.put("/projects/loci/db.md", "We use SQLite first, Postgres later.").status == (
        "unchanged")
    latest = kb.get("/projects/loci/db.md")
    assert latest.content == "We use SQLite first, Postgres later." and latest.version == 2
    assert latest.created_at < latest.updated_at == clock.now
    assert kb.get("/projects/loci/db.md", version=1).content == "We use SQLite."
    assert [v.content for v in kb.history("/projects/loci/db.md")] == ["We use SQLite."]
    with pytest.raises(NotFoundError, match="versions: 1, 2"):
        kb.get("/projects/loci/db.md", version=7)
    assert kb.put("/projects/loci/db.md", "Tags cleared.", tags=[]).document.tags == ()


def test_bad_content_stores_nothing(loci: Loci) -> None:
    kb = loci.knowledge
    for content in ("", "   \n", None):
        with pytest.raises(ValidationError):
            kb.put("/a.md", content)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="longer than"):
        kb.put("/big.md", "x" * 2_000_001)
    assert kb.ls() == []
    with pytest.raises(NotFoundError):
        kb.rm("/a.md")


def test_ls_tree_and_rm(loci: Loci) -> None:
    kb = loci.knowledge
    for path in ("/profile/identity.md", "/profile/people/rui.md", "/reference/a.md",
                 "/reference/deep/b.md"):
        kb.put(path, f"text of {path}", tags=["t"] if "deep" in path else None)
    assert [d.path for d in kb.ls("/profile")] == ["/profile/identity.md",
                                                   "/profile/people/rui.md"]
    lines = render_tree(kb.tree("/reference/"))
    assert lines[0] == "/reference/ (2 documents)"
    assert lines[1] == "├── deep/" and lines[2].startswith("│   └── b.md  v1,")
    assert lines[2].endswith("[t]") and lines[3].startswith("└── a.md  v1,")
    kb.rm("/reference/a.md")
    assert [d.path for d in kb.ls("/reference/")] == ["/reference/deep/b.md"]
    with pytest.raises(NotFoundError):
        kb.get("/reference/a.md")


def _corpus(loci: Loci) -> None:
    kb = loci.knowledge
    kb.put("/projects/loci/decisions/db.md", "# Database\n\nWe chose PostgreSQL with "
           "pgvector and ltree for the team backend.", tags=["decision", "db"])
    kb.put("/projects/other/db.md", "PostgreSQL replication notes for the other project.",
           tags=["db"])
    kb.put("/reference/postgres.md", "PostgreSQL manual excerpts: vacuum, indexes.",
           tags=["manual"])
    kb.put("/reference/tides.md", "Tide tables for San Francisco station 9414290.")


def test_search_filters_by_folder_and_tags(loci: Loci) -> None:
    _corpus(loci)
    kb = loci.knowledge
    everywhere = {h.id for h in kb.search("PostgreSQL", limit=10)}
    assert everywhere >= {"/projects/loci/decisions/db.md", "/projects/other/db.md",
                          "/reference/postgres.md"}
    assert {h.id for h in kb.search("PostgreSQL", path_prefix="/projects/", limit=10)} == {
        "/projects/loci/decisions/db.md", "/projects/other/db.md"}
    assert {h.id for h in kb.search("PostgreSQL", path_prefix="/projects/loci",
                                    limit=10)} == {"/projects/loci/decisions/db.md"}
    assert {h.id for h in kb.search("PostgreSQL", tags=["db"], limit=10)} == {
        "/projects/loci/decisions/db.md", "/projects/other/db.md"}
    assert [h.id for h in kb.search("PostgreSQL", tags=["db", "decision"], limit=10)] == [
        "/projects/loci/decisions/db.md"]
    assert kb.search("PostgreSQL", path_prefix="/reference/", tags=["db"]) == []
    hits = kb.search("tide station")
    assert hits[0].id == "/reference/tides.md" and 0 < hits[0].score <= 1
    with pytest.raises(ValidationError):
        kb.search("x", limit=0)


def test_tag_filter_reaches_past_the_first_pool(loci: Loci) -> None:
    kb = loci.knowledge
    for i in range(60):
        kb.put(f"/notes/n{i:02}.md", "kestrel kestrel kestrel sighting report number "
               f"{i}")
    for i in range(2):
        kb.put(f"/notes/rare{i}.md", "A long field journal. " * 40 + "One kestrel seen.",
               tags=["rare"])
    hits = kb.search("kestrel", tags=["rare"], limit=2)
    assert sorted(h.id for h in hits) == ["/notes/rare0.md", "/notes/rare1.md"]


def test_search_knowledge_and_read_document_tools(loci: Loci) -> None:
    _corpus(loci)
    long_text = "\n\n".join(f"Paragraph {i} about gardening and soil." for i in range(80))
    long_text += "\n\nThe harbour pilot boards ships at the breakwater."
    loci.knowledge.put("/reference/long.md", long_text, metadata={"title": "Field notes"})
    results = loci.search_knowledge("harbour pilot breakwater", top_k=3)
    top = results[0]
    assert top.path == "/reference/long.md" and top.title == "Field notes"
    # The summary is the passage that matched, not the document's opening.
    assert top.summary.startswith("The harbour pilot boards ships")
    assert 0 < top.relevance <= 1 and top.version == 1
    filtered = loci.search_knowledge("PostgreSQL", path_filter="/projects/", tags=["decision"])
    assert [(r.path, r.title) for r in filtered] == [
        ("/projects/loci/decisions/db.md", "Database")]
    page = loci.read_document("/reference/long.md", offset=0, limit=1000)
    assert page.total_chars == len(long_text) and page.content == long_text[:1000]
    assert page.next_offset == 1000
    rest = loci.read_document("/reference/long.md", offset=page.next_offset or 0,
                              limit=100_000)
    assert page.content + rest.content == long_text and rest.next_offset is None
    with pytest.raises(ValidationError):
        loci.read_document("/reference/long.md", limit=0)
    with pytest.raises(NotFoundError):
        loci.read_document("/reference/missing.md")


def test_tenants_never_see_each_others_documents(loci: Loci) -> None:
    _corpus(loci)
    loci.knowledge.put("/profile/identity.md", "Alice, an astronomer.")
    loci.knowledge.put("/profile/identity.md", "Alice, a radio astronomer.")
    bob = loci.for_scope(user="bob")
    other_agent = loci.for_scope(agent="coder")
    for other in (bob, other_agent):
        assert other.knowledge.ls() == []
        assert other.search_knowledge("PostgreSQL") == []
        assert other.knowledge.search("astronomer") == []
        with pytest.raises(NotFoundError):
            other.knowledge.get("/profile/identity.md")
        with pytest.raises(NotFoundError):
            other.knowledge.history("/profile/identity.md")
        with pytest.raises(NotFoundError):
            other.knowledge.rm("/profile/identity.md")
        assert "astronomer" not in other.compile(None, "hi").dynamic
    bob.knowledge.put("/profile/identity.md", "Bob, a baker.")
    assert bob.knowledge.get("/profile/identity.md").version == 1
    assert loci.knowledge.get("/profile/identity.md").content == "Alice, a radio astronomer."
    assert loci.knowledge.get("/profile/identity.md").version == 2


def test_profile_documents_are_in_context_under_their_budget(loci: Loci) -> None:
    kb = loci.knowledge
    kb.put("/profile/identity.md", "# About me\n\nMaya, backend engineer in Lisbon.")
    kb.put("/profile/preferences.md", "- Prefers concise answers.\n- Metric units.")
    kb.put("/profile/goals.md", "Ship v1. " + "Grow the user base steadily. " * 600)
    kb.put("/profile/people/sarah-chen.md", "# Sarah Chen\n\n- Relationship: cofounder")
    kb.put("/reference/tides.md", "Tide tables for San Francisco.")
    compiled = loci.compile(None, "hello")
    report = next(layer for layer in compiled.layers if layer.name == "profile")
    assert 0 < report.used <= report.budget
    # Entries are offered newest first, a document after the other; one that is too long
    # alone (a paragraph, not a list) is what is left out.
    assert report.included == ["/profile/identity.md#0", "/profile/preferences.md#1",
                               "/profile/people/sarah-chen.md", "/profile/preferences.md#0"]
    assert [item for item, _ in report.dropped] == ["/profile/goals.md#0"]
    dynamic = compiled.dynamic
    assert "## Identity\nMaya, backend engineer in Lisbon." in dynamic
    assert "# About me" not in dynamic  # the layer writes its own heading
    assert "- Prefers concise answers." in dynamic
    assert "- Sarah Chen: Relationship: cofounder" in dynamic
    assert "Grow the user base" not in dynamic and "Tide tables" not in dynamic
    assert "/profile/goals.md" in compiled.explain()


def test_a_document_is_restored_as_it_was(loci: Loci, clock: FakeClock) -> None:
    loci.knowledge.put("/plans/q1.md", "Ship the tide API.")
    clock.advance(hours=1)
    before = clock()
    clock.advance(hours=1)
    loci.knowledge.put("/plans/q1.md", "Ship nothing.")
    assert loci.knowledge.as_of("/plans/q1.md", before).content == "Ship the tide API."  # type: ignore[union-attr]
    restored = loci.knowledge.restore("/plans/q1.md", before)
    assert restored.document.version == 3 and restored.document.content == "Ship the tide API."
    assert [v.content for v in loci.knowledge.history("/plans/q1.md")] == [
        "Ship the tide API.", "Ship nothing."]
    with pytest.raises(NotFoundError, match="did not exist"):
        loci.knowledge.restore("/plans/q1.md", before - timedelta(days=1))
