"""Loci's memory tool against the ``anthropic`` SDK's local-filesystem reference: the
same commands give the same results and the same error texts; the files are versioned
documents; nothing leaves ``/memories``; and a scripted ``tool_runner`` run of the six
commands goes through the SDK."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

from loci import Loci
from loci.integrations.anthropic_memory import LociAsyncMemoryTool, LociMemoryTool
from tests.server.fake_upstream import Upstream

#: Commands in order, each as the model sends it; every result (or error) is compared.
SCRIPT: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\ngamma\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta",
     "new_str": "BETA"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "zeta",
     "new_str": "x"},
    {"command": "create", "path": "/memories/dup.md", "file_text": "a\nb a\n"},
    {"command": "str_replace", "path": "/memories/dup.md", "old_str": "a", "new_str": "c"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 1,
     "insert_text": "inserted\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 99,
     "insert_text": "x"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "create", "path": "/memories/project/plan.md", "file_text": "step 1\n"},
    {"command": "rename", "old_path": "/memories/dup.md",
     "new_path": "/memories/project/dup.md"},
    {"command": "rename", "old_path": "/memories/missing.md", "new_path": "/memories/m.md"},
    {"command": "rename", "old_path": "/memories/notes.md",
     "new_path": "/memories/project/plan.md"},
    {"command": "view", "path": "/memories/nothing.md"},
    {"command": "str_replace", "path": "/memories/missing.md", "old_str": "a",
     "new_str": "b"},
    {"command": "delete", "path": "/memories/project/dup.md"},
    {"command": "delete", "path": "/memories/project/dup.md"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "view", "path": "/memories/../etc/passwd"},
]


def outcome(tool: Any, command: dict[str, Any]) -> str:
    try:
        return str(tool.call(command))
    except ToolError as exc:
        return f"error: {exc}"


def comparable(text: str) -> str:
    """A directory's size depends on the file system; its entries must match."""
    if not text.startswith("Here're the files"):
        return text
    return "\n".join(line.split("\t", 1)[-1] for line in text.splitlines())


def test_every_command_answers_as_the_reference_does(loci: Loci, tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "reference"))
    ours = LociMemoryTool(loci)
    for command in SCRIPT:
        expected, got = outcome(reference, command), outcome(ours, command)
        assert comparable(got) == comparable(expected), command


def test_files_are_versioned_searchable_documents(loci: Loci) -> None:
    tool = LociMemoryTool(loci)
    tool.call({"command": "create", "path": "/memories/prefs.md",
               "file_text": "Likes green tea.\n"})
    tool.call({"command": "str_replace", "path": "/memories/prefs.md",
               "old_str": "green", "new_str": "jasmine"})
    document = loci.knowledge.get("/memories/prefs.md")
    assert document.version == 2 and "jasmine" in document.content
    assert loci.knowledge.get("/memories/prefs.md", version=1).content == "Likes green tea.\n"
    assert [h.path for h in loci.search_knowledge("jasmine tea")] == ["/memories/prefs.md"]
    assert loci.for_scope(user="someone-else").knowledge.ls("/memories/") == []


@pytest.mark.parametrize("path", [
    "/memories/../profile/x.md", "/memories/%2e%2e/profile/x.md", "/memories/..%2fx.md",
    "/memories/%252e%252e/x.md", "/memories\\..\\x.md", "/memoriesX/a.md", "/etc/passwd",
    "/memories/./a.md", "memories/a.md",
])
def test_paths_never_leave_memories(loci: Loci, path: str) -> None:
    tool = LociMemoryTool(loci)
    with pytest.raises(ToolError):
        tool.call({"command": "create", "path": path, "file_text": "x"})
    assert loci.knowledge.ls("/") == []


def test_the_async_tool_runs_the_same_commands(loci: Loci) -> None:
    tool = LociAsyncMemoryTool(loci)

    async def run() -> list[str]:
        return [str(await tool.call(c)) for c in SCRIPT[1:2] + SCRIPT[3:4]]

    created, viewed = asyncio.run(run())
    assert created == "File created successfully at: /memories/notes.md"
    assert viewed.endswith("     1\talpha\n     2\tbeta\n     3\tgamma\n     4\t")


def test_a_tool_runner_uses_loci_as_its_memory(loci: Loci, upstream: Upstream) -> None:
    """The SDK's tool runner, against a scripted Messages server, executes the model's
    six commands on Loci and sends each result back."""
    steps = [
        {"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "two",
         "new_str": "2"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 0,
         "insert_text": "zero"},
        {"command": "view", "path": "/memories/a.md"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"},
        {"command": "create", "path": "/memories/c.md", "file_text": "tmp"},
        {"command": "delete", "path": "/memories/c.md"},
    ]
    upstream.replies += [[{"id": f"toolu_{n}", "type": "function", "function": {
        "name": "memory", "arguments": json.dumps(step)}}] for n, step in enumerate(steps)]
    upstream.replies.append("All remembered.")
    with Anthropic(base_url=f"{upstream.url}/anthropic", api_key="k", max_retries=0) as client:
        runner = client.beta.messages.tool_runner(
            model="claude-test", max_tokens=256, tools=[LociMemoryTool(loci)],
            messages=[{"role": "user", "content": "Remember my notes."}])
        final = runner.until_done()
    assert final.content[0].text == "All remembered."  # type: ignore[union-attr]
    results = [r["body"]["messages"][-1]["content"][0] for r in upstream.requests[1:]]
    assert [r["tool_use_id"] for r in results] == [f"toolu_{n}" for n in range(7)]
    assert results[0]["content"] == "File created successfully at: /memories/a.md"
    assert "     1\tzero\n     2\tone\n     3\t2" in str(results[3]["content"])
    assert results[6]["content"] == "Successfully deleted /memories/c.md"
    assert [d.path for d in loci.knowledge.ls("/memories/")] == ["/memories/b.md"]


def test_a_directory_is_not_moved_into_itself(loci: Loci) -> None:
    """The reference fails here with the file system's OSError; ours says why and
    leaves the files where they were."""
    tool = LociMemoryTool(loci)
    tool.call({"command": "create", "path": "/memories/x/a.md", "file_text": "kept"})
    with pytest.raises(ToolError, match="into itself"):
        tool.call({"command": "rename", "old_path": "/memories/x",
                   "new_path": "/memories/x/sub"})
    assert [d.path for d in loci.knowledge.ls("/memories/")] == ["/memories/x/a.md"]


def test_a_directory_that_cannot_move_whole_stays_whole(loci: Loci) -> None:
    """One file's new path is too long: no file of the directory moves."""
    tool = LociMemoryTool(loci)
    tool.call({"command": "create", "path": "/memories/d/a.md", "file_text": "one"})
    deep = "/memories/d/" + "/".join(["z" * 200] * 4)  # 900 characters: it fits
    tool.call({"command": "create", "path": deep, "file_text": "two"})
    with pytest.raises(ToolError, match="longer than 1024"):
        tool.call({"command": "rename", "old_path": "/memories/d",
                   "new_path": "/memories/" + "n" * 250})
    assert [d.path for d in loci.knowledge.ls("/memories/")] == ["/memories/d/a.md", deep]


def test_a_folder_named_in_decomposed_unicode_moves_and_lists_whole(loci: Loci) -> None:
    """The knowledge base keeps paths in NFC: a path sent decomposed (NFD) names the
    same folder, and its files keep their names when it moves."""
    tool = LociMemoryTool(loci)
    nfd = unicodedata.normalize("NFD", "/memories/café")
    tool.call({"command": "create", "path": f"{nfd}/notes.md", "file_text": "kept"})
    assert "notes.md" in str(tool.call({"command": "view", "path": nfd}))
    tool.call({"command": "rename", "old_path": nfd, "new_path": "/memories/archive"})
    assert [d.path for d in loci.knowledge.ls("/memories/")] == ["/memories/archive/notes.md"]


def test_str_replace_answers_at_once_whatever_the_file(loci: Loci) -> None:
    """An empty ``old_str`` in a 2 MB file took 551 s and answered with every position;
    the lines of a repeated one were counted from the start for each."""
    tool = LociMemoryTool(loci)
    tool.call({"command": "create", "path": "/memories/big.md",
               "file_text": "a\n" * 500_000})
    with pytest.raises(ToolError, match="old_str is empty"):
        tool.call({"command": "str_replace", "path": "/memories/big.md", "old_str": "",
                   "new_str": "X"})
    with pytest.raises(ToolError) as raised:
        tool.call({"command": "str_replace", "path": "/memories/big.md", "old_str": "a",
                   "new_str": "b"})
    message = str(raised.value)
    assert "in lines: 1, 2, 3," in message and "(and 499,950 more)" in message
    assert len(message) < 1_000
    assert loci.knowledge.get("/memories/big.md").version == 1


@pytest.mark.parametrize("command", [
    {"command": "create", "path": "/memories/ a.md", "file_text": "x"},
    {"command": "create", "path": "/memories/" + "x" * 300 + ".md", "file_text": "x"},
    {"command": "create", "path": "/memories/a\ud800.md", "file_text": "x"},
    {"command": "view", "path": "/memories/v.md", "view_range": ["a", "b"]},
    {"command": "view", "path": "/memories/v.md", "view_range": [None, None]},
    {"command": "view", "path": "/memories/v.md", "view_range": 5},
])
def test_a_models_mistake_is_a_tool_error(loci: Loci, command: dict[str, Any]) -> None:
    """The SDK sends a ``ToolError``'s text back to the model; any other exception it
    logs as a crash of the tool."""
    tool = LociMemoryTool(loci)
    tool.call({"command": "create", "path": "/memories/v.md", "file_text": "one\ntwo"})
    with pytest.raises(ToolError):
        tool.call(command)
    assert [d.path for d in loci.knowledge.ls("/memories/")] == ["/memories/v.md"]
