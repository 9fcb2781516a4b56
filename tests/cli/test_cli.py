from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest

from loci.cli.app import cli, main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found += all_commands(command, (*prefix, name))
    return found


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--help"])
    commands = all_commands(cli)
    assert {("add",), ("log",), ("import",), ("export",), ("remember",), ("memories",),
            ("forget",), ("search",), ("state", "set"), ("context",), ("tokens",),
            ("demo",), ("sessions",)} <= set(commands)
    for command in commands:
        code, out, _ = run(capsys, *command, "--help")
        assert code == 0 and "Usage: loci" in out, command
        assert len(out.splitlines()) > 3, command


def test_readme_documents_every_command() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for command in all_commands(cli):
        assert f"loci {' '.join(command)}" in readme, command


def test_add_log_export_import_round_trip(home: Path, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    source.write_text("\n".join([
        '{"type":"message","role":"user","content":"Hello","timestamp":"2024-01-01T00:00:00Z"}',
        '{"type":"tool_call","toolName":"read","toolCallId":"tc_1","args":{"path":"a"},'
        '"timestamp":"2024-01-01T00:00:02Z"}',
        '{"type":"tool_result","toolCallId":"tc_1","result":"body","timestamp":"2024-01-01T00:00:03.5Z"}',
        '{"type":"message","role":"assistant","content":"Hi ☕","timestamp":"2024-01-01T00:00:04Z",'
        '"metadata":{"dia_id":"D1:2"}}',
    ]) + "\n")
    assert run(capsys, "import", str(source), "--session", "s1")[0] == 0
    code, exported, _ = run(capsys, "export", "s1")
    assert code == 0
    original = [json.loads(line) for line in source.read_text().splitlines()]
    original[2]["timestamp"] = "2024-01-01T00:00:03.500Z"
    assert [json.loads(line) for line in exported.splitlines()] == original
    (tmp_path / "again.jsonl").write_text(exported)
    run(capsys, "import", str(tmp_path / "again.jsonl"))
    assert run(capsys, "export", "again")[1] == exported
    assert run(capsys, "add", "s1", "user", "one more")[0] == 0
    code, out, _ = run(capsys, "log", "s1")
    assert "user: Hello" in out and "tool_call:read" in out and "one more" in out
    code, out, _ = run(capsys, "log", "s1", "--json")
    assert len(json.loads(out)) == 5
    assert "s1: 3 messages, 5 events" in run(capsys, "sessions")[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("add", "s", "wizard", "hi"), "Invalid value for 'ROLE'"),
        (("log", "ghost"), "error: no session 'ghost'"),
        (("export", "ghost"), "error: no session 'ghost'"),
        (("context", "ghost", "hi"), "error: no session 'ghost'"),
        (("forget", "mem_nope"), "error: no memory 'mem_nope'"),
        (("state", "get", "nope"), "error: no state key 'nope'"),
        (("import", "/no/such/file.jsonl"), "error: No such file or directory"),
        (("remember", "x", "--type", "Bad Type"), "error: invalid memory type"),
        (("search", "x", "--limit", "0"), "Invalid value for '--limit'"),
        (("memories", "--store", "mysql://x"), "error: unknown store URL"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(home: Path, capsys: pytest.CaptureFixture[str],
                                          args: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_malformed_import_names_the_line_and_stores_nothing(
    home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role":"user","content":"ok"}\n{"role":"user","content":"ok"}\n{oops\n')
    code, _, err = run(capsys, "import", str(bad))
    assert code == 2 and err.startswith("error: line 3: malformed JSON")
    assert len(err.strip().splitlines()) == 1
    assert run(capsys, "sessions")[1].startswith("no sessions yet")


@pytest.mark.parametrize("query", ['"foo AND (', "NEAR(", "*", "'; DROP TABLE events; --"])
def test_fts_syntax_is_searched_as_text(home: Path, capsys: pytest.CaptureFixture[str],
                                        query: str) -> None:
    run(capsys, "add", "s", "user", "foo and the NEAR function; DROP TABLE events")
    run(capsys, "remember", "foo and bar near the start")
    code, out, err = run(capsys, "search", query, "--json")
    assert code == 0, err
    code, out, err = run(capsys, "recall", query, "--json")
    assert code == 0, err
    hits = json.loads(out)
    if query != "*":
        assert hits and hits[0]["text"].startswith("foo and")
    assert run(capsys, "log", "s")[0] == 0


def test_memory_and_state_commands(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "remember", "User's name is John", "--type", "sticky",
                       "--tags", "identity,name", "--json")
    memory = json.loads(out)
    assert code == 0 and memory["tags"] == ["identity", "name"] and memory["expires_at"] is None
    assert "★" in run(capsys, "memories")[1]
    assert run(capsys, "memories", "--type", "user_preference")[1] == ""
    assert "John" in run(capsys, "search", "john")[1]
    assert run(capsys, "memories", "--user", "bob")[1] == ""
    run(capsys, "forget", memory["id"])
    assert run(capsys, "memories")[1] == ""
    code, out, _ = run(capsys, "add", "s", "assistant",
                       "Ok. [MEMORY:fact] The user rides a red kayak. [/MEMORY]", "--json")
    [saved] = json.loads(out)["saved"]  # "<action> <id> [fact]"
    assert "kayak" in run(capsys, "log", "s", "--json")[1]  # the raw reply
    code, out, _ = run(capsys, "forget", saved.split()[1], "--redact-source")
    assert code == 0 and out == f"forgot {saved.split()[1]}; redacted 1 raw reply\n"
    assert "kayak" not in run(capsys, "log", "s", "--json")[1]
    run(capsys, "state", "set", "last_price", "$142.30")
    assert run(capsys, "state", "get", "last_price")[1] == "$142.30\n"
    assert "last_price = $142.30" in run(capsys, "state", "list")[1]


def test_context_formats(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "add", "s", "user", "I live in Lisbon")
    code, out, _ = run(capsys, "context", "s", "Where do I live?", "--format", "openai")
    messages = json.loads(out)
    assert code == 0 and messages[-1]["content"] == "Where do I live?"
    code, out, _ = run(capsys, "context", "s", "hi", "--explain")
    assert "--- explain ---" in out and "history/history" in out
    args = ("context", "s", "--format", "json", "--model", "claude-opus-4-6")
    data = json.loads(run(capsys, *args)[1])
    assert data["window"] == 200_000 and data["layers"]
    data = json.loads(run(capsys, *args, "--window", "9000")[1])
    assert data["window"] == 9000
    # --json, as every data command takes it, is the JSON format here too.
    assert json.loads(run(capsys, "context", "s", "hi", "--json")[1])["layers"]


def test_tokens_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("hello world")
    code, out, _ = run(capsys, "tokens", str(path), "--model", "gpt-4", "--json")
    data = json.loads(out)
    assert code == 0 and data["tokens"] == 2 and data["method"] == "exact:cl100k_base"
    assert data["heuristic_tokens"] == 3


def test_demo_runs(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "demo")
    assert code == 0, err
    for step in ("1. Import", "2. An assistant reply", "3. Recall", "4. The context",
                 "5. Explain", "6. Compaction"):
        assert step in out
    assert "static prefix hash" in out and "[STICKY]" in out
    assert "--keep" in out  # the data is gone, and the way to keep it is shown


def test_demo_never_writes_into_a_user_s_own_data(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``loci demo --store URL`` on a store where the demo's user has data refuses
    (it overwrote their state and wrote into their sessions); another user is fine."""
    store = f"sqlite:///{home / 'mine.db'}"
    run(capsys, "--store", store, "--user", "maya", "state", "set", "plan", "free")
    code, _, err = run(capsys, "demo", "--store", store)
    assert code == 2 and "already holds data of user 'maya'" in err
    assert run(capsys, "--store", store, "--user", "maya", "state", "get", "plan")[1].strip() \
        == "free"
    assert run(capsys, "demo", "--store", store, "--user", "visitor")[0] == 0


def test_demo_keep_leaves_a_store_to_try_commands_on(
        home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "demo", "--keep")
    assert code == 0, err
    kept = Path(out.split("The demo is kept in ")[1].split(". Try it yourself")[0])
    try:
        exports = out.split("export ")[1].splitlines()[0].split()
        for name, value in (pair.split("=", 1) for pair in exports):
            monkeypatch.setenv(name, value)
        listed = run(capsys, "sessions")[1]
        assert "02-debugging" in listed and "01-kickoff" in listed
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_console_entry_point_runs_as_a_process(home: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "loci", "log", "ghost"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error: no session 'ghost'") and "Traceback" not in done.stderr


def test_session_rm_lists_then_erases_and_user_erase(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "add", "s1", "user", "My kayak is red.")
    run(capsys, "add", "s1", "assistant", "Noted. [MEMORY:fact] The kayak is red. [/MEMORY]")
    run(capsys, "add", "s2", "user", "Other things.")
    code, out, err = run(capsys, "session", "rm", "s1")  # no --yes and no answer: aborted
    assert code != 0 and "2 events" in out and "The kayak is red." in out
    assert "Erase all of this?" in err
    assert run(capsys, "log", "s1")[1].count("\n") == 2
    code, out, _ = run(capsys, "session", "rm", "s1", "--yes")
    assert code == 0 and "erased session s1: 2 events, 1 memories and 0 documents" in out
    assert run(capsys, "memories")[1].strip() == ""
    assert run(capsys, "session", "rm", "s1", "--yes")[0] == 2  # no such session
    run(capsys, "add", "s9", "user", "Alice's turn.", "--user", "alice")
    code, out, _ = run(capsys, "user", "erase", "alice", "--yes", "--json")
    assert code == 0 and json.loads(out)["agents"] == ["default"]
    run(capsys, "add", "s9", "user", "Bob's turn.", "--user", "bob")
    run(capsys, "keys", "create", "--user", "bob")
    code, out, _ = run(capsys, "user", "erase", "bob", "--yes")
    # What happened, as it happened: the key is among the rows, the text is purged.
    assert code == 0 and out.startswith("erased user bob: agents default; ")
    assert "(1 of them API keys, now revoked)" in out and "purged" in out
    assert run(capsys, "sessions", "--user", "alice")[1].startswith("no sessions yet")
    assert "s2" in run(capsys, "sessions")[1]  # the default user is untouched
    assert run(capsys, "user", "erase", "nobody", "--yes")[0] == 2


def test_user_export_then_import_after_erasure(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "add", "s1", "user", "My kayak is red.", "--user", "maya")
    run(capsys, "remember", "Maya paddles on Sundays.", "--user", "maya")
    archive = tmp_path / "maya.zip"
    code, out, _ = run(capsys, "user", "export", "maya", "-o", str(archive))
    assert code == 0 and archive.stat().st_size > 0 and "wrote" in out
    assert run(capsys, "user", "import", str(archive))[0] == 2  # maya is still here
    assert run(capsys, "user", "erase", "maya", "--yes")[0] == 0
    code, out, _ = run(capsys, "user", "import", str(archive))
    assert code == 0 and "imported user maya: agents default" in out
    assert "Sundays" in run(capsys, "memories", "--user", "maya")[1]
    assert "kayak" in run(capsys, "log", "s1", "--user", "maya")[1]


def test_purge_needs_a_target_and_retention_spares_fresh_sessions(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "add", "s1", "user", "Fresh.")
    assert run(capsys, "purge")[0] == 2
    code, out, _ = run(capsys, "purge", "--older-than", "1", "--archive")
    assert code == 0 and out.startswith("archived 0 sessions (0 events) untouched since")
    assert run(capsys, "purge", "--older-than", "0")[0] == 2  # must be positive
    assert "Fresh." in run(capsys, "log", "s1")[1]


def test_state_delete_and_tokens_of_a_binary_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "state", "set", "topic", "tides")
    code, out, _ = run(capsys, "state", "delete", "topic")
    assert code == 0 and out.strip() == "deleted topic"
    assert run(capsys, "state", "get", "topic")[0] == 2
    assert run(capsys, "state", "delete", "topic")[0] == 2
    binary = tmp_path / "image.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    code, _, err = run(capsys, "tokens", str(binary))
    assert code == 2 and "is not UTF-8 text" in err and "Traceback" not in err


def test_a_type_that_looks_like_a_typo_and_an_empty_message_are_refused(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "remember", "Maya lives in Lisbon", "--type", "stiky")
    assert code == 2 and "did you mean 'sticky'" in err
    assert run(capsys, "memories")[1] == ""  # nothing stored
    assert run(capsys, "remember", "x", "--type", "stiky", "--new-type")[0] == 0
    assert run(capsys, "remember", "y", "--type", "travel_plan")[0] == 0  # no near type
    code, _, err = run(capsys, "add", "s", "user", "   ")
    assert code == 2 and "needs some text" in err
    assert run(capsys, "add", "s", "assistant", "")[0] == 0  # an empty answer is a fact


def test_status_shows_the_store_and_the_rows_waiting_for_vectors(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "add", "s1", "user", "hello")[0] == 0
    code, out, _ = run(capsys, "status")
    assert code == 0 and f"store: sqlite:///{home}" in out
    assert "vectors: hash-384 (384 dimensions)" in out
    assert "waiting for vectors: 0 events, 0 memories, 0 documents" in out
    code, out, _ = run(capsys, "status", "--json")
    assert json.loads(out)["index"]["unembedded"] == {"event": 0, "memory": 0, "document": 0}
