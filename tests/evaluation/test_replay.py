"""``loci eval`` replays a stored session the way the agent-sessions benchmark does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loci import Loci
from loci.apis.anthropic import chat_messages as from_anthropic
from loci.cli.app import main
from loci.evaluation import evaluate, replay
from loci.evaluation.replay import task_at
from tests.importers.conftest import CHAT_LIST, MESSAGES_LIST, load

SESSION = "anthropic/cc-3af9b1a7"


def test_eval_of_an_imported_session_is_the_benchmark_s_replay(loci: Loci,
                                                               tmp_path: Path) -> None:
    """The session as the benchmark reads the dev file (the Messages list as chat
    messages), and as `loci import` stored it: the same report, figure for figure."""
    listed = load(MESSAGES_LIST)["messages"]
    direct = [m for message in listed for m in from_anthropic(message)]
    expected = replay([(SESSION, direct)], 16_000, tmp_path, (0.5, 1.0))
    loci.import_log("anthropic", str(MESSAGES_LIST))
    [report] = evaluate(loci, SESSION, [16_000], (0.5, 1.0))
    assert expected.pop("compile_p50_ms") >= 0 and report.pop("compile_p50_ms") >= 0
    assert report == expected
    assert report["contexts"] > 100  # a compile before each of its model calls
    for cut in (0.5, 1.0):  # every artifact is in the whole transcript, by definition
        assert report[f"{cut}|all|whole"] == 1.0
        assert 0 < report[f"{cut}|all|loci"] <= 1 and report[f"{cut}|tokens_mean"] < 16_000
    assert report["1.0|reduction"] > 0


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_eval_command(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "import", "--format", "openai", str(CHAT_LIST), "--session", "s")[0] == 0
    before = run(capsys, "log", "s")[1]
    code, out, _ = run(capsys, "eval", "s", "--window", "16000", "--at", "0.5,1", "--json")
    [report] = json.loads(out)
    assert code == 0 and report["window"] == 16_000 and report["cuts"] == [0.5, 1.0]
    assert report["1.0|all|whole"] == 1.0 and report["1.0|task"] in (0.0, 1.0)
    code, out, _ = run(capsys, "eval", "s", "--window", "16000", "--at", "1")
    assert code == 0 and out.startswith("== window 16,000: ")
    assert "missed artifacts found in search_conversation's top 10" in out
    assert run(capsys, "log", "s")[1] == before  # only read


@pytest.mark.parametrize("args, message", [
    (("s", "--at", "2"), "fractions in (0, 1]"),
    (("s", "--window", "lots"), "comma-separated numbers"),
    (("nowhere",), "no session 'nowhere'"),
])
def test_bad_eval_arguments(home: Path, capsys: pytest.CaptureFixture[str],
                            args: tuple[str, ...], message: str) -> None:
    run(capsys, "add", "s", "user", "hi")
    code, _, err = run(capsys, "eval", *args)
    assert code == 2 and message in err


def test_the_task_at_a_point_is_the_request_the_agent_works_on() -> None:
    """A session of several requests (as a Claude Code session is): at each point the
    task is the newest user message before it, the first one before any came."""
    messages = [
        {"role": "user", "content": "sync your repo"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "done"},
        {"role": "user", "content": [{"type": "text", "text": "now summarize the sessions"}]},
        {"role": "assistant", "content": "Here they are."},
    ]
    assert [task_at(messages, i) for i in range(len(messages) + 1)] == [
        "sync your repo"] * 4 + ["now summarize the sessions"] * 2
