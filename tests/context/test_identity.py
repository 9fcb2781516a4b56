"""The built-in identity names an agent only when it has a name of its own."""

from __future__ import annotations

from loci import Loci


def test_the_unnamed_agent_is_not_called_default(loci: Loci) -> None:
    text = loci.compile(None, "hi").to_text()
    assert "You are a helpful assistant with a long-term memory." in text
    assert "You are default" not in text and "default," not in text


def test_a_named_agent_is_called_by_its_name(loci: Loci) -> None:
    text = loci.for_scope(agent="iris").compile(None, "hi").to_text()
    assert "You are iris, a helpful assistant with a long-term memory." in text
