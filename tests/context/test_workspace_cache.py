"""Workspace files are read once per version; token counts are remembered per text."""

from __future__ import annotations

import os
from pathlib import Path

from loci.context.compiler import memo_counter
from loci.context.workspace import Workspace
from loci.tokens import token_counter


def test_an_edited_file_is_read_again_even_at_the_same_size(tmp_path: Path) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_text("You are Ada.")
    workspace = Workspace([tmp_path])
    first = workspace.find("SOUL.md")
    assert first is not None and first.text == "You are Ada."
    assert workspace.find("SOUL.md") == first
    soul.write_text("You are Bob.")  # same size
    stamp = soul.stat().st_mtime_ns + 2_000_000_000
    os.utime(soul, ns=(stamp, stamp))
    second = workspace.find("SOUL.md")
    assert second is not None and second.text == "You are Bob."
    soul.write_text("You are Carol, <!-- a note --> a poet.")
    third = workspace.find("SOUL.md")
    assert third is not None and third.text == "You are Carol,  a poet."
    soul.unlink()
    assert workspace.find("SOUL.md") is None


def test_remembered_counts_equal_fresh_counts() -> None:
    exact = token_counter("gpt-4o")
    memo = memo_counter(exact)
    assert memo is memo_counter(exact) and memo.method == exact.method
    for text in ["", "hello world", "hello world", "naïve café 東京 " * 50]:
        assert memo.count(text) == exact.count(text)
        assert memo.count_message("user", text) == exact.count_message("user", text)
