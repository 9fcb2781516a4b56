"""`loci memory consolidate`: a diff to read, nothing applied without --apply, a bad
id is exit code 2, and the applied changes are in each memory's history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loci.cli.app import main

QUESTION = "User: Can you suggest some unique events to attend in Amsterdam?"
FACT = "I lead a team of 4 engineers in my new role as Senior Software Engineer."


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_consolidate_proposes_then_applies_by_id(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in (QUESTION, FACT):
        assert run(capsys, "remember", text, "-q")[0] == 0
    code, out, _ = run(capsys, "memory", "consolidate")
    assert code == 0
    assert "RETIRE (a question)" in out and QUESTION in out and FACT not in out
    assert "nothing applied; to apply: loci memory consolidate --apply prop_" in out
    proposal = out.rsplit("--apply ", 1)[1].strip()
    assert QUESTION in run(capsys, "memories")[1]  # still there: nothing applied
    code, out, err = run(capsys, "memory", "consolidate", "--apply", "prop_wrong")
    assert code == 2 and "no pending proposal 'prop_wrong'" in err
    code, out, _ = run(capsys, "memory", "consolidate", "--apply", proposal, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["id"] == proposal and shown["applied"]["retire"] == 1
    listed = run(capsys, "memories")[1]
    assert QUESTION not in listed and FACT in listed
    retired = shown["changes"][0]["ids"][0]
    assert f"consolidation {proposal}: a question" in run(
        capsys, "memory", "history", retired)[1]


def test_apply_without_an_id_proposes_shows_and_applies(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "remember", QUESTION, "-q")
    code, out, _ = run(capsys, "memory", "consolidate", "--apply")
    assert code == 0 and "RETIRE (a question)" in out and "applied: 1 retire" in out
    assert QUESTION not in run(capsys, "memories")[1]


def test_search_past_shows_a_superseded_fact(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "remember", "The user lives in Lisbon", "--type", "sticky")
    run(capsys, "remember", "The user lives in Porto now", "--type", "sticky")
    first, second = run(capsys, "search", "where does the user live")[1].splitlines()
    assert "Porto" in first and "Lisbon" in second and "(superseded " in second
    current = run(capsys, "search", "where does the user live", "--current")[1]
    assert "Porto" in current and "Lisbon" not in current
    past = run(capsys, "search", "where does the user live", "--past")[1]
    assert "(superseded " in past and "Lisbon" in past
    listed = run(capsys, "memories", "--all")[1]
    assert ", superseded by mem_" in listed
