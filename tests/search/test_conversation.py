"""What conversation search indexes for an event: metadata convention and context."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from loci.search import conversation as conv


def test_speaker_and_captions_follow_the_metadata_convention() -> None:
    meta = {"name": "  Ana  Lee ", "caption": ["a photo of a cat", ""],
            "attachments": ["diagram.png", {"alt": "a red bike", "size": 3}, 7]}
    assert conv.speaker(meta) == "Ana Lee"
    assert conv.captions(meta) == ["a photo of a cat", "diagram.png", "a red bike"]
    assert conv.extra_text(meta) == "Ana Lee a photo of a cat diagram.png a red bike"
    assert conv.line("look!", meta) == (
        "Ana Lee: look! (shared: a photo of a cat; diagram.png; a red bike)")


def test_events_without_the_convention_are_their_content() -> None:
    for meta in (None, {}, {"name": 3, "caption": {"x": 1}}, ["not", "a", "mapping"]):
        assert conv.extra_text(meta) is None  # type: ignore[arg-type]
        assert conv.line("hello", meta) == "hello"  # type: ignore[arg-type]
        assert conv.embedding_text("hello", meta, None) == "hello"  # type: ignore[arg-type]


def _event(content: str, metadata: dict[str, Any] | None = None, tool_name: str | None = None,
           args: dict[str, Any] | None = None) -> SimpleNamespace:
    return SimpleNamespace(content=content, metadata=metadata or {}, tool_name=tool_name,
                           args=args)


def test_context_is_the_preceding_turns_oldest_first() -> None:
    previous = [("one", {"name": "A"}), ("two", {"name": "B"}), ("three", {"name": "A"})]
    batch = [_event("four", {"name": "B"}), _event("five", {"name": "A", "caption": "a dog"})]
    columns = conv.index_columns(batch, previous)  # type: ignore[arg-type]
    assert columns == [("B", "B: two / A: three"),
                       ("A a dog", "A: three / B: four")]
    assert conv.index_columns([_event("first")], []) == [(None, None)]  # type: ignore[list-item]


def test_a_tool_calls_arguments_are_indexed() -> None:
    call = _event("", tool_name="bash",
                  args={"command": "grep -n PersonName pydicom/valuerep.py",
                        "options": [{"cwd": "/testbed"}, 3]})
    [(extra, _)] = conv.index_columns([call], [])  # type: ignore[list-item]
    assert extra == ("bash grep -n PersonName pydicom/valuerep.py /testbed "
                     "pydicom valuerep py")  # a path also as its parts
    huge = _event("", tool_name="write", args={"text": "x" * 10_000})
    [(extra, _)] = conv.index_columns([huge], [])  # type: ignore[list-item]
    assert extra is not None and len(extra) == conv.TOOL_CHARS


def test_context_lines_are_capped() -> None:
    long = "x" * (conv.CONTEXT_CHARS * 3)
    context = conv.context_text([(long, None)])
    assert context is not None and len(context) == conv.CONTEXT_CHARS


def test_embedding_text_puts_the_event_before_its_context() -> None:
    text = conv.embedding_text("Contemporary, for sure.", {"name": "Gina"},
                               "Jon: Got any favourite dance styles?")
    assert text == ("Gina: Contemporary, for sure.\n"
                    "(context: Jon: Got any favourite dance styles?)")


def test_hostile_arguments_are_indexed_within_bounds() -> None:
    deep: dict[str, Any] = {"k": "needle"}
    for _ in range(2_000):
        deep = {"k": deep}
    assert conv.tool_text("t", deep) == "t needle"
    wide = {"many": [""] * 200_000 + ["late"], "first": "early"}
    text = conv.tool_text("t", wide)
    assert text is not None and len(text) <= conv.TOOL_CHARS and "late" not in text
