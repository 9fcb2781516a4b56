"""An agent's trail: files, edits, errors and commands read from tool calls and results."""

from __future__ import annotations

from loci.text.trail import (
    COMMANDS,
    EDITS,
    ERRORS,
    FILES,
    PLAN,
    Trail,
    command_paths,
    edited_paths,
)
from loci.tokens import heuristic_count

TRACEBACK = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "x.py", line 3, in <module>
IsADirectoryError: [Errno 21] Is a directory: 'src/project'

The above exception was the direct cause of the following exception:

astroid.exceptions.AstroidBuildingError: Unable to load file src/project
</output>"""


def test_files_and_edits_come_from_shell_commands() -> None:
    assert command_paths("cd /testbed && grep -n 'iter' pydicom/valuerep.py | head") == [
        "pydicom/valuerep.py"]
    assert command_paths("python -m pytest tests/test_api.py::test_x -q") == [
        "tests/test_api.py"]
    assert command_paths("grep -rn foo src/ | head") == []
    assert edited_paths("cat <<'EOF' > reproduce.py\nimport os\nEOF") == ["reproduce.py"]
    assert edited_paths("sed -i 's/a/b/' src/app.py") == ["src/app.py"]
    assert edited_paths("echo x >> notes.md && tee -a log.txt") == ["notes.md", "log.txt"]
    assert edited_paths("python run.py 2>&1 > /dev/null") == []
    assert command_paths("ls #!/usr/bin/env --out=x.py http://a.io/b.py") == ["x.py"]


def test_commands_carry_their_outcome_and_errors_their_chain() -> None:
    trail = Trail()
    trail.call("bash", {"command": "cat pydicom/valuerep.py"})
    trail.result("<returncode>0</returncode>\n<output>class PersonName:</output>")
    trail.call("bash", {"command": "cat <<'EOF' > fix.py\nprint(1)\nEOF"})
    trail.result("<returncode>0</returncode>")
    trail.call("bash", {"command": "python fix.py"})
    trail.result(TRACEBACK)
    trail.call("str_replace_editor", {"path": "src/a.py", "old_str": "x", "new_str": "y"})
    trail.result("edited")
    text = trail.render(1_000, heuristic_count)
    assert f"## {FILES}\n- Edited: fix.py, src/a.py\n- Read: pydicom/valuerep.py" in text
    assert (f"## {EDITS}\n- `cat <<'EOF' > fix.py …` → exit 0\n"
            "- `str_replace_editor src/a.py: −\"x\" +\"y\"`") in text
    assert (f"## {ERRORS}\n- IsADirectoryError: [Errno 21] Is a directory: 'src/project'\n"
            "- astroid.exceptions.AstroidBuildingError: Unable to load file src/project") in text
    assert (f"## {COMMANDS}\n- `cat pydicom/valuerep.py` → exit 0\n"
            "- `python fix.py` → exit 1: astroid.exceptions.AstroidBuildingError") in text


def test_a_tight_budget_drops_old_successes_before_failures() -> None:
    trail = Trail()
    for i in range(30):
        trail.call("bash", {"command": f"grep -n thing module_{i}.py"})
        trail.result(f"<returncode>{1 if i == 2 else 0}</returncode>")
    text = trail.render(120, heuristic_count)
    assert heuristic_count(text) <= 120
    assert "`grep -n thing module_2.py` → exit 1" in text  # the oldest failure stays
    assert "module_29.py" in text and "`grep -n thing module_3.py`" not in text


def test_a_previous_summary_s_trail_is_merged() -> None:
    first = Trail()
    first.call("bash", {"command": "make test"})
    first.result("<returncode>2</returncode>\nerror: missing target")
    previous = first.render(1_000, heuristic_count)
    merged = Trail()
    section = ""
    for line in previous.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.strip():
            assert merged.absorb(section, line)
    merged.call("bash", {"command": "make test"})  # run again: the newest outcome wins
    merged.result("<returncode>0</returncode>")
    text = merged.render(1_000, heuristic_count)
    assert "- error: missing target" in text
    assert text.count("`make test`") == 1 and "`make test` → exit 0" in text


def test_a_reply_stored_as_text_then_calls_summarizes_like_one_call() -> None:
    from datetime import UTC, datetime

    from loci.models import Event
    from loci.text import ExtractiveSummarizer

    when = datetime(2026, 1, 1, tzinfo=UTC)

    def event(n: int, type: str, role: str, content: str = "", **extra: object) -> Event:
        return Event(n, "s", type, role, content, when, 5, **extra)  # type: ignore[arg-type]

    said = "I suspect the parser drops the alias. Next I will run the linter."
    call = {"tool_name": "bash", "tool_call_id": "c1", "args": {"command": "make lint"}}
    together = [event(1, "tool_call", "assistant", said, **call),
                event(2, "tool_result", "tool", "<returncode>2</returncode>\nerror: bad alias",
                      tool_call_id="c1")]
    apart = [event(1, "message", "assistant", said), event(2, "tool_call", "assistant", **call),
             event(3, "tool_result", "tool", "<returncode>2</returncode>\nerror: bad alias",
                   tool_call_id="c1")]  # as the proxy records an answer with text and calls
    summarizer = ExtractiveSummarizer(counter=heuristic_count)
    assert summarizer.summarize(apart) == summarizer.summarize(together)
    assert "`make lint` → exit 2: error: bad alias" in summarizer.summarize(apart)


#: Structured edit inputs as Claude Code's tools send them (a real Edit of the dev set,
#: ../shared/data/claude_code_sessions/cc-3af9b1a7, shortened), str_replace and a patch.
GITLEAKS_EDIT = {
    "replace_all": False, "file_path": "/Users/[USER]/Documents/M-Claude/.gitleaks.toml",
    "old_string": "# Rule for detecting hardcoded IPs (can be security issue)\n[[rules]]\n"
                  "id = \"hardcoded-ip\"\nentropy = 2.0",
    "new_string": "# Rule for detecting hardcoded IPs\n[[rules]]\nid = \"hardcoded-ip\"\n"
                  "entropy = 3.5"}


def test_an_edit_keeps_its_file_and_what_changed() -> None:
    trail = Trail()
    trail.call("Edit", GITLEAKS_EDIT)
    trail.result("The file has been updated.")
    trail.call("MultiEdit", {"file_path": "src/app.py", "edits": [
        {"old_string": "def f(x):", "new_string": "def f(x, y):"},
        {"old_string": "return x", "new_string": "return x + y"}]})
    trail.result("Applied 2 edits.")
    trail.call("Write", {"file_path": "notes.md", "content": "# Notes\nline\nlast line\n"})
    trail.result("File created.")
    trail.call("str_replace_based_edit_tool", {"command": "str_replace", "path": "a.py",
                                               "old_str": "x = 1", "new_str": "x = 2"})
    trail.result("edited")
    trail.call("apply_patch", {"input": "*** Begin Patch\n*** Update File: lib/b.py\n@@\n"
                                        "-old_call()\n+new_call()\n*** End Patch"})
    trail.result("Done!")
    text = trail.render(2_000, heuristic_count)
    edits = text.split(f"## {EDITS}\n")[1].split("\n\n")[0].splitlines()
    assert edits[0].startswith("- `Edit /Users/[USER]/Documents/M-Claude/.gitleaks.toml: "
                               "−\"# Rule for detecting hardcoded IPs (can be security "
                               "issue) ⏎ … ⏎ entropy = 2.0\" +\"# Rule for detecting")
    assert "entropy = 3.5" in edits[0]
    assert edits[1] == ("- `MultiEdit src/app.py: −\"def f(x):\" +\"def f(x, y):\"; "
                        "−\"return x\" +\"return x + y\"`")
    assert edits[2] == "- `Write notes.md: +\"# Notes ⏎ … ⏎ last line\"`"
    assert "a.py: −\"x = 1\" +\"x = 2\"" in edits[3]
    assert edits[4] == "- `apply_patch lib/b.py: −\"old_call()\" +\"new_call()\"`"
    assert "Edited: " in text and "lib/b.py" in text.split("Edited: ")[1].splitlines()[0]


def test_edits_give_way_last_when_the_trail_is_cut() -> None:
    trail = Trail()
    for n in range(30):
        trail.call("bash", {"command": f"ls -la dir_{n} && cat file_{n}.txt"})
        trail.result("ok")
    for n in range(6):
        trail.call("Edit", {"file_path": f"src/m{n}.py", "old_string": f"a = {n}",
                            "new_string": f"a = {n + 1}"})
        trail.result("updated")
    text = trail.render(300, heuristic_count)
    assert text.count("Edit src/m") == 6
    assert text.count("ls -la dir_") < 30


def test_a_todo_tool_keeps_only_its_latest_plan() -> None:
    trail = Trail()
    trail.call("TodoWrite", {"todos": [
        {"activeForm": "Creating backup of repository", "content": "Create backup of repository",
         "status": "in_progress"},
        {"activeForm": "Installing cleanup tools", "content": "Install cleanup tools",
         "status": "pending"}]})
    trail.result("Todos have been modified successfully.")
    trail.call("TodoWrite", {"todos": [
        {"content": "Create backup of repository", "status": "completed"},
        {"content": "Install cleanup tools", "status": "in_progress"}]})
    trail.result("Todos have been modified successfully.")
    trail.call("update_plan", {"plan": [{"step": "Run the test suite", "status": "pending"}]})
    trail.result("Plan updated")
    text = trail.render(1_000, heuristic_count)
    assert text == f"## {PLAN}\n- [pending] Run the test suite"
    assert "TodoWrite" not in text and "backup" not in text  # not an edit, not a command
    assert f"## {EDITS}" not in text and f"## {COMMANDS}" not in text


def test_an_edit_tool_names_its_file_whatever_its_name() -> None:
    trail = Trail()
    trail.call("Write", {"file_path": "/Users/[USER]/Documents/M-Claude/.git/hooks/pre-commit",
                         "content": "#!/usr/bin/env bash\nset -e\nfi\n"})
    trail.result("File created successfully")
    text = trail.render(1_000, heuristic_count)
    assert "- Edited: /Users/[USER]/Documents/M-Claude/.git/hooks/pre-commit" in text
    assert "`Write /Users/[USER]/Documents/M-Claude/.git/hooks/pre-commit: +\"#!/usr" in text
    assert "Write ?" not in text


def test_a_file_read_back_is_not_this_session_s_errors() -> None:
    transcript = ("    34→\n    35→**You:** [{'type': 'tool_result', 'content': 'Exit code 127\\n"
                  "/usr/bin/bash: line 1: gh: command not found', 'is_error': True}]\n"
                  "    36→Error: something the file says\n")
    trail = Trail()
    trail.call("Read", {"file_path": "/Users/[USER]/Documents/M-Claude/CHAT_LOGS/s.md"})
    trail.result(transcript)
    trail.call("Read", {"file_path": "missing.md"})
    trail.result("File does not exist.")
    trail.call("Bash", {"command": "gh pr list"})
    trail.result("Exit code 127\n/usr/bin/bash: line 1: gh: command not found")
    errors = trail.render(1_000, heuristic_count).split(f"## {ERRORS}\n")[1].split("\n\n")[0]
    assert errors.splitlines() == ["- /usr/bin/bash: line 1: gh: command not found"]


def test_the_whole_trail_survives_a_round_trip_and_continues() -> None:
    trail = Trail()
    for n in range(60):
        trail.call("Bash", {"command": f"ls -la dir_{n}"})
        trail.result("ok" if n != 7 else "Exit code 1\nls: dir_7: No such file or directory")
    trail.call("Read", {"file_path": "src/app.py"})
    trail.result("1→print()")
    whole = trail.render(None)
    assert whole.count("`ls -la dir_") == 60  # no budget: nothing cut
    again = Trail.parse(whole)
    assert again.render(None) == whole
    entries = again.entries()
    assert (FILES, "- Read: src/app.py") in entries
    assert entries[-1] == (COMMANDS, "- `ls -la dir_59` → ok")  # a file read is no command
    assert sum(section == COMMANDS for section, _ in entries) == 60
