"""The files of Anthropic's memory tool (``memory_20250818``), kept in the knowledge base.

The model calls six commands on paths under ``/memories``: ``view`` (a file with line
numbers, or a directory two levels deep), ``create``, ``str_replace`` (the old text must
occur exactly once), ``insert`` (at a line), ``delete`` and ``rename``. Each file is a
document of the caller's scope at the same path, so every write is a new version and
the files are searchable like any document. Results and error texts follow the
``anthropic`` SDK's local-filesystem reference, which models are used to; a directory's
size is the bytes of the files under it. Paths that leave ``/memories`` (``..``, their
URL-encoded forms, backslashes) are refused.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import unquote

from loci.errors import ConflictError, LociError
from loci.knowledge.service import KnowledgeBase, NewDocument
from loci.models import Document

ROOT = "/memories"
#: Digits of a line number in ``view`` and ``str_replace`` output.
LINE_NUMBER_WIDTH = 6
MAX_LINES = 999_999


class MemoryToolError(LociError):
    """A memory command the model should correct (its text is the tool's result)."""

    http_status = 400


class MemoryFiles:
    """The ``/memories`` directory of one scope's knowledge base."""

    #: The directory the tool's paths live under.
    ROOT: ClassVar[str] = ROOT

    def __init__(self, knowledge: KnowledgeBase) -> None:
        self.kb = knowledge

    def run(self, command: Mapping[str, Any]) -> str:
        """Run one command as the model sends it (``{"command": "view", ...}``)."""
        name = command.get("command")
        if name == "view":
            return self.view(command.get("path"), command.get("view_range"))
        if name == "create":
            return self.create(command.get("path"), command.get("file_text"))
        if name == "str_replace":
            return self.str_replace(command.get("path"), command.get("old_str"),
                                    command.get("new_str"))
        if name == "insert":
            return self.insert(command.get("path"), command.get("insert_line"),
                               command.get("insert_text"))
        if name == "delete":
            return self.delete(command.get("path"))
        if name == "rename":
            return self.rename(command.get("old_path"), command.get("new_path"))
        raise MemoryToolError(f"Unknown memory command: {name!r}")

    # -- the six commands ----------------------------------------------------------
    def view(self, path: Any, view_range: Sequence[int] | None = None) -> str:
        path = _checked(path)
        document = self._file(path)
        if document is not None:
            lines = document.content.split("\n")
            if len(lines) > MAX_LINES:
                raise MemoryToolError(f"File {path} exceeds maximum line limit of "
                                      "999,999 lines.")
            start = 1
            if view_range:
                start, end = _range(view_range, len(lines))
                lines = lines[start - 1:end]
            return (f"Here's the content of {path} with line numbers:\n"
                    + "\n".join(_numbered(start + i, line) for i, line in enumerate(lines)))
        below = self._below(path)
        if not below and path != ROOT:
            raise MemoryToolError(f"The path {path} does not exist. Please provide a valid "
                                  "path.")
        return _listing(path, below)

    def create(self, path: Any, file_text: Any) -> str:
        path = _file_path(path)
        if self._file(path) is not None or self._below(path):
            raise MemoryToolError(f"File {path} already exists")
        self._write(path, _text("file_text", file_text), expected="")
        return f"File created successfully at: {path}"

    def str_replace(self, path: Any, old_str: Any, new_str: Any) -> str:
        path, old, new = _checked(path), _text("old_str", old_str), _text("new_str", new_str)
        if not old:  # it occurs between every two characters: nothing to replace
            raise MemoryToolError("No replacement was performed: old_str is empty.")
        document = self._existing(path)
        content = document.content
        count = content.count(old)
        if count == 0:
            raise MemoryToolError(f"No replacement was performed, old_str `{old}` did not "
                                  f"appear verbatim in {path}.")
        if count > 1:
            raise MemoryToolError(f"No replacement was performed. Multiple occurrences of "
                                  f"old_str `{old}` in lines: {_lines_of(content, old)}. "
                                  "Please ensure it is unique")
        changed = content[:content.find(old)].count("\n")
        updated = content.replace(old, new)
        self._write(path, updated, expected=document.sha256)
        lines = updated.split("\n")
        first, last = max(0, changed - 2), min(len(lines), changed + 3)
        snippet = [_numbered(n, lines[n - 1]) for n in range(first + 1, last + 1)]
        return ("The memory file has been edited. Here is the snippet showing the change "
                "(with line numbers):\n" + "\n".join(snippet))

    def insert(self, path: Any, insert_line: Any, insert_text: Any) -> str:
        path, text = _checked(path), _text("insert_text", insert_text)
        document = self._existing(path)
        lines = document.content.split("\n")
        if lines[-1] == "":
            lines.pop()
        if not isinstance(insert_line, int) or not 0 <= insert_line <= len(lines):
            raise MemoryToolError(f"Invalid `insert_line` parameter: {insert_line}. It "
                                  f"should be within the range [0, {len(lines)}].")
        lines.insert(insert_line, text.rstrip("\n"))
        updated = "\n".join(lines)
        self._write(path, updated if updated.endswith("\n") else updated + "\n",
                    expected=document.sha256)
        return f"The file {path} has been edited."

    def delete(self, path: Any) -> str:
        path = _checked(path)
        if path == ROOT:
            raise MemoryToolError("Cannot delete the /memories directory itself")
        doomed = [path] if self._file(path) is not None else [d.path for d in self._below(path)]
        if not doomed:
            raise MemoryToolError(f"The path {path} does not exist")
        for doc_path in doomed:
            self.kb.rm(doc_path)
        return f"Successfully deleted {path}"

    def rename(self, old_path: Any, new_path: Any) -> str:
        old, new = _checked(old_path), _checked(new_path)
        if old == ROOT:
            raise MemoryToolError("Cannot rename the /memories directory itself")
        if self._file(new) is not None or self._below(new):
            raise MemoryToolError(f"The destination {new} already exists")
        single = self._file(old)
        if single is None and new.startswith(old.rstrip("/") + "/"):
            raise MemoryToolError(f"Cannot move the directory {old} into itself ({new})")
        moving = [single] if single is not None else self._below(old)
        if not moving:
            raise MemoryToolError(f"The path {old} does not exist")
        # Every file written in one transaction (a path too long stores none), then the
        # old ones removed: a failure leaves a copy, never half a folder moved.
        try:
            self.kb.put_many([NewDocument(new + d.path[len(old):], d.content, ("memory",),
                                          expected_sha256="") for d in moving],
                             allow_empty=True)
        except ConflictError as exc:
            raise MemoryToolError(str(exc)) from exc
        for document in moving:
            self.kb.rm(document.path)
        return f"Successfully renamed {old} to {new}"

    # -- helpers -------------------------------------------------------------------
    def _file(self, path: str) -> Document | None:
        return None if path == ROOT else self.kb.find(path)

    def _existing(self, path: str) -> Document:
        document = self._file(path)
        if document is None:
            kind = "is not a file" if self._below(path) or path == ROOT else "does not exist"
            suffix = ". Please provide a valid path." if kind == "does not exist" else "."
            raise MemoryToolError(f"The path {path} {kind}{suffix}")
        return document

    def _below(self, path: str) -> list[Document]:
        return self.kb.ls(path.rstrip("/") + "/")

    def _write(self, path: str, content: str, *, expected: str) -> None:
        """Write unless the file changed since it was read (another writer: the model
        reads it again), as a new version."""
        try:
            self.kb.put(path, content, tags=("memory",), allow_empty=True,
                        expected_sha256=expected)
        except ConflictError as exc:
            raise MemoryToolError(str(exc)) from exc


def _checked(path: Any) -> str:
    """A path under ``/memories`` in NFC, as the knowledge base keeps paths (its
    length is what a folder's files are renamed and listed by), or the reference's
    error; nothing can escape it."""
    if not isinstance(path, str) or not path.startswith(ROOT):
        raise MemoryToolError(f"Path must start with /memories, got: {path}")
    path = unicodedata.normalize("NFC", path)
    decoded = path
    for _ in range(3):  # a face may decode once more: %252e%252e is ..
        decoded = unquote(decoded)
    after = decoded[len(ROOT):]
    if (after[:1] not in ("", "/") or "\\" in decoded or "\0" in decoded
            or any(part in (".", "..") for part in after.split("/"))):
        raise MemoryToolError(f"Path {path} would escape /memories directory")
    rest = "/".join(part for part in path[len(ROOT):].split("/") if part)
    return f"{ROOT}/{rest}" if rest else ROOT


def _file_path(path: Any) -> str:
    checked = _checked(path)
    if checked == ROOT:
        raise MemoryToolError(f"File {checked} already exists")
    return checked


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise MemoryToolError(f"`{name}` must be a string")
    return value


def _numbered(number: int, line: str) -> str:
    return f"{str(number).rjust(LINE_NUMBER_WIDTH)}\t{line}"


def _range(view_range: Any, lines: int) -> tuple[int, int]:
    """A ``view_range`` of two whole line numbers (the end -1: the last line) as the
    first and the last line to show."""
    if not (isinstance(view_range, list | tuple) and len(view_range) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
        raise MemoryToolError(f"Invalid `view_range` parameter: {view_range!r}. It should "
                              "be two line numbers, [start, end] (end -1: to the last).")
    start, end = view_range
    return max(1, start), lines if end == -1 else end


def _lines_of(text: str, part: str) -> str:
    """The lines ``part`` occurs on, as the reference lists them (the first
    ``LINES_LISTED``: a model needs no more to see it is not unique), counted in one
    pass over ``text``."""
    lines: list[str] = []
    line, counted, at = 1, 0, text.find(part)
    while at != -1 and len(lines) < LINES_LISTED:
        line += text.count("\n", counted, at)
        counted = at
        lines.append(str(line))
        at = text.find(part, at + 1)
    more = 0
    while at != -1:  # past those listed: only counted
        more += 1
        at = text.find(part, at + 1)
    return ", ".join(lines) + (f" (and {more:,} more)" if more else "")


#: Lines of a non-unique ``old_str`` an error lists.
LINES_LISTED = 50


def _listing(path: str, documents: Sequence[Document]) -> str:
    """The directory two levels deep, as the reference lists it: entries sorted by name,
    a directory followed by its own entries, hidden ones left out."""
    base = path.rstrip("/") + "/"
    sizes: dict[str, int] = {}
    for document in documents:
        parts = document.path[len(base):].split("/")
        if any(part.startswith(".") for part in parts):
            continue
        size = len(document.content.encode())
        for depth in range(1, min(len(parts), 2) + 1):
            is_dir = depth < len(parts)
            entry = "/".join(parts[:depth]) + ("/" if is_dir else "")
            sizes[entry] = sizes.get(entry, 0) + size
    total = sum(len(d.content.encode()) for d in documents)
    lines = [f"{_size(total)}\t{path}"]
    lines += [f"{_size(sizes[entry])}\t{path}/{entry}" for entry in sorted(
        sizes, key=lambda e: e.rstrip("/").split("/"))]
    return (f"Here're the files and directories up to 2 levels deep in {path}, excluding "
            "hidden items:\n" + "\n".join(lines))


def _size(size: int) -> str:
    if size == 0:
        return "0B"
    unit = min((size.bit_length() - 1) // 10, 3)
    value = size / 1024**unit
    text = f"{int(value)}" if value == int(value) else f"{value:.1f}"
    return text + "BKMG"[unit]
